"""Matmul and convolution run as ATen calls (`loops.extern`): Inductor leaves them to their
libraries (or templates), as mind does."""

from __future__ import annotations

import torch

from . import register_lowering

aten = torch.ops.aten


@register_lowering(aten.mm, aten.bmm, aten.addmm, aten.baddbmm, aten.convolution)
def extern(ctx, *args, **kwargs):
    return ctx.call("extern", ctx.op.name, list(args), kwargs)
