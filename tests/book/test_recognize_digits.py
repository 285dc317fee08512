"""Book chapter 2 (recognize_digits): the MLP and LeNet-5 train on the synthetic
MNIST, and the saved inference model reloads and classifies test digits."""

import numpy as np
import pytest

from .chapters import assert_loss_falls, chapter


@pytest.mark.parametrize("nn_type", ["multilayer_perceptron", "convolutional_neural_network"])
def test_recognize_digits_trains_and_reloads(fresh, tmp_path, nn_type):
    book = chapter("recognize_digits")
    losses = book.train(nn_type=nn_type, use_cuda=False, save_dirname=str(tmp_path),
                        max_steps=10, seed=1)
    assert_loss_falls(losses, factor=0.5)
    probs, labels = book.infer(use_cuda=False, save_dirname=str(tmp_path))
    assert probs.shape == (8, 10)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    assert (probs.argmax(axis=1) == labels).mean() >= 0.5  # chance is 0.1
