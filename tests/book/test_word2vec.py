"""Book chapter 4 (word2vec): the N-gram language model (four embeddings sharing
one table, Adagrad with L2 decay) trains on the synthetic PTB corpus, and the saved
inference model reloads and gives next-word distributions for LoD inputs."""

import numpy as np

from .chapters import assert_loss_falls, chapter


def test_word2vec_trains_and_reloads(fresh, tmp_path):
    book = chapter("word2vec")
    losses = book.train(if_use_cuda=False, params_dirname=str(tmp_path), max_steps=40,
                        seed=1)
    # the book's Adagrad at 3e-3 is slow: 40 steps take the loss from log(203) ~ 5.3
    # (plus the initial spread) down by about a tenth
    assert_loss_falls(losses, window=5, factor=0.95)
    probs, next_words = book.infer(use_cuda=False, params_dirname=str(tmp_path))
    assert probs.shape == (len(next_words), book.dict_size)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    # the four embeddings share one table
    params = [p.name for p in book.fluid.default_main_program().all_parameters()]
    assert params.count("shared_w") == 1
