"""Synthetic ``paddle.dataset.imikolov`` (the PTB language-model corpus): sentences
from a fixed Markov chain over 200 words, each word followed by its usual
successor four times in five. 600 training and 150 test sentences of 5-15 words;
``<s>``, ``<e>`` and ``<unk>`` in the dictionary as Paddle's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ._synth import Reader, rng

_VOCAB = 200
_COUNTS = {"train": 600, "test": 150}


class DataType:
    """What the readers yield: ``NGRAM`` tuples of ``n`` ids, or ``SEQ`` pairs
    ``(source, target)`` of a whole sentence shifted by one."""

    NGRAM = 1
    SEQ = 2


def build_dict(min_word_freq: int = 50) -> dict[str, int]:
    """word -> id: the corpus words, then ``<s>``, ``<e>``, and ``<unk>`` last
    (``min_word_freq`` accepted for Paddle's signature)."""
    d = {f"w{i}": i for i in range(_VOCAB)}
    d["<s>"] = _VOCAB
    d["<e>"] = _VOCAB + 1
    d["<unk>"] = _VOCAB + 2
    return d


def _sentences(split: str) -> Iterator[list[str]]:
    succ = rng("imikolov", "chain").permutation(_VOCAB)
    r = rng("imikolov", split)
    for _ in range(_COUNTS[split]):
        w = int(r.randint(0, _VOCAB))
        words = []
        for _ in range(int(r.randint(5, 16))):
            words.append(f"w{w}")
            w = int(succ[w]) if r.rand() < 0.8 else int(r.randint(0, _VOCAB))
        yield words


def _reader(split: str, word_idx: dict[str, int], n: int, data_type: int) -> Reader:
    unk = word_idx["<unk>"]

    def reader() -> Iterator[Any]:
        for words in _sentences(split):
            if data_type == DataType.NGRAM:
                ids = [word_idx.get(w, unk) for w in ["<s>", *words, "<e>"]]
                for i in range(n, len(ids) + 1):
                    yield tuple(ids[i - n:i])
            elif data_type == DataType.SEQ:
                ids = [word_idx.get(w, unk) for w in words]
                src, trg = [word_idx["<s>"], *ids], [*ids, word_idx["<e>"]]
                if n > 0 and len(src) > n:
                    continue
                yield src, trg
            else:
                raise ValueError(f"imikolov: unknown data_type {data_type!r}; use "
                                 "DataType.NGRAM or DataType.SEQ")

    return reader


def train(word_idx: dict[str, int], n: int, data_type: int = DataType.NGRAM) -> Reader:
    """Training reader: ``n``-gram tuples of ids (``NGRAM``), or ``(src, trg)``
    id lists of sentences no longer than ``n`` (``SEQ``; ``n <= 0``: any)."""
    return _reader("train", word_idx, n, data_type)


def test(word_idx: dict[str, int], n: int, data_type: int = DataType.NGRAM) -> Reader:
    """Test reader, the same layout as :func:`train`."""
    return _reader("test", word_idx, n, data_type)
