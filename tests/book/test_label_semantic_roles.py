"""Book chapter 7 (label_semantic_roles): the bidirectional LSTM stack with
pretrained embeddings trains with the linear-chain CRF on the synthetic CoNLL-05
(CRF decoding fetched every step), and the saved inference model reloads and runs
on random LoD inputs."""

import numpy as np

from .chapters import assert_loss_falls, chapter


def test_label_semantic_roles_trains_and_reloads(fresh, tmp_path, monkeypatch):
    book = chapter("label_semantic_roles")
    # the book's network, narrower and shallower for a CPU test (512 wide, 8 deep)
    monkeypatch.setattr(book, "hidden_dim", 128)
    monkeypatch.setattr(book, "depth", 2)
    losses = book.train(use_cuda=False, save_dirname=str(tmp_path), max_steps=30, seed=1)
    # CRF costs are summed over each sentence's words, so batches of longer
    # sentences cost more: compare means over windows of several batches
    assert_loss_falls(losses, window=8, factor=0.9)
    # the frozen pretrained embedding did not train
    emb = np.asarray(book.fluid.global_scope().find_var(book.embedding_name).get_tensor())
    pretrained = book.load_parameter(book.conll05.get_embedding(), book.word_dict_len,
                                     book.word_dim)
    np.testing.assert_array_equal(emb, pretrained)

    out = book.infer(use_cuda=False, save_dirname=str(tmp_path))
    assert out.lod() == [[0, 3, 7, 9]]
    scores = np.asarray(out)
    assert scores.shape == (9, book.label_dict_len) and np.all(np.isfinite(scores))
