"""Book chapter 6 (understand_sentiment): the text convolution network, the dynamic
LSTM and the stacked bidirectional LSTM train with Adagrad on the synthetic IMDB
reviews (LoD word sequences fed through DataFeeder), and each saved inference model
reloads and classifies LoD input."""

import numpy as np
import pytest

from .chapters import assert_loss_falls, chapter


@pytest.mark.parametrize(("net", "batch_size", "steps"), [
    ("conv", 32, 10),
    ("dyn_rnn", 32, 25),
    pytest.param("stacked_lstm", 16, 8, marks=pytest.mark.slow),
])
def test_understand_sentiment_trains_and_reloads(fresh, tmp_path, net, batch_size, steps):
    book = chapter("understand_sentiment")
    losses = book.train(use_cuda=False, params_dirname=str(tmp_path), net=net,
                        batch_size=batch_size, max_steps=steps, seed=1)
    assert_loss_falls(losses, window=3, factor=0.85)
    probs = book.infer(use_cuda=False, params_dirname=str(tmp_path))
    assert probs.shape == (3, 2)  # three reviews, two classes
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
