"""Synthetic ``paddle.dataset.imdb``: movie reviews as lists of word ids and a
label (0 positive, 1 negative, as Paddle's), each review drawing a share of its
words from a set of words of its sentiment. 800 training and 200 test reviews of
5-20 words over a 1000-word dictionary (``<unk>`` last)."""

from __future__ import annotations

from collections.abc import Iterator

from ._synth import Reader, rng

_VOCAB = 1000
_SENTIMENT_WORDS = 60  # ids 0-59 lean positive, 60-119 negative, the rest neutral
_COUNTS = {"train": 800, "test": 200}


def build_dict(pattern: object = None, cutoff: int = 150) -> dict[str, int]:
    """The word dictionary, word -> id, ``<unk>`` last (``pattern`` and ``cutoff``
    are accepted for Paddle's signature; the synthetic corpus has one dictionary)."""
    d = {f"w{i}": i for i in range(_VOCAB)}
    d["<unk>"] = _VOCAB
    return d


def word_dict() -> dict[str, int]:
    """The dictionary the readers' ids index, as ``paddle.dataset.imdb.word_dict``."""
    return build_dict()


def _reader(split: str, word_idx: dict[str, int]) -> Reader:
    unk = word_idx.get("<unk>", len(word_idx) - 1)
    ids = [word_idx.get(f"w{i}", unk) for i in range(_VOCAB)]

    def reader() -> Iterator[tuple[list[int], int]]:
        r = rng("imdb", split)
        for _ in range(_COUNTS[split]):
            label = int(r.randint(0, 2))
            n = int(r.randint(5, 21))
            lo = label * _SENTIMENT_WORDS
            words = [int(r.randint(lo, lo + _SENTIMENT_WORDS)) if r.rand() < 0.4
                     else int(r.randint(2 * _SENTIMENT_WORDS, _VOCAB)) for _ in range(n)]
            yield [ids[w] for w in words], label

    return reader


def train(word_idx: dict[str, int]) -> Reader:
    """Training reader: ``(word ids list[int], label 0/1)``."""
    return _reader("train", word_idx)


def test(word_idx: dict[str, int]) -> Reader:
    """Test reader, the same layout as :func:`train`."""
    return _reader("test", word_idx)
