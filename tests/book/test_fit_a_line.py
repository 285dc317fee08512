"""Book chapter 1 (fit_a_line): linear regression with square_error_cost and SGD
trains on the synthetic UCI housing data, and the saved inference model reloads and
predicts prices."""

import numpy as np

from .chapters import assert_loss_falls, chapter


def test_fit_a_line_trains_and_reloads(fresh, tmp_path):
    book = chapter("fit_a_line")
    # the book's SGD at 0.001 on features in [-0.5, 0.5]: 20 passes (420 steps, < 1 s)
    losses = book.train(use_cuda=False, params_dirname=str(tmp_path), num_epochs=20, seed=1)
    assert_loss_falls(losses, window=20, factor=0.5)
    pred, label = book.infer(use_cuda=False, params_dirname=str(tmp_path))
    assert pred.shape == label.shape == (10, 1)
    # better than predicting 0, where the untrained model starts
    assert np.abs(pred - label).mean() < 0.6 * np.abs(label).mean()
