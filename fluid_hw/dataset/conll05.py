"""Synthetic ``paddle.dataset.conll05`` (semantic role labelling): sentences with
one predicate whose arguments follow a fixed grammar (an A0 noun phrase before the
verb, an A1 noun phrase after it, sometimes a time adjunct), labelled in the IOB
scheme. ``test()`` yields the nine sequences of Paddle's reader; ``get_dict`` the
word, verb and label dictionaries; ``get_embedding`` the path of a pretrained-
embedding file in Paddle's layout (a 16-byte header, then float32 rows)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from functools import cache

import numpy as np

from ._synth import Reader, rng

UNK_IDX = 0
EMB_DIM = 32
_LABELS = ["B-A0", "I-A0", "B-A1", "I-A1", "B-AM-TMP", "I-AM-TMP", "B-V", "I-V", "O"]
_KINDS = {"d": 6, "n": 80, "v": 20, "tm": 10, "o": 40}
_COUNTS = {"train": 500, "test": 500}


@cache
def get_dict() -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """``(word_dict, verb_dict, label_dict)``, each name -> id; ``<unk>`` is word 0,
    ``bos``/``eos`` pad the predicate's context."""
    words = ["<unk>", "bos", "eos"] + [f"{k}{i}" for k, n in _KINDS.items() for i in range(n)]
    verbs = [f"v{i}" for i in range(_KINDS["v"])]
    return ({w: i for i, w in enumerate(words)}, {v: i for i, v in enumerate(verbs)},
            {lab: i for i, lab in enumerate(_LABELS)})


def get_embedding() -> str:
    """Path of a file of pretrained word embeddings (``len(word_dict)`` rows of 32
    float32 after a 16-byte header, Paddle's layout), written on first use."""
    word_dict = get_dict()[0]
    path = os.path.join(tempfile.gettempdir(), f"fluid_hw_conll05_emb_{len(word_dict)}")
    if not os.path.exists(path):
        emb = rng("conll05", "embedding").standard_normal((len(word_dict), EMB_DIM))
        tmp = f"{path}.{os.getpid()}"
        with open(tmp, "wb") as f:
            f.write(b"\0" * 16)
            emb.astype(np.float32).tofile(f)
        os.replace(tmp, path)
    return path


def _word(r: np.random.RandomState, kind: str) -> str:
    return f"{kind}{int(r.randint(0, _KINDS[kind]))}"


def _sentence(r: np.random.RandomState) -> tuple[list[str], list[str], int]:
    words: list[str] = []
    labels: list[str] = []

    def span(ws: list[str], role: str) -> None:
        words.extend(ws)
        labels.extend(["O"] * len(ws) if role == "O" else
                      [f"B-{role}"] + [f"I-{role}"] * (len(ws) - 1))

    span([_word(r, "o") for _ in range(r.randint(0, 3))], "O")
    span(([_word(r, "d")] if r.rand() < 0.5 else []) + [_word(r, "n")], "A0")
    verb_at = len(words)
    span([_word(r, "v")], "V")
    span(([_word(r, "d")] if r.rand() < 0.5 else [])
         + [_word(r, "n") for _ in range(r.randint(1, 3))], "A1")
    if r.rand() < 0.5:
        span([_word(r, "tm") for _ in range(r.randint(1, 3))], "AM-TMP")
    span([_word(r, "o") for _ in range(r.randint(0, 3))], "O")
    return words, labels, verb_at


def _reader(split: str) -> Reader:
    word_dict, verb_dict, label_dict = get_dict()

    def reader() -> Iterator[tuple[list[int], ...]]:
        r = rng("conll05", split)
        for _ in range(_COUNTS[split]):
            words, labels, p = _sentence(r)
            n = len(words)

            padded = ["bos", "bos", *words, "eos", "eos"]
            mark = [1 if abs(i - p) <= 2 else 0 for i in range(n)]
            ctx = [[word_dict.get(padded[p + 2 + d], UNK_IDX)] * n for d in (-2, -1, 0, 1, 2)]
            yield ([word_dict.get(w, UNK_IDX) for w in words], *ctx,
                   [verb_dict[words[p]]] * n, mark, [label_dict[lab] for lab in labels])

    return reader


def train() -> Reader:
    """A training reader (the real dataset ships only its test split; this one
    has both): ``(word_idx, ctx_n2, ctx_n1, ctx_0, ctx_p1, ctx_p2, pred_idx,
    mark, label_idx)``, each a list as long as the sentence."""
    return _reader("train")


def test() -> Reader:
    """The reader Paddle's book trains on, the same layout as :func:`train`."""
    return _reader("test")
