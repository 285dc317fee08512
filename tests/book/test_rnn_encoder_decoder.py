"""Book model rnn_encoder_decoder: the bidirectional-LSTM encoder and the decoder
whose LSTM cell is built from layers inside a DynamicRNN (two memories, a static
input) train on the synthetic WMT14, and the saved inference model reloads and
gives next-word distributions for random LoD input."""

import numpy as np

from .chapters import assert_loss_falls, chapter


def test_rnn_encoder_decoder_trains_and_reloads(fresh, tmp_path, monkeypatch):
    book = chapter("rnn_encoder_decoder")
    for name in ("dict_size", "source_dict_dim", "target_dict_dim"):
        monkeypatch.setattr(book, name, 40)  # the book: 30000 words
    # the book's Adagrad at 1e-4 would need thousands of steps: the same optimizer
    # at 0.1 shows the loss falling within a test's 30
    monkeypatch.setattr(book, "optimizer_func",
                        lambda: book.fluid.optimizer.Adagrad(learning_rate=0.1))
    losses = book.train(use_cuda=False, save_dirname=str(tmp_path), max_steps=30, seed=1)
    assert_loss_falls(losses, window=5, factor=0.95)
    out = book.infer(use_cuda=False, save_dirname=str(tmp_path))
    assert out.recursive_sequence_lengths() == [[4, 6]]
    probs = np.asarray(out)
    assert probs.shape == (10, 40)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
