"""mind's rules for convolutions.

- **Patches** (a ViT's or a wav2vec's patch embedding): a convolution whose stride is its kernel
  size, without padding, dilation or groups, cuts its input into patches that neither overlap nor
  skip, so it is one matmul over the patches. cuDNN has no fast kernel for it: on an H200, a
  ViT-B/16's bf16 patch embedding (32 images of 224×224 into 384 channels) ran in cuDNN's
  `implicit_convolve_sgemm` for 212 µs, a third of the forward; as a matmul it is a 6272×768×384
  GEMM and a copy that gathers the patches. The backward is two matmuls (and a sum for the bias)
  by the same rule. Only for 16-bit floats, where the matmul and cuDNN both accumulate in fp32:
  an fp32 convolution may run in TF32 (`torch.backends.cudnn.allow_tf32`, on by default) where a
  matmul would not, so fp32 stays the library's, as eager runs it. A 1×1 convolution is left to
  the library too (the channels-last pass lays out the nets that have them).
- **Bias:** otherwise the bias is peeled off, as Inductor's lowering does on GPUs: the library
  convolution runs without it, and the bias is a broadcast add that fuses into the pointwise or
  normalization kernel that reads the convolution's output. cuDNN adds a bias in a kernel of its
  own (an ATen elementwise add, 8 µs of a ViT-B/16 forward's patch embedding on an H200), so a
  fused add saves a launch and a pass over the output. The backward is unchanged: autograd
  records the convolution's own backward before this rule runs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch._prims_common import suggest_memory_format

aten = torch.ops.aten


def _convolution(
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
    if _is_patches(x, weight, stride, padding, dilation, transposed, groups):
        return _patch_convolution(x, weight, bias)
    if bias is None:
        return NotImplemented
    out = aten.convolution.default(
        x, weight, None, stride, padding, dilation, transposed, output_padding, groups
    )
    return out + bias.view(-1, *[1] * (out.dim() - 2))


def _convolution_backward(
    grad: torch.Tensor,
    x: torch.Tensor,
    weight: torch.Tensor,
    bias_sizes: Sequence[int] | None,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    transposed: bool,
    output_padding: Sequence[int],
    groups: int,
    output_mask: Sequence[bool],
):
    if not _is_patches(x, weight, stride, padding, dilation, transposed, groups):
        return NotImplemented
    rank, channels = weight.dim() - 2, weight.shape[0]
    grads = grad.permute(0, *range(2, rank + 2), 1).reshape(-1, channels)  # [patches, O]
    flat = weight.reshape(channels, -1)
    grad_x = _from_patches(aten.mm(grads, flat), x, weight) if output_mask[0] else None
    grad_w = _weight_grad(grads, x, weight) if output_mask[1] else None
    grad_b = grads.sum(0) if output_mask[2] else None
    return grad_x, grad_w, grad_b


def _weight_grad(grads: torch.Tensor, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The gradients [patches, O] times the patches, laid out as the library's."""
    grad = aten.mm(grads.t(), _patches(x, weight)).view(weight.shape)
    return grad.contiguous(memory_format=_layout(x, weight))


def _is_patches(x, weight, stride, padding, dilation, transposed, groups) -> bool:
    """Whether the convolution is a matmul over patches that neither overlap nor skip."""
    kernel = list(weight.shape[2:])
    return (
        not transposed
        and groups == 1
        and x.dim() == weight.dim()
        and x.dtype == weight.dtype
        and x.dtype in (torch.bfloat16, torch.float16)
        and math.prod(kernel) > 1
        and list(stride) == kernel
        and not any(padding)
        and all(d == 1 for d in dilation)
    )


def _patch_convolution(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None):
    """[N, C, *S] into [N, O, *(S // K)]: the patches as rows, times the flattened weight."""
    channels, rank = weight.shape[0], weight.dim() - 2
    rows, flat = _patches(x, weight), weight.reshape(channels, -1).t()
    out = aten.mm(rows, flat) if bias is None else aten.addmm(bias, rows, flat)
    out = out.view(x.shape[0], *_grid(x, weight), channels)
    layout = _layout(x, weight)
    return out.permute(0, rank + 1, *range(1, rank + 1)).contiguous(memory_format=layout)


def _patches(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """[N, C, *S] as [N * prod(S // K), C * prod(K)]: one patch per row, its elements in the
    weight's order (channel, then each kernel dim). A tail shorter than a patch is dropped."""
    kernel, rank, sizes = weight.shape[2:], weight.dim() - 2, _grid(x, weight)
    for dim, (size, k) in enumerate(zip(sizes, kernel)):
        if size * k != x.shape[2 + dim]:
            x = x.narrow(2 + dim, 0, size * k)
    split = x.reshape(*x.shape[:2], *(n for pair in zip(sizes, kernel) for n in pair))
    order = (0, *range(2, 2 * rank + 2, 2), 1, *range(3, 2 * rank + 2, 2))
    rows, width = x.shape[0] * math.prod(sizes), x.shape[1] * math.prod(kernel)
    return split.permute(order).reshape(rows, width)  # (-1 would be a quotient of sizes)


def _from_patches(rows: torch.Tensor, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """`_patches` undone: rows [N * P, C * prod(K)] back into x's shape, zeros in a dropped
    tail."""
    kernel, rank, sizes = weight.shape[2:], weight.dim() - 2, _grid(x, weight)
    split = rows.view(x.shape[0], *sizes, x.shape[1], *kernel)
    order = (0, rank + 1, *(d for i in range(rank) for d in (1 + i, rank + 2 + i)))
    out = split.permute(order).reshape(*x.shape[:2], *(n * k for n, k in zip(sizes, kernel)))
    tails = [x.shape[2 + d] - n * k for d, (n, k) in enumerate(zip(sizes, kernel))]
    if any(tails):
        out = aten.constant_pad_nd(out, [v for tail in reversed(tails) for v in (0, tail)])
    return out.contiguous(memory_format=_layout(x, weight))


def _grid(x: torch.Tensor, weight: torch.Tensor) -> list:
    """The number of patches along each spatial dim."""
    return [size // k for size, k in zip(x.shape[2:], weight.shape[2:])]


def _layout(x: torch.Tensor, weight: torch.Tensor) -> torch.memory_format:
    """The layout the library gives a convolution's results, forward and backward: channels-last
    where the image or the weight is."""
    formats = {suggest_memory_format(x), suggest_memory_format(weight)} - {torch.contiguous_format}
    return formats.pop() if formats else torch.contiguous_format


#: op overload -> mind's rule
RULES = {
    aten.convolution.default: _convolution,
    aten.convolution_backward.default: _convolution_backward,
}
