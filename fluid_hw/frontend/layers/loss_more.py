"""Loss layers of Paddle 1.5 that fluid-hw lacked (issue 20), with its signatures,
built from existing ops (so each has the gradients of the ops it is made of):
``square_error_cost``, ``sigmoid_cross_entropy_with_logits``, ``log_loss``,
``huber_loss``, ``smooth_l1``, ``kldiv_loss``, ``bpr_loss``, ``margin_rank_loss``,
``rank_loss``, ``dice_loss`` and ``label_smooth``."""

from __future__ import annotations

from ...errors import ShapeError
from ...ir.program import Variable
from . import math_ops as M
from .activation_more import softplus, square
from .control_flow import not_equal
from .tensor import cast, fill_constant
from .tensor_more import one_hot

__all__ = ["square_error_cost", "sigmoid_cross_entropy_with_logits", "log_loss",
           "huber_loss", "smooth_l1", "kldiv_loss", "bpr_loss", "margin_rank_loss",
           "rank_loss", "dice_loss", "label_smooth"]


def _const(value: float, dtype: str = "float32") -> Variable:
    c = fill_constant([1], dtype, value)
    c.stop_gradient = True
    return c


def _same_shape(layer: str, a: Variable, b: Variable) -> None:
    if len(a.shape) != len(b.shape) or any(
            x != y and x > 0 and y > 0 for x, y in zip(a.shape, b.shape)):
        raise ShapeError(f"{layer}: {a.name!r} {list(a.shape)} and {b.name!r} "
                         f"{list(b.shape)} must have one shape")


def _one_hot_like(label: Variable, depth: int, like: Variable) -> Variable:
    oh = one_hot(label, depth)
    return oh if like.dtype == oh.dtype else cast(oh, like.dtype_name)


def _row_sum(x: Variable) -> Variable:
    """Sum over every dim but the first, kept as [N, 1]."""
    r = len(x.shape)
    if r == 1:
        return M.reduce_sum(x, dim=0, keep_dim=True)
    s = M.reduce_sum(x, dim=list(range(1, r)))
    from .tensor import reshape

    return reshape(s, [-1, 1])


def square_error_cost(input: Variable, label: Variable) -> Variable:
    """``(input - label) ** 2``, element-wise."""
    _same_shape("square_error_cost", input, label)
    return square(M.elementwise_sub(input, label))


def sigmoid_cross_entropy_with_logits(x: Variable, label: Variable, ignore_index: int = -100,
                                      name: str | None = None,
                                      normalize: bool = False) -> Variable:
    """``max(x, 0) - x * label + log(1 + exp(-|x|))`` element-wise, 0 where ``label`` is
    ``ignore_index``; ``normalize`` divides by the number of the other elements."""
    _same_shape("sigmoid_cross_entropy_with_logits", x, label)
    loss = M.elementwise_add(M.elementwise_sub(M.relu(x), M.elementwise_mul(x, label)),
                             softplus(M.scale(M.abs(x), -1.0)))
    keep = cast(not_equal(label, _const(float(ignore_index), label.dtype_name)), x.dtype_name)
    keep.stop_gradient = True
    loss = M.elementwise_mul(loss, keep)
    if normalize:
        n = M.scale(M.reduce_sum(keep), 1.0, 1e-12)  # no division by zero when all ignored
        loss = M.elementwise_div(loss, n)
    return loss


def log_loss(input: Variable, label: Variable, epsilon: float = 1e-4,
             name: str | None = None) -> Variable:
    """``-label * log(input + eps) - (1 - label) * log(1 - input + eps)``."""
    _same_shape("log_loss", input, label)
    pos = M.elementwise_mul(label, M.log(M.scale(input, 1.0, epsilon)))
    neg = M.elementwise_mul(M.scale(label, -1.0, 1.0),
                            M.log(M.scale(input, -1.0, 1.0 + epsilon)))
    return M.scale(M.elementwise_add(pos, neg), -1.0)


def huber_loss(input: Variable, label: Variable, delta: float) -> Variable:
    """``0.5 r^2`` where ``|r| <= delta``, else ``delta (|r| - delta / 2)``; r = label -
    input."""
    _same_shape("huber_loss", input, label)
    a = M.abs(M.elementwise_sub(label, input))
    m = M.elementwise_min(a, _const(delta, a.dtype_name))
    return M.elementwise_add(M.scale(square(m), 0.5),
                             M.scale(M.elementwise_sub(a, m), float(delta)))


def smooth_l1(x: Variable, y: Variable, inside_weight: Variable | None = None,
              outside_weight: Variable | None = None, sigma: float | None = None) -> Variable:
    """Per example ([N, 1]): the sum of ``0.5 (sigma d)^2`` where ``|d| < 1 / sigma^2``,
    else ``|d| - 0.5 / sigma^2``, over d = (x - y) * inside_weight, each term times
    outside_weight."""
    _same_shape("smooth_l1", x, y)
    s2 = float(sigma if sigma is not None else 1.0) ** 2
    d = M.elementwise_sub(x, y)
    if inside_weight is not None:
        d = M.elementwise_mul(d, inside_weight)
    a = M.abs(d)
    m = M.elementwise_min(a, _const(1.0 / s2, a.dtype_name))
    loss = M.elementwise_add(M.scale(square(m), 0.5 * s2), M.elementwise_sub(a, m))
    if outside_weight is not None:
        loss = M.elementwise_mul(loss, outside_weight)
    return _row_sum(loss)


def kldiv_loss(x: Variable, target: Variable, reduction: str = "mean",
               name: str | None = None) -> Variable:
    """``target * (log(target) - x)`` (0 where target <= 0; x holds log-probabilities),
    reduced by ``reduction``: 'none', 'batchmean' (sum / N), 'mean' or 'sum'."""
    if reduction not in ("none", "batchmean", "mean", "sum"):
        raise ValueError(f"kldiv_loss: reduction must be 'none', 'batchmean', 'mean' or "
                         f"'sum', got {reduction!r}")
    _same_shape("kldiv_loss", x, target)
    tiny = _const(1e-30, target.dtype_name)
    log_t = M.log(M.elementwise_max(target, tiny))
    loss = M.elementwise_mul(M.relu(target), M.elementwise_sub(log_t, x))
    if reduction == "none":
        return loss
    if reduction == "mean":
        return M.mean(loss)
    total = M.reduce_sum(loss)
    if reduction == "sum":
        return total
    # batchmean: divide by the batch size, dim 0 of x at run time
    ones = M.scale(x, 0.0, 1.0)
    if len(x.shape) > 1:
        ones = M.reduce_mean(ones, dim=list(range(1, len(x.shape))))
    rows = M.reduce_sum(ones)
    rows.stop_gradient = True
    return M.elementwise_div(total, rows)


def bpr_loss(input: Variable, label: Variable, name: str | None = None) -> Variable:
    """Bayesian personalised ranking, per example ([N, 1]): ``-1/(C-1) sum_{j != y}
    log(sigmoid(x_y - x_j))`` with y = label (int [N, 1]), C = the number of classes."""
    c = input.shape[-1]
    if len(input.shape) != 2 or c is None or c < 2:
        raise ShapeError(f"bpr_loss: input {input.name!r} must be [N, C] scores of C >= 2 "
                         f"classes, got {list(input.shape)}")
    pos = M.reduce_sum(M.elementwise_mul(input, _one_hot_like(label, c, input)), dim=1,
                       keep_dim=True)
    diff = M.elementwise_sub(input, pos, axis=0)  # x_j - x_y
    # log(sigmoid(x_y - x_j)) = -softplus(x_j - x_y); the j = y term is -log 2
    total = M.reduce_sum(softplus(diff), dim=1, keep_dim=True)
    return M.scale(total, 1.0 / (c - 1), -0.6931471805599453 / (c - 1))


def margin_rank_loss(label: Variable, left: Variable, right: Variable, margin: float = 0.1,
                     name: str | None = None) -> Variable:
    """``max(0, -label * (left - right) + margin)``."""
    d = M.elementwise_mul(label, M.elementwise_sub(left, right))
    return M.relu(M.scale(d, -1.0, float(margin)))


def rank_loss(label: Variable, left: Variable, right: Variable,
              name: str | None = None) -> Variable:
    """RankNet's ``log(1 + exp(left - right)) - label * (left - right)``."""
    o = M.elementwise_sub(left, right)
    return M.elementwise_sub(softplus(o), M.elementwise_mul(label, o))


def dice_loss(input: Variable, label: Variable, epsilon: float = 1e-5) -> Variable:
    """``1 - 2 |X n Y| / (|X| + |Y|)`` per example, averaged: ``input`` holds class
    probabilities [N, ..., C], ``label`` int class ids [N, ..., 1]."""
    c = input.shape[-1]
    if c is None or c <= 0 or list(label.shape[:-1]) != list(input.shape[:-1]):
        raise ShapeError(f"dice_loss: label {list(label.shape)} must be input "
                         f"{list(input.shape)} with its last dim 1")
    oh = _one_hot_like(label, c, input)
    dims = list(range(1, len(input.shape)))
    inse = M.reduce_sum(M.elementwise_mul(input, oh), dim=dims)
    denom = M.elementwise_add(M.reduce_sum(input, dim=dims), M.reduce_sum(oh, dim=dims))
    dice = M.elementwise_div(M.scale(inse, 2.0), M.scale(denom, 1.0, float(epsilon)))
    return M.reduce_mean(M.scale(dice, -1.0, 1.0))


def label_smooth(label: Variable, prior_dist: Variable | None = None, epsilon: float = 0.1,
                 dtype: str = "float32", name: str | None = None) -> Variable:
    """``(1 - epsilon) * label + epsilon * prior`` (prior: uniform 1 / C by default)."""
    if not 0.0 <= epsilon <= 1.0:
        raise ValueError(f"label_smooth: epsilon must be in [0, 1], got {epsilon}")
    c = label.shape[-1]
    if prior_dist is None:
        return M.scale(label, 1.0 - epsilon, epsilon / c)
    return M.elementwise_add(M.scale(label, 1.0 - epsilon), M.scale(prior_dist, epsilon))
