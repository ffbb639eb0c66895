"""Gathers as indirect loads: the index read from one tensor becomes a symbol `i0, i1, ...` in
the index of the load from another (`loops.load(%w, 16*i0 + p2) {indirect = [%0]}`)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from mind.ir import dtypes as dt
from mind.ir.core import Value
from mind.ir.diagnostics import MindError
from mind.ir.symbols import IntLike

from . import Unsupported, register_lowering
from .common import KIND, is_tensor, norm_dim, promote

aten = torch.ops.aten


def index_value(b, t: Value, index, size, wrap: bool = True, check: bool = True) -> Value:
    """The i64 index read from `t`; negative positions count from the end (`size`). Out of
    bounds, the kernel asserts (as Inductor's do) where eager raises an IndexError; `check=False`
    (the `_unsafe` ops) trusts the index."""
    v = b.cast(b.load(t, index), dt.i64)
    negative = b.lt(v, b.constant(0, dt.i64)) if wrap else None
    bound = b.constant(size, dt.i64) if wrap or check else None
    if negative is not None:
        v = b.where(negative, b.add(v, bound), v)
    return b.check_index(v, bound) if check else v


def broadcast_sizes(shapes: list[tuple[IntLike, ...]]) -> list[IntLike]:
    """The shape tensors of `shapes` broadcast to (aligned right, a 1 stretches)."""
    rank = max((len(s) for s in shapes), default=0)
    out: list[IntLike] = [1] * rank
    for shape in shapes:
        for k, size in enumerate(shape, start=rank - len(shape)):
            if out[k] == 1:
                out[k] = size
    return out


def advanced_index(x: Value, indices: list, check: bool = True) -> tuple[list[IntLike], Callable]:
    """Advanced indexing `x[indices]` (None where a dim is taken whole): the shape it gives and,
    for an index of that shape, the index into `x` it reads. The index tensors broadcast to one
    shape B; adjacent indexed dims are replaced by B in place, scattered ones put B first."""
    shape = list(x.type.shape)
    indices = list(indices) + [None] * (len(shape) - len(indices))
    used = [d for d, t in enumerate(indices) if t is not None]
    if not used:
        raise MindError("advanced indexing needs at least one index tensor")
    if any(not is_tensor(indices[d]) or indices[d].type.dtype in (dt.b8, dt.u8) for d in used):
        raise Unsupported("boolean mask indices (data-dependent shape)")
    kinds = (indices[d].type.dtype for d in used)
    bad = [k for k in kinds if k.is_floating_point or k.is_complex]
    if bad:
        raise MindError(f"tensors used as indices must be integers or booleans, got {bad[0]}")
    bshape = broadcast_sizes([indices[d].type.shape for d in used])
    nb = len(bshape)
    start = used[0] if used == list(range(used[0], used[-1] + 1)) else 0
    kept = [n for d, n in enumerate(shape) if indices[d] is None]
    out = [*kept[:start], *bshape, *kept[start:]]

    def source(b, idx):
        bidx = idx[start : start + nb]
        rest = iter(idx[:start] + idx[start + nb :])
        return [
            index_value(b, t, bidx, shape[d], check=check) if t is not None else next(rest)
            for d, t in enumerate(indices)
        ]

    return out, source


@register_lowering(aten.embedding)
def embedding(ctx, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """`out[..., j] = weight[indices[...], j]`."""
    out = ctx.out
    k = indices.type.rank

    def body(b, idx):
        row = index_value(b, indices, idx[:k], weight.type.shape[0], wrap=False)
        return b.load(weight, [row, *idx[k:]])

    return ctx.pointwise(out.dtype, out.shape, body)


@register_lowering(aten.gather)
def gather(ctx, x, dim, index, *, sparse_grad=False):
    """`out[p] = x[p with dim replaced by index[p]]`."""
    out = ctx.out
    dim = norm_dim(dim, x.type.rank)

    def body(b, idx):
        i = index_value(b, index, idx, x.type.shape[dim] if x.type.rank else 1)
        return b.load(x, [*idx[:dim], i, *idx[dim + 1 :]])

    return ctx.pointwise(out.dtype, out.shape, body)


@register_lowering(aten.index_select)
def index_select(ctx, x, dim, index):
    out = ctx.out
    dim = norm_dim(dim, x.type.rank)

    def body(b, idx):
        if not x.type.rank:  # a 0-d input: its one element, whatever the (one) index says
            return b.load(x, [])
        i = index_value(b, index, [idx[dim]] if index.type.rank else [], x.type.shape[dim])
        return b.load(x, [*idx[:dim], i, *idx[dim + 1 :]])

    return ctx.pointwise(out.dtype, out.shape, body)


@register_lowering(aten.index.Tensor)
def index(ctx, x, indices):
    return _index(ctx, x, indices, check=True)


@register_lowering(aten._unsafe_index.Tensor)
def unsafe_index(ctx, x, indices):
    return _index(ctx, x, indices, check=False)


def _index(ctx, x, indices, check: bool):
    out = ctx.out
    _, source = advanced_index(x, indices, check)
    return ctx.pointwise(out.dtype, out.shape, lambda b, idx: b.load(x, source(b, idx)))


# -- bucketize, searchsorted --------------------------------------------------------------------
def binary_search(b, value, size: int, bound, right: bool):
    """Where `value` goes in a sorted run of `size` elements, `bound(b, k)` reading the k-th: the
    first position whose element is not below it (`right`: not at or below it). Eager's
    comparisons (a NaN goes last), in Inductor's unrolled form: `size.bit_length()` halvings,
    each an indirect load at the middle (clamped into the run: a search that has ended, whose
    middle is its end, changes nothing)."""
    low, high = b.constant(0, dt.i64), b.constant(size, dt.i64)
    two, one, last = (b.constant(c, dt.i64) for c in (2, 1, size - 1))
    steps = size.bit_length()
    for step in range(steps):
        mid = b.floordiv(b.add(low, high), two)
        inside = b.lt(mid, high)
        element = bound(b, b.minimum(mid, last))
        below = b.logical_not(b.gt(element, value) if right else b.ge(element, value))
        low = b.where(b.logical_and(below, inside), b.add(mid, one), low)
        if step < steps - 1:
            high = b.where(below, high, mid)
    return low


def _search(ctx, sequence, values, right: bool, sorter=None):
    """Each element of `values` searched in `sequence`: its one row (1-d), or the row its own
    leading index names."""
    size = sequence.type.shape[-1]
    if not isinstance(size, int):
        raise Unsupported("a search over a symbolic number of elements")
    out = ctx.out
    compute = dt.upcast(promote([values, sequence], KIND.NO_OPMATH, compute=False))
    rows = sequence.type.rank - 1

    def body(b, idx):
        row = list(idx[:rows])

        def bound(b, k):
            if sorter is not None:
                k = b.load(sorter, [*row, k])
            return b.cast(b.load(sequence, [*row, k]), compute)

        value = b.cast(b.load(values, idx), compute)
        return binary_search(b, value, size, bound, right)

    return ctx.pointwise(out.dtype, out.shape, body)


@register_lowering(aten.bucketize.Tensor)
def bucketize(ctx, x, boundaries, *, out_int32=False, right=False):
    return _search(ctx, boundaries, x, right)


@register_lowering(aten.searchsorted.Tensor)
def searchsorted(ctx, sequence, x, *, out_int32=False, right=False, side=None, sorter=None):
    return _search(ctx, sequence, x, right or side == "right", sorter)
