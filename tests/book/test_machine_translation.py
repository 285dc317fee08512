"""Book chapter 8 (machine_translation): the attention encoder-decoder trains on
the synthetic WMT16, its parameters are saved, and the beam-search program (While,
topk, lod_reset, beam_search, is_empty, beam_search_decode) loads them and
translates the test sentences."""

import numpy as np

from .chapters import assert_loss_falls, chapter


def test_machine_translation_trains_and_translates(tmp_path, monkeypatch):
    import fluid_hw as fluid

    book = chapter("machine_translation")
    # the book's network at a CPU test's size (the book: 30000 words, 512 wide)
    for name, value in [("dict_size", 40), ("source_dict_size", 40), ("target_dict_size", 40),
                        ("word_dim", 32), ("hidden_dim", 32), ("decoder_size", 32),
                        ("max_length", 12), ("batch_size", 16),
                        ("model_save_dir", str(tmp_path / "model"))]:
        monkeypatch.setattr(book, name, value)

    # noam_decay's 1000 warm-up steps keep the book's learning rate near 1e-5 for
    # the few steps a test runs: the same clipping with a fixed rate instead
    def optimizer_func():
        fluid.clip.set_gradient_clip(clip=fluid.clip.GradientClipByGlobalNorm(clip_norm=5.0))
        return fluid.optimizer.Adam(learning_rate=0.02)

    monkeypatch.setattr(book, "optimizer_func", optimizer_func)
    with fluid.scope_guard(fluid.Scope()):
        losses = book.train(use_cuda=False, max_steps=40, seed=1)
    assert_loss_falls(losses, window=5, factor=0.9)

    with fluid.scope_guard(fluid.Scope()):
        results = book.infer(use_cuda=False, max_batches=1)
    assert len(results) == 16  # one list of hypotheses per source sentence
    for hyps in results:
        assert 1 <= len(hyps) <= book.beam_size
        for score, ids in hyps:
            assert np.isfinite(score) and score < 0  # a sum of log-probabilities
            assert ids[0] == 0  # <s>
            assert ids[-1] == 1 or len(ids) == book.max_length + 1  # <e>, or cut off
            assert all(0 <= i < 40 for i in ids)
