"""Synthetic ``paddle.dataset.wmt16`` (English <-> German, Multi30k): source
sentences of 3-10 words and their translation, a fixed word-for-word mapping
between the two languages' dictionaries. Samples are ``(src_ids, trg_ids,
trg_ids_next)`` as Paddle's: the source wrapped in ``<s>`` ... ``<e>``, the target
starting with ``<s>`` and the next-word target ending with ``<e>``; ids 0, 1, 2 are
``<s>``, ``<e>``, ``<unk>`` in both dictionaries. 1000 training, 200 test and 200
validation pairs."""

from __future__ import annotations

from collections.abc import Iterator

from ._synth import Reader, rng

START_MARK, END_MARK, UNK_MARK = "<s>", "<e>", "<unk>"
_COUNTS = {"train": 1000, "test": 200, "val": 200}
_LANGS = ("en", "de")


def _check(src_dict_size: int, trg_dict_size: int, src_lang: str) -> None:
    if src_lang not in _LANGS:
        raise ValueError(f"wmt16: src_lang {src_lang!r} is not one of {list(_LANGS)}")
    for what, n in (("src_dict_size", src_dict_size), ("trg_dict_size", trg_dict_size)):
        if n < 4:
            raise ValueError(f"wmt16: {what} {n} is too small; give at least 4 (3 ids are "
                             "<s>, <e>, <unk>)")


def get_dict(lang: str, dict_size: int, reverse: bool = False) -> dict:
    """The dictionary of ``lang`` (``en`` or ``de``): word -> id, or id -> word when
    ``reverse``."""
    if lang not in _LANGS:
        raise ValueError(f"wmt16: lang {lang!r} is not one of {list(_LANGS)}")
    words = [START_MARK, END_MARK, UNK_MARK] + [f"{lang}{i}" for i in range(3, dict_size)]
    return dict(enumerate(words)) if reverse else {w: i for i, w in enumerate(words)}


def _reader(split: str, src_dict_size: int, trg_dict_size: int, src_lang: str) -> Reader:
    _check(src_dict_size, trg_dict_size, src_lang)

    def reader() -> Iterator[tuple[list[int], list[int], list[int]]]:
        # the shared vocabulary: each of the smaller dictionary's words has one
        # translation; both directions use the same pairs
        n = min(src_dict_size, trg_dict_size) - 3
        en_to_de = rng("wmt16", "mapping").permutation(n) + 3
        mapping = en_to_de if src_lang == "en" else en_to_de.argsort() + 3
        r = rng("wmt16", split)
        for _ in range(_COUNTS[split]):
            src = [int(w) for w in r.randint(3, n + 3, size=r.randint(3, 11))]
            trg = [int(mapping[w - 3]) for w in src]
            yield [0, *src, 1], [0, *trg], [*trg, 1]

    return reader


def train(src_dict_size: int, trg_dict_size: int, src_lang: str = "en") -> Reader:
    """Training reader: ``(src_ids, trg_ids, trg_ids_next)``."""
    return _reader("train", src_dict_size, trg_dict_size, src_lang)


def test(src_dict_size: int, trg_dict_size: int, src_lang: str = "en") -> Reader:
    """Test reader, the same layout as :func:`train`."""
    return _reader("test", src_dict_size, trg_dict_size, src_lang)


def validation(src_dict_size: int, trg_dict_size: int, src_lang: str = "en") -> Reader:
    """Validation reader, the same layout as :func:`train`."""
    return _reader("val", src_dict_size, trg_dict_size, src_lang)
