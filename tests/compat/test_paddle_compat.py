"""fluid_hw.paddle_compat (what scripts import as ``paddle``) and the synthetic
fluid_hw.dataset readers: Paddle's function names, sample layouts, determinism."""

import pickle
import random

import numpy as np
import pytest

import fluid_hw.paddle_compat as paddle
from fluid_hw import errors


def _count(n):
    return lambda: iter(range(n))


def test_batch_and_reader_decorators():
    assert list(paddle.batch(_count(5), 2)()) == [[0, 1], [2, 3], [4]]
    assert list(paddle.batch(_count(5), 2, drop_last=True)()) == [[0, 1], [2, 3]]
    with pytest.raises(ValueError, match="batch_size"):
        paddle.batch(_count(5), 0)
    random.seed(1)
    shuffled = list(paddle.reader.shuffle(_count(10), buf_size=4)())
    assert sorted(shuffled) == list(range(10)) and shuffled != list(range(10))
    assert list(paddle.reader.buffered(_count(7), 2)()) == list(range(7))
    assert list(paddle.reader.chain(_count(2), _count(3))()) == [0, 1, 0, 1, 2]
    assert list(paddle.reader.firstn(_count(10), 3)()) == [0, 1, 2]
    assert list(paddle.reader.map_readers(lambda a, b: a * b, _count(3), _count(3))()) == \
        [0, 1, 4]
    assert list(paddle.reader.xmap_readers(lambda a: a + 1, _count(3), 2, 4)()) == [1, 2, 3]
    assert list(paddle.reader.compose(_count(2), _count(2))()) == [(0, 0), (1, 1)]
    with pytest.raises(errors.ComposeNotAligned):
        list(paddle.reader.compose(_count(2), _count(3))())
    assert list(paddle.reader.compose(_count(2), _count(3), check_alignment=False)()) == \
        [(0, 0), (1, 1)]
    assert list(paddle.reader.cache(_count(3))()) == [0, 1, 2]


def test_dataset_modules_import_as_paddle_names():
    import fluid_hw.paddle_compat.dataset.conll05 as conll05

    assert conll05 is paddle.dataset.conll05


@pytest.mark.parametrize(("reader", "check"), [
    (paddle.dataset.uci_housing.train(),
     lambda s: s[0].shape == (13,) and s[0].dtype == np.float32 and s[1].shape == (1,)),
    (paddle.dataset.mnist.train(),
     lambda s: s[0].shape == (784,) and s[0].min() >= -1 and s[0].max() <= 1
     and 0 <= s[1] < 10),
    (paddle.dataset.cifar.train10(),
     lambda s: s[0].shape == (3072,) and s[0].min() >= 0 and s[0].max() <= 1
     and 0 <= s[1] < 10),
    (paddle.dataset.cifar.test100(), lambda s: 0 <= s[1] < 100),
    (paddle.dataset.imdb.train(paddle.dataset.imdb.word_dict()),
     lambda s: all(0 <= w < len(paddle.dataset.imdb.word_dict()) for w in s[0])
     and s[1] in (0, 1)),
    (paddle.dataset.imikolov.train(paddle.dataset.imikolov.build_dict(), 5),
     lambda s: len(s) == 5),
    (paddle.dataset.imikolov.train(paddle.dataset.imikolov.build_dict(), 0,
                                   paddle.dataset.imikolov.DataType.SEQ),
     lambda s: s[0][1:] == s[1][:-1]),
    (paddle.dataset.movielens.train(),
     lambda s: len(s) == 8 and isinstance(s[5], list) and 1 <= s[7][0] <= 5),
    (paddle.dataset.conll05.test(),
     lambda s: len(s) == 9 and len({len(x) for x in s}) == 1),
    (paddle.dataset.wmt14.train(30),
     lambda s: s[0][0] == 0 and s[0][-1] == 1 and s[1][1:] == s[2][:-1]),
    (paddle.dataset.wmt16.train(30, 40),
     lambda s: s[1][0] == 0 and s[2][-1] == 1 and len(s[1]) == len(s[0]) - 1),
])
def test_dataset_samples_have_paddles_layout_and_repeat(reader, check):
    first = list(paddle.reader.firstn(reader, 20)())
    assert len(first) == 20 and all(check(s) for s in first)
    again = list(paddle.reader.firstn(reader, 20)())
    assert pickle.dumps(first) == pickle.dumps(again)  # seeded: the same samples


def test_dictionaries():
    word_dict, verb_dict, label_dict = paddle.dataset.conll05.get_dict()
    assert word_dict["<unk>"] == 0 and "O" in label_dict and len(verb_dict) > 0
    emb = np.fromfile(paddle.dataset.conll05.get_embedding(), np.float32, offset=16)
    assert emb.size == len(word_dict) * 32
    src, trg = paddle.dataset.wmt14.get_dict(30)
    assert src[0] == "<s>" and trg[1] == "<e>" and len(src) == 30
    assert paddle.dataset.wmt16.get_dict("de", 40)["<unk>"] == 2
    assert paddle.dataset.imikolov.build_dict()["<unk>"] == len(
        paddle.dataset.imikolov.build_dict()) - 1
    assert paddle.dataset.movielens.max_user_id() in paddle.dataset.movielens.user_info()
