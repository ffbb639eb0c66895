"""Matmul and convolution run as ATen calls (`loops.extern`): Inductor leaves them to their
libraries (or templates), as mind does.

An addmm whose bias is broadcast and whose result only pointwise ops read (through views) runs
as an mm and a pointwise bias add, on a GPU in f32 or f64, as Inductor's post-grad
`unfuse_bias_add_to_pointwise` does: the add fuses into its readers' kernel, and cuBLAS's mm
may pick a faster kernel than its addmm of a broadcast bias (GPT-2's 3072 -> 768 projection in
f32 on an H200: 206 against 247 us; its 768 -> 3072 one, 216 against 210). A half-precision
addmm stays whole (Inductor's `keep_addmm_fused_for_half_dtypes`), as does one read by a
reduction, a call or the graph's output (a training forward saves it for the backward).
"""

from __future__ import annotations

import torch
from mind.dialects.aten import target_of
from mind.dialects.loops import LIBRARY_CALLS
from mind.ir import dtypes as dt
from mind.ir.core import Operation, Value
from mind.ir.types import TensorType

from . import register_lowering
from .common import broadcast_index, is_tensor, operand

aten = torch.ops.aten


@register_lowering(*(getattr(aten, name) for name in LIBRARY_CALLS))
def extern(ctx, *args, **kwargs):
    if ctx.op.name == "aten.addmm.default" and _unfuses_bias(ctx):
        return _mm_and_bias(ctx, *args, **kwargs)
    return ctx.call("extern", ctx.op.name, list(args), kwargs)


def _unfuses_bias(ctx) -> bool:
    """Whether the addmm `ctx` lowers runs as mm and a bias add (see the module docstring): its
    aten bias is read broadcast (fewer dims, a size-1 dim, or a stride-0 one: an expand)."""
    out, bias = ctx.out, ctx.op.args[0]
    if out.device is None or out.device.type != "cuda" or out.dtype not in (dt.f32, dt.f64):
        return False
    if not is_tensor(bias) or bias.type.dtype != out.dtype:
        return False
    t = bias.type
    broadcast = (
        t.rank < out.rank
        or any(b == 1 != o for b, o in zip(t.shape, out.shape))
        or any(s == 0 for s in t.strides or ())
    )
    return broadcast and _pointwise_readers(ctx.op.result)


def _pointwise_readers(value: Value) -> bool:
    """Whether only pointwise aten ops read `value`, through views (Inductor's
    `is_pointwise_use`)."""
    users = list(value.users)
    return bool(users) and all(_pointwise_use(op) for op in users)


def _pointwise_use(op: Operation) -> bool:
    target = target_of(op)[0] if op.name.startswith("aten.") else None
    if not isinstance(target, torch._ops.OpOverload):
        return False
    if target.is_view:
        return all(_pointwise_readers(r) for r in op.results if isinstance(r.type, TensorType))
    return torch.Tag.pointwise in target.tags


def _mm_and_bias(ctx, bias, a, b, *, beta=1, alpha=1):
    """`beta * bias + alpha * mm(a, b)`: the mm an ATen call, the rest a pointwise node."""
    out = ctx.out
    (mm,) = ctx.call("extern", "aten.mm.default", [a, b], {}, aten_args=ctx.op.args[1:3])

    def body(b_, idx):
        value = operand(b_, mm, idx, out.dtype)
        if alpha != 1:
            value = b_.mul(value, b_.constant(alpha, out.dtype))
        if beta == 0:
            return value
        term = operand(b_, bias, broadcast_index(bias.type.shape, idx), out.dtype)
        if beta != 1:
            term = b_.mul(term, b_.constant(beta, out.dtype))
        return b_.add(term, value)

    return ctx.pointwise(out.dtype, out.shape, body)
