"""Book chapter 5 (recommender_system): user and movie towers (embeddings, a
title text convolution, cos_sim scaled to 5, square_error_cost, SGD) train on the
synthetic MovieLens for the book's 21 batches, and the saved inference model
reloads and rates a user-movie pair."""


from .chapters import assert_loss_falls, chapter


def test_recommender_system_trains_and_reloads(fresh, tmp_path):
    book = chapter("recommender_system")
    losses = book.train(use_cuda=False, params_dirname=str(tmp_path), batch_size=64,
                        test_batches=1, seed=1)
    assert len(losses) == 21  # the book saves and stops at batch 20
    assert_loss_falls(losses, window=3, factor=0.6)
    rating, score = book.infer(use_cuda=False, params_dirname=str(tmp_path))
    assert rating.shape == (1, 1)
    assert -5.0 <= rating[0, 0] <= 5.0  # 5 x a cosine
    assert 1.0 <= score[0] <= 5.0
