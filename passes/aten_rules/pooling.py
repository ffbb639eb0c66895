"""mind's rules for pooling.

- Adaptive max pooling: an empty output is made empty; a global one (every output size 1) is an
  amax and an argmax over the flattened pooled dims, for any window; an even one (each output
  size dividing its input size) is max pooling over windows of input / output. Indices are
  flat over the pooled dims, the first maximum, or where NaNs are the last NaN, as eager's
  kernels pick (a NaN replaces what came before; argmax keeps the first). Other cases return
  NotImplemented: mind's lowering (lowerings/pooling.py) unrolls their windows.
- Max pooling's backward, 2-d and 3-d, where more windows span an input position than mind's
  lowering gathers from (lowerings/pooling.py, `gathers`): a scatter-add of the gradient at the
  forward's indices into zeros of the input's shape (in f32 for f16 and bf16, then cast back),
  which mind lowers with atomics. Under deterministic algorithms ATen's own kernel stays: atomic
  adds sum in any order. Where the lowering gathers, the op stays (torch 2.14's own rule is the
  scatter-add).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import torch

from ..lowerings.pooling import gathers, max_pool_window

aten = torch.ops.aten


def _adaptive_max_pool(x: torch.Tensor, output_size: Sequence[int], *, n: int):
    shape = (*x.shape[:-n], *output_size)
    if 0 in output_size:
        return x.new_empty(shape), x.new_empty(shape, dtype=torch.int64)
    if all(o == 1 for o in output_size):
        flat = x.flatten(-n)
        position = torch.arange(flat.shape[-1], device=x.device)
        last_nan = torch.where(flat.isnan(), position, -1).amax(-1)
        indices = torch.where(last_nan < 0, flat.argmax(-1), last_nan)
        return flat.amax(-1).reshape(shape), indices.reshape(shape)
    spatial = x.shape[-n:]
    if all(i % o == 0 for i, o in zip(spatial, output_size)):
        max_pool = (aten.max_pool2d_with_indices, aten.max_pool3d_with_indices)[n - 2]
        return max_pool(x, [i // o for i, o in zip(spatial, output_size)])
    return NotImplemented


def _max_pool_backward(grad, x, kernel_size, stride, padding, dilation, ceil_mode, indices, *, n):
    window = max_pool_window(x.shape, kernel_size, stride, padding, dilation, n)
    if gathers(window) or torch.are_deterministic_algorithms_enabled():
        return NotImplemented
    batch = grad.shape[:-n]
    half = grad.dtype in (torch.float16, torch.bfloat16)
    accumulate = torch.float32 if half else grad.dtype
    outputs, inputs = math.prod(grad.shape[-n:]), math.prod(x.shape[-n:])
    zeros = grad.new_zeros((*batch, inputs), dtype=accumulate)
    flat = zeros.scatter_add(
        -1, indices.reshape(*batch, outputs), grad.reshape(*batch, outputs).to(accumulate)
    )
    return flat.reshape(x.shape).to(grad.dtype)


#: op overload -> mind's rule
RULES = {
    aten.adaptive_max_pool2d.default: functools.partial(_adaptive_max_pool, n=2),
    aten.adaptive_max_pool3d.default: functools.partial(_adaptive_max_pool, n=3),
    aten.max_pool2d_with_indices_backward.default: functools.partial(_max_pool_backward, n=2),
    aten.max_pool3d_with_indices_backward.default: functools.partial(_max_pool_backward, n=3),
}
