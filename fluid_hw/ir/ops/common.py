"""Shape helpers shared by op definitions and the kernels that implement them."""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import ShapeError


def merge_dim(a: int, b: int) -> int | None:
    """Two extents that must agree: the known one, or None when they conflict."""
    if a == -1:
        return b
    if b == -1 or a == b:
        return a
    return None


def elementwise_axis(x_rank: int, y_rank: int, axis: int) -> int:
    """Fluid's broadcast axis: where Y's dims start inside X's (the larger) shape."""
    big, small = max(x_rank, y_rank), min(x_rank, y_rank)
    a = big - small if axis == -1 else axis
    if not 0 <= a <= big - small:
        raise ShapeError(f"axis {axis} is out of range for ranks {x_rank} and {y_rank} "
                         f"(valid: -1 or 0..{big - small})")
    return a


def elementwise_shape(x: Sequence[int], y: Sequence[int], axis: int) -> list[int]:
    """Output shape of ``elementwise_*(X, Y, axis)``.

    The smaller-rank operand's dims line up with the larger's starting at ``axis``
    (default: aligned to the right); each aligned pair must be equal or contain 1.
    """
    big, small = (list(x), list(y)) if len(x) >= len(y) else (list(y), list(x))
    a = elementwise_axis(len(x), len(y), axis)
    out = list(big)
    for i, s in enumerate(small):
        b = big[a + i]
        if s == 1:
            continue
        if b == 1:
            out[a + i] = s
            continue
        m = merge_dim(b, s)
        if m is None:
            raise ShapeError(f"shapes {list(x)} and {list(y)} do not broadcast at axis {a}: "
                             f"dim {a + i} is {b} vs {s}")
        out[a + i] = m
    return out


def aligned_shape(small: Sequence[int], big_rank: int, axis: int) -> tuple[int, ...]:
    """``small`` padded with 1s so numpy broadcasting matches Fluid's axis rule."""
    a = elementwise_axis(big_rank, len(small), axis)
    return (1,) * a + tuple(small) + (1,) * (big_rank - a - len(small))


def flatten_to_2d(shape: Sequence[int], num_col_dims: int) -> tuple[int, int]:
    """``mul``'s view of a tensor: dims [:k] multiplied into rows, [k:] into columns."""

    def prod(ds: Sequence[int]) -> int:
        p = 1
        for d in ds:
            if d == -1:
                return -1
            p *= d
        return p

    return prod(shape[:num_col_dims]), prod(shape[num_col_dims:])
