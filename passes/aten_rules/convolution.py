"""mind's rule for convolutions with a bias.

- The bias is peeled off, as Inductor's lowering does on GPUs: the library convolution runs
  without it, and the bias is a broadcast add that fuses into the pointwise or normalization
  kernel that reads the convolution's output. cuDNN adds a bias in a kernel of its own (an ATen
  elementwise add, 8 µs of a ViT-B/16 forward's patch embedding on an H200), so a fused add
  saves a launch and a pass over the output. The backward is unchanged: autograd records the
  convolution's own backward before this rule runs.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

aten = torch.ops.aten


def _peel_bias(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    transposed: bool,
    output_padding: Sequence[int],
    groups: int,
):
    if bias is None:
        return NotImplemented
    out = aten.convolution.default(
        x, weight, None, stride, padding, dilation, transposed, output_padding, groups
    )
    return out + bias.view(-1, *[1] * (out.dim() - 2))


#: op overload -> mind's rule
RULES = {aten.convolution.default: _peel_bias}
