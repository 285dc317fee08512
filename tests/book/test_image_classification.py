"""Book chapter 3 (image_classification): ResNet trains on the synthetic CIFAR-10
and its saved inference model reloads; the VGG network (batch norm, dropout, 13
convolutions up to 512 channels) builds, runs training steps and reloads too."""

import numpy as np
import pytest

from .chapters import assert_loss_falls, chapter


def _check_reloaded(book, path):
    probs, labels = book.infer(use_cuda=False, params_dirname=str(path))
    assert probs.shape == (len(labels), 10)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)


@pytest.mark.slow
def test_resnet_trains_and_reloads(fresh, tmp_path):
    book = chapter("image_classification")
    losses = book.train(use_cuda=False, params_dirname=str(tmp_path), net="resnet", depth=8,
                        batch_size=32, max_steps=10, seed=1)
    assert_loss_falls(losses, factor=0.85)
    _check_reloaded(book, tmp_path)


@pytest.mark.slow
def test_vgg_runs_and_reloads(fresh, tmp_path):
    # VGG's loss is not asserted to fall: a few steps of a 15-layer network with
    # dropout at a CPU-test batch size are noise; ResNet above covers training.
    book = chapter("image_classification")
    losses = book.train(use_cuda=False, params_dirname=str(tmp_path), net="vgg",
                        batch_size=4, max_steps=2, seed=1)
    assert len(losses) == 2 and np.all(np.isfinite(losses))
    _check_reloaded(book, tmp_path)
