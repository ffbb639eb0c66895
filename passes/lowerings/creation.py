"""Tensor factories: pointwise nodes whose bodies are a constant (full, zeros, ones, empty,
scalar_tensor) or an index expression (arange, iota). The result type says dtype and shape."""

from __future__ import annotations

import sympy
import torch
from mind.ir import dtypes as dt
from mind.ir.core import Operation, Value

from . import register_lowering
from .common import operand

aten = torch.ops.aten
prims = torch.ops.prims


def filled(ctx, value):
    out = ctx.out
    return ctx.pointwise(out.dtype, out.shape, lambda b, idx: b.constant(value, out.dtype))


def fill_value(x: Value) -> float | int | bool | None:
    """The value each element of `x` holds where `filled` made its node (a pointwise body that
    yields a constant); None for any other node."""
    node = x.owner
    if getattr(node, "name", None) != "loops.pointwise":
        return None
    ops = node.body.ops
    if len(ops) != 2 or ops[0].name != "loops.constant" or list(ops[1].operands) != [ops[0].result]:
        return None
    return ops[0].value


@register_lowering(aten.full, aten.scalar_tensor)
def full(ctx, *args, **kwargs):
    return filled(ctx, args[-1] if ctx.origin == "scalar_tensor" else args[1])


@register_lowering(aten.full_like, aten.new_full)
def full_like(ctx, x, *args, **kwargs):
    return filled(ctx, args[-1])


@register_lowering(aten.zeros, aten.zeros_like, aten.new_zeros, aten.empty, aten.empty_like)
@register_lowering(aten.new_empty, aten.empty_strided, aten.new_empty_strided)
def zeros(ctx, *args, **kwargs):
    """Empty tensors are zeros: any value is a valid one, and zeros make runs reproducible."""
    return filled(ctx, 0)


@register_lowering(aten.ones, aten.ones_like, aten.new_ones)
def ones(ctx, *args, **kwargs):
    return filled(ctx, 1)


@register_lowering(aten.fill.Scalar, aten.fill.Tensor)
def fill(ctx, x, value):
    out = ctx.out
    return ctx.pointwise(out.dtype, out.shape, lambda b, idx: operand(b, value, [], out.dtype))


def ramp(ctx, start, step):
    """`start + step * p0`: an index expression, rounded to the result's dtype once, when both
    are integers (bools count as 0 and 1, as torch counts `arange(False, True, True)`; a symbol
    of dynamic sizes is one), else float math in at least f32, as eager's accumulate type (a
    16-bit ramp computed in its own dtype would round `p0` and `step * p0` too)."""
    out = ctx.out
    start, step = (int(v) if isinstance(v, bool) else v for v in (start, step))

    def body(b, idx):
        if _integral(start) and _integral(step):
            return b.cast(b.index(start + step * idx[0]), out.dtype)
        acc = dt.f32 if out.dtype.is_floating_point and out.dtype.itemsize < 4 else out.dtype
        p = b.cast(b.index(idx[0]), acc)
        value = b.add(b.mul(p, b.constant(step, acc)), b.constant(start, acc))
        return b.cast(value, out.dtype)

    return ctx.pointwise(out.dtype, out.shape, body)


def _integral(value) -> bool:
    return isinstance(value, int) or (isinstance(value, sympy.Expr) and bool(value.is_integer))


@register_lowering(aten.arange.default)
def arange(ctx, end, **kwargs):
    return ramp(ctx, 0, 1)


@register_lowering(aten.arange.start, aten.arange.start_step)
def arange_start(ctx, start, end, step=1, **kwargs):
    return ramp(ctx, start, step)


@register_lowering(prims.iota)
def iota(ctx, length, *, start, step, **kwargs):
    return ramp(ctx, start, step)


@register_lowering("aten.constant")
def constant(ctx, *, data):
    """A tensor constant stays data: a realized `loops.constant_tensor`."""
    op = Operation(
        "loops.constant_tensor",
        [],
        {"data": data},
        list(ctx.outs),
        [ctx.base],
        symbol=ctx.op.symbol,
    )
    return ctx.node(op).result
