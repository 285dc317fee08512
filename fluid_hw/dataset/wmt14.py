"""Synthetic ``paddle.dataset.wmt14`` (French -> English): source sentences of
3-10 words and their translation, a fixed word-for-word mapping. Samples are
``(src_ids, trg_ids, trg_ids_next)`` as Paddle's: the source wrapped in ``<s>`` ...
``<e>``, the target starting with ``<s>`` and the next-word target ending with
``<e>``; ids 0, 1, 2 are ``<s>``, ``<e>``, ``<unk>``. 1000 training and 200 test
pairs."""

from __future__ import annotations

from collections.abc import Iterator

from ._synth import Reader, rng

START, END, UNK = "<s>", "<e>", "<unk>"
START_ID, END_ID, UNK_ID = 0, 1, 2
_COUNTS = {"train": 1000, "test": 200, "gen": 50}


def _check(dict_size: int) -> None:
    if dict_size < 4:
        raise ValueError(f"wmt14: dict_size {dict_size} is too small; give at least 4 "
                         "(3 ids are <s>, <e>, <unk>)")


def get_dict(dict_size: int, reverse: bool = True) -> tuple[dict, dict]:
    """``(src_dict, trg_dict)``: id -> word when ``reverse`` (Paddle's default),
    else word -> id."""
    _check(dict_size)
    src = [START, END, UNK] + [f"fr{i}" for i in range(3, dict_size)]
    trg = [START, END, UNK] + [f"en{i}" for i in range(3, dict_size)]
    if reverse:
        return dict(enumerate(src)), dict(enumerate(trg))
    return {w: i for i, w in enumerate(src)}, {w: i for i, w in enumerate(trg)}


def _reader(split: str, dict_size: int) -> Reader:
    _check(dict_size)

    def reader() -> Iterator[tuple[list[int], list[int], list[int]]]:
        mapping = rng("wmt14", "mapping").permutation(dict_size - 3) + 3
        r = rng("wmt14", split)
        for _ in range(_COUNTS[split]):
            src = [int(w) for w in r.randint(3, dict_size, size=r.randint(3, 11))]
            trg = [int(mapping[w - 3]) for w in src]
            yield [START_ID, *src, END_ID], [START_ID, *trg], [*trg, END_ID]

    return reader


def train(dict_size: int) -> Reader:
    """Training reader: ``(src_ids, trg_ids, trg_ids_next)``."""
    return _reader("train", dict_size)


def test(dict_size: int) -> Reader:
    """Test reader, the same layout as :func:`train`."""
    return _reader("test", dict_size)


def gen(dict_size: int) -> Reader:
    """Generation reader (a few pairs to translate), the same layout."""
    return _reader("gen", dict_size)
