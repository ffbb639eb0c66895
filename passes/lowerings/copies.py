"""Copies and dtype conversions: a pointwise node that loads (broadcast) and casts."""

from __future__ import annotations

import torch

from . import Unsupported, register_lowering
from .common import operand

aten = torch.ops.aten
prims = torch.ops.prims


def copy_of(ctx, src):
    out = ctx.out
    return ctx.pointwise(out.dtype, out.shape, lambda b, idx: operand(b, src, idx, out.dtype))


@register_lowering(aten.clone, aten.lift_fresh_copy, prims.convert_element_type, prims.copy_strided)
def clone(ctx, x, *args, **kwargs):
    return copy_of(ctx, x)


@register_lowering(aten._to_copy)
def to_copy(ctx, x, **kwargs):
    if x.type.device is not None and ctx.out.device != x.type.device:
        raise Unsupported("a copy to another device")
    return copy_of(ctx, x)


@register_lowering(aten.copy)
def copy(ctx, dst, src, non_blocking=False):
    """`dst` overwritten by `src` broadcast to its shape and cast to its dtype."""
    return copy_of(ctx, src)
