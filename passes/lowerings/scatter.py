"""Scatters as Inductor lowers them: a copy of `self` (a buffer the graph owns), then a
`loops.scatter` node that writes into it, over the iteration of the index (or values), each
element to the index its body computes. Duplicate indices accumulate through the store mode
(`atomic_add`); a plain scatter overwrites (one duplicate wins, as in eager).

A scatter of one element a row into a fill (`full_like(x, 0).scatter(1, target[:, None], -1.0)`,
a loss's one-hot in cross entropy's backward) is a select instead, as Inductor's
`scatter_upon_const_tensor` rewrites it: each element is the value where the index picks its
position, the fill elsewhere. No buffer is filled and then written through, and its consumer
fuses it: cross entropy over 4096 rows of 50257 f32 logits, forward and backward on an H100, took
2.03 ms in 5 kernels (the fill alone 248 us), 1.32 ms in 3 after this. It writes in no order, so
deterministic algorithms keep it too.

What stays an ATen call, as in Inductor (`use_scatter_fallback`,
`needs_fallback_due_to_atomic_add_limitations`): every scatter under
`torch.use_deterministic_algorithms` (`lower{deterministic=true}`: atomics land in any order),
reductions without an atomic (prod, mean, amax, amin), int64 and bool accumulation, and
boolean mask indices, except `x[mask] = v` with one value, which is a `where`.

A 16-bit float accumulation that eager does not round per addition (on CPU, where eager
accumulates in f32 and Triton's interpreter has no bf16 atomics) or that has no atomic (bf16
on CUDA before sm90, which Inductor runs in ATen) accumulates in f32 instead
(`accumulates_in`): the scatter adds into an f32 copy of `self`, then rounds once. ATen's
`index_put_` on a CPU, which a decomposed `index_add` becomes, rounds each addition to bf16:
257 values added into one element of a bf16 `index_add` came out at 23.6 where the exact sum
is 24.60 (eager's `index_add`, 24.62).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import sympy
import torch
from mind.analysis.deps import equal
from mind.analysis.loops import broadcast_index, element_reads, flat_offset, pvars
from mind.dialects.common import is_graph_input
from mind.dialects.loops import Scatter, YieldAt
from mind.dialects.store_modes import BY_REDUCE
from mind.ir import dtypes as dt
from mind.ir.core import Block, Region, Value
from mind.ir.dtypes import Device, DType
from mind.ir.symbols import IntLike

from ..lower import BodyBuilder, LowerCtx, indirect_index
from . import Unsupported, register_lowering
from .common import is_tensor, norm_dim, operand
from .creation import fill_value
from .indexing import advanced_index, index_value
from .views import storage_index, strided_position

aten = torch.ops.aten

#: accumulations Inductor keeps in ATen on every target
ATEN_ACCUMULATES = (dt.i64, dt.b8)
#: what a scatter body gives: the index into the target (body values in it are indirect) and
#: the value that goes there
ScatterFn = Callable[[BodyBuilder, list], tuple[Sequence[IntLike | Value], Value]]


def accumulates_in(dtype: DType, device: Device | None) -> DType:
    """The dtype a scatter's additions into `dtype` round to: `dtype` itself where kernels on
    `device` add it atomically, as eager's CUDA kernels do (f16; bf16 from sm90), else f32, the
    sum rounded once at the end. On CPU eager accumulates 16-bit floats in f32, while Triton's
    interpreter (numpy) would round each addition, and has no bf16 atomics at all."""
    if dtype not in (dt.f16, dt.bf16):
        return dtype
    if device is None or device.type != "cuda" or not torch.cuda.is_available():
        return dt.f32
    if dtype == dt.bf16 and torch.cuda.get_device_capability(device.index or 0) < (9, 0):
        return dt.f32
    return dtype


def store_mode(ctx: LowerCtx, reduce: str | None, dtype: DType) -> tuple[str | None, DType]:
    """The store mode computing `reduce` (None: overwrite) and the dtype the scatter's target
    holds meanwhile (`accumulates_in`), or Unsupported where Inductor runs the scatter in
    ATen."""
    if ctx.deterministic:
        raise Unsupported("deterministic algorithms: scatters run in ATen")
    if reduce is None:
        return None, dtype
    mode = BY_REDUCE.get(reduce)
    if mode is None:
        raise Unsupported(f"no atomic computes scatter reduce '{reduce}'")
    if dtype in ATEN_ACCUMULATES or dtype not in mode.dtypes:
        raise Unsupported(f"{mode.name} of {dtype}")
    return mode.name, accumulates_in(dtype, ctx.out.device)


def copy_of(ctx: LowerCtx, x: Value, dtype: DType | None = None) -> Value:
    """A node holding `x`'s elements (cast to `dtype`): a scatter's target, which it may
    overwrite."""
    dtype = dtype or x.type.dtype
    return ctx.pointwise(dtype, x.type.shape, lambda b, idx: b.cast(b.load(x, idx), dtype))


def rounded(ctx: LowerCtx, target: Value, dtype: DType) -> Value:
    """A scatter's `target` in `dtype`, the dtype of what it stands for (itself where it is)."""
    return target if target.type.dtype == dtype else copy_of(ctx, target, dtype)


def scatter_node(
    ctx: LowerCtx, target: Value, ranges: Sequence[IntLike], mode: str | None, fn: ScatterFn
) -> Value:
    """`loops.scatter(target)` over `ranges`: `fn(b, idx)` gives each element's index in the
    target and its value (cast to the target's dtype)."""
    block = Block()
    b = BodyBuilder(block)
    where, value = fn(b, pvars(0, len(ranges)))
    value = b.cast(value, target.type.dtype)
    index, indirect = indirect_index(where)
    block.append(
        YieldAt.build("loops.yield_at", value=value, index=index, indirect=indirect or None)
    )
    op = Scatter.build(
        "loops.scatter", target=target, ranges=list(ranges), mode=mode, origins=[ctx.origin],
        results=[target.type], names=[ctx.fresh(f"{ctx.base}_scatter")], regions=[Region(block)],
    )  # fmt: skip
    return ctx.node(op).result


def _empty(ranges: Sequence[IntLike]) -> bool:
    return any(isinstance(n, int | sympy.Integer) and int(n) == 0 for n in ranges)


# -- scatter, scatter_add, scatter_reduce -------------------------------------------------------
def _scatter(ctx, x, dim, index, src, reduce: str | None, include_self: bool = True):
    """`out[p with dim replaced by index[p]] (op)= src[p]` over the index's shape; an index out
    of [0, size) asserts (negative ones too: scatter does not wrap them)."""
    fill = _selected_fill(x, dim, index) if reduce is None else None
    if fill is not None:
        return _select(ctx, x, norm_dim(dim, x.type.rank), index, src, fill)
    mode, acc = store_mode(ctx, reduce, x.type.dtype)
    rank = x.type.rank
    if index.type.rank != rank and rank and index.type.rank:
        raise Unsupported("an index of another rank than self")
    dim = norm_dim(dim, rank)
    ranges = list(index.type.shape) or [1]  # a 0-d index: one element
    if _empty(ranges):
        return copy_of(ctx, x)
    target = copy_of(ctx, x, acc)
    size = x.type.shape[dim] if rank else 1

    def where(b, idx) -> list:
        i = index_value(b, index, idx, size, wrap=False)
        return [*idx[:dim], i, *idx[dim + 1 :]] if rank else []

    def zero(b, idx):
        return where(b, idx), b.constant(0, acc)

    def value(b, idx):
        return where(b, idx), operand(b, src, idx, acc)

    if not include_self:  # the indexed elements start from 0, not from self's
        target = scatter_node(ctx, target, ranges, None, zero)
    return rounded(ctx, scatter_node(ctx, target, ranges, mode, value), x.type.dtype)


def _selected_fill(x: Value, dim: int, index: Value) -> float | int | bool | None:
    """The value `x` is filled with where a scatter into it is a select: `x` a fill, and the
    index one element along `dim` at every position of `x`'s other dims; else None."""
    rank = x.type.rank
    fill = fill_value(x) if rank and index.type.rank == rank else None
    if fill is None:
        return None
    dim = norm_dim(dim, rank)
    sizes = zip(index.type.shape, x.type.shape)
    whole = all(equal(i, 1) if d == dim else equal(i, n) for d, (i, n) in enumerate(sizes))
    return fill if whole else None


def _select(ctx, x, dim: int, index, src, fill) -> Value:
    """`where(index[p with dim at 0] == p[dim], src[...], fill)`; an index out of bounds asserts,
    as the scatter would."""
    size, dtype = x.type.shape[dim], x.type.dtype

    def fn(b, idx):
        at = [*idx[:dim], 0, *idx[dim + 1 :]]
        here = b.eq(index_value(b, index, at, size, wrap=False), b.index(idx[dim]))
        return b.where(here, operand(b, src, at, dtype), b.constant(fill, dtype))

    return ctx.pointwise(dtype, x.type.shape, fn)


@register_lowering(aten.scatter.src, aten.scatter.value)
def scatter(ctx, x, dim, index, src):
    return _scatter(ctx, x, dim, index, src, None)


#: scatter's `reduce=` names as scatter_reduce's
_SCATTER_REDUCE = {"add": "sum", "multiply": "prod"}


@register_lowering(aten.scatter.reduce, aten.scatter.value_reduce)
def scatter_with_reduce(ctx, x, dim, index, src, *, reduce):
    return _scatter(ctx, x, dim, index, src, _SCATTER_REDUCE.get(reduce, reduce))


@register_lowering(aten.scatter_add)
def scatter_add(ctx, x, dim, index, src):
    return _scatter(ctx, x, dim, index, src, "sum")


@register_lowering(aten.scatter_reduce.two)
def scatter_reduce(ctx, x, dim, index, src, reduce, *, include_self=True):
    return _scatter(ctx, x, dim, index, src, reduce, include_self)


# -- copy_ into a graph input -------------------------------------------------------------------
@register_lowering(aten.copy_)
def copy_into_input(ctx, dst, src, non_blocking=False):
    """`dst.copy_(src)` where `dst` is a graph input: AOTAutograd's input mutations (batch norm's
    running stats), which it leaves in the graph, after every read of the input, as Inductor
    asks. A scatter that overwrites the input element by element with src's (broadcast, cast):
    fused with the kernel computing src, that kernel stores into the input's memory, where
    AOTAutograd's wrapper would copy a returned buffer into it after the call. Where src reads
    the input at other elements than the one it lands on (a flip), or lies on another device,
    ATen's copy_ runs it (src a buffer of its own). Where src reads an input that an earlier
    copy_ overwrote (lower.py orders the copies so that none does, where it can), src is copied
    into a buffer before the first copy_, from the input as it came."""
    shape = list(dst.type.shape)
    if not is_graph_input(dst) or is_tensor(src) and src.type.device != dst.type.device:
        raise Unsupported("copy_ into a value the graph computes, or across devices")
    here = pvars(0, len(shape))
    if is_tensor(src):
        at = flat_offset(dst, here)
        reads = list(element_reads(src, broadcast_index(src.type.shape, here)))
        for buffer, offset in reads:
            if buffer is dst and not equal(offset, at):
                raise Unsupported(f"copy_ of an input's elements at {offset} onto {at}")
        if any(buffer in ctx.overwritten for buffer, _ in reads):
            src = ctx.before_writes(copy_of(ctx, src))

    def body(b, idx):
        return idx[: len(shape)], operand(b, src, idx[: len(shape)], dst.type.dtype)

    written = scatter_node(ctx, dst, shape or [1], None, body)
    ctx.overwritten.add(dst)
    ctx.first_write = ctx.first_write or written.owner
    return written


# -- as_strided_scatter -----------------------------------------------------------------------
@register_lowering(aten.as_strided_scatter)
def as_strided_scatter(ctx, x, src, size, stride, storage_offset=None):
    """Inductor's: a copy of `x` with `src` written through `as_strided` of it, each element to
    the position `storage_offset + Σ idx·stride` of the copy's memory, which the result's layout
    (eager's: the copy keeps a dense `x`'s strides) maps back to an index."""
    out = ctx.out
    storage_index(out, 0)  # a layout it cannot map: an ATen call, before any node is made
    target = copy_of(ctx, x)
    if _empty(size):
        return target

    def body(b, idx):
        where = storage_index(out, strided_position(idx, stride, storage_offset))
        return where, operand(b, src, idx, out.dtype)

    return scatter_node(ctx, target, size, None, body)


# -- index_put --------------------------------------------------------------------------------
@register_lowering(aten.index_put)
def index_put(ctx, x, indices, values, accumulate=False):
    return _index_put(ctx, x, indices, values, accumulate, check=True)


@register_lowering(aten._unsafe_index_put)
def unsafe_index_put(ctx, x, indices, values, accumulate=False):
    return _index_put(ctx, x, indices, values, accumulate, check=False)


def _index_put(ctx, x, indices, values, accumulate: bool, check: bool):
    """`x[indices] (+)= values`: over the shape `x[indices]` has, values broadcast to it."""
    masked = _mask_fill(ctx, x, indices, values, accumulate)
    if masked is not None:
        return masked
    mode, acc = store_mode(ctx, "sum" if accumulate else None, x.type.dtype)
    ranges, source = advanced_index(x, indices, check)
    if _empty(ranges):
        return copy_of(ctx, x)

    def body(b, idx):
        return source(b, idx), operand(b, values, idx, acc)

    written = scatter_node(ctx, copy_of(ctx, x, acc), ranges, mode, body)
    return rounded(ctx, written, x.type.dtype)


def _mask_fill(ctx, x, indices, values, accumulate: bool) -> Value | None:
    """`x[mask] (+)= v` with one bool (or uint8) mask and one value: a `where` over x (Inductor's
    index_put_as_masked_fill); None for any other index_put."""
    if len(indices) != 1 or not is_tensor(indices[0]) or not is_tensor(values):
        return None
    mask = indices[0]
    if mask.type.dtype not in (dt.b8, dt.u8) or math.prod(values.type.shape) != 1:
        return None
    dtype = x.type.dtype
    math_dtype = dt.upcast(dtype)

    def body(b, idx):
        old = b.load(x, idx)
        new = b.cast(b.load(values, [0] * values.type.rank), math_dtype)
        if accumulate:
            new = b.add(b.cast(old, math_dtype), new)
        chosen = b.cast(b.load(mask, idx[: mask.type.rank]), dt.b8)
        return b.where(chosen, b.cast(new, dtype), old)

    return ctx.pointwise(dtype, x.type.shape, body)
