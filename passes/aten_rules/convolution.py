"""mind's rules for convolutions.

- **Patches** (a ViT's or a wav2vec's patch embedding): a convolution whose stride is its kernel
  size, without padding, dilation or groups, cuts its input into patches that neither overlap nor
  skip, so it is one matmul over the patches. cuDNN has no fast kernel for it: on an H200, a
  ViT-B/16's bf16 patch embedding (32 images of 224×224 into 384 channels) ran in cuDNN's
  `implicit_convolve_sgemm` for 212 µs, a third of the forward; as a matmul it is a 6272×768×384
  GEMM and a copy that gathers the patches. The backward is two matmuls (and a sum for the bias)
  by the same rule. For 16-bit floats, where the matmul and cuDNN both accumulate in fp32, and
  for fp32 where matmuls run in fp32 (`torch.get_float32_matmul_precision()` is "highest", the
  default, a setting Dynamo guards on): there the matmul is at least as exact as the library,
  which may run an fp32 convolution in TF32 (`torch.backends.cudnn.allow_tf32`, on by default).
  On an H100, the fp32 patch embedding of 32 images of 224×224 into 384 channels took 267 µs in
  cuDNN for an NCHW image, 195 µs (in TF32, 600 times the error) for a channels-last one, and 128
  µs as the gather and an fp32 matmul. A 1×1 convolution is left to the library (the
  channels-last pass lays out the nets that have them).
- **Few input channels** (a conv net's stem: ResNet's 7×7 convolution of the 3-channel image):
  cuDNN's tensor-core kernels take channels in multiples of 8, so a 3-channel image is padded to 8
  channels and convolved by a slow kernel: on an H100, ResNet's bf16 stem (32 images of 224×224
  into 64 channels, stride 2) took 197 µs of a 593 µs forward, and its weight gradient 119 µs.
  In 16 bits, where the input channels are not a multiple of 8, a window holds at most
  WINDOW_MAX elements and all windows at most ROWS_MAX, the windows are gathered as rows
  (padded, unfolded: overlapping windows are copied again) and the convolution is one matmul
  over them, as for patches. The weight's gradient is the matmul of the output's gradient with
  the same rows. The input's gradient, where asked for (a stem's image asks for none), stays the
  library's: it would be a scatter of overlapping windows. ResNet's forward took 552 µs so (the gather 115 µs,
  the matmul 72 µs), a training step 1694 µs against 1829 µs; the rows cost 122 MB of memory.
  Where nothing but the matmul reads the rows (inference: no backward saves them), a Triton
  template gathers them tile by tile instead, with the batch norm and ReLU after it
  (mm-templates' `gathers`): ResNet's stem is one 102 µs kernel, and its forward 417 µs in
  115 MiB at the most (219 MiB with the rows; Inductor 634 µs, 136 MiB). In training the
  backward gathers the rows again for the weight's gradient, rather than the forward saving
  them (passes/to_aten.py `_partition`): a ResNet-18 step peaks at 366 MiB instead of 482, in
  1.68 ms of GPU time (Inductor 332 MiB, 1.92 ms).
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
from torch.fx.experimental.symbolic_shapes import guard_or_false

aten = torch.ops.aten

#: the most elements a window of a few-channel convolution holds (a row of the matmul's K)
WINDOW_MAX = 1024
#: a row of windows is padded to a multiple of this many 16-bit elements (16 bytes)
ROW_ALIGN = 8
#: the most elements the gathered windows may hold (512 MB of bf16; ResNet's stem at 32 images
#: of 224×224 holds 61 million): past it the library convolves without such a buffer
ROWS_MAX = 1 << 28


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
    if _is_few_channels(x, weight, stride, padding, dilation, transposed, groups):
        return _window_convolution(x, weight, bias, stride, padding)
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
    if _is_patches(x, weight, stride, padding, dilation, transposed, groups):
        rows = _patches(x, weight)
    elif (
        _is_few_channels(x, weight, stride, padding, dilation, transposed, groups)
        and not output_mask[0]
    ):
        rows = _windows(x, weight, stride, padding)
    else:
        return NotImplemented
    rank, channels = weight.dim() - 2, weight.shape[0]
    grads = grad.permute(0, *range(2, rank + 2), 1).reshape(-1, channels)  # [windows, O]
    flat = weight.reshape(channels, -1)
    grad_x = _from_patches(aten.mm(grads, flat), x, weight) if output_mask[0] else None
    grad_w = _weight_grad(grads, rows, x, weight) if output_mask[1] else None
    grad_b = grads.sum(0) if output_mask[2] else None
    return grad_x, grad_w, grad_b


def _weight_grad(
    grads: torch.Tensor, rows: torch.Tensor, x: torch.Tensor, weight: torch.Tensor
) -> torch.Tensor:
    """The gradients [windows, O] times the windows' rows (less their padding columns), laid
    out as the library's."""
    grad = aten.mm(grads.t(), rows)[:, : math.prod(weight.shape[1:])]
    return grad.reshape(weight.shape).contiguous(memory_format=_layout(x, weight))


def _is_matmul_like(x, weight, dilation, transposed, groups) -> bool:
    """What both matmul rules ask: a float convolution of a batch, without transposition,
    groups or dilation, over windows of more than one element."""
    return (
        not transposed
        and groups == 1
        and x.dim() == weight.dim()
        and x.dtype == weight.dtype
        and x.dtype in (torch.bfloat16, torch.float16, torch.float32)
        and math.prod(weight.shape[2:]) > 1
        and all(d == 1 for d in dilation)
    )


def _is_patches(x, weight, stride, padding, dilation, transposed, groups) -> bool:
    """Whether the convolution is a matmul over patches that neither overlap nor skip, in 16
    bits or in an fp32 that matmuls keep whole."""
    return (
        _is_matmul_like(x, weight, dilation, transposed, groups)
        and (x.dtype != torch.float32 or torch.get_float32_matmul_precision() == "highest")
        and list(stride) == list(weight.shape[2:])
        and not any(padding)
    )


def _is_few_channels(x, weight, stride, padding, dilation, transposed, groups) -> bool:
    """Whether the convolution's input has too few channels for the library's tensor-core
    kernels (not a multiple of 8), with windows small enough, and few enough, to gather as rows
    (a guard where the sizes are symbols)."""
    width = math.prod(weight.shape[1:])
    return (
        _is_matmul_like(x, weight, dilation, transposed, groups)
        and x.dtype != torch.float32  # (measured on 16-bit kernels only)
        and weight.shape[1] % 8 != 0
        and width <= WINDOW_MAX
        and guard_or_false(
            x.shape[0] * math.prod(_window_grid(x, weight, stride, padding)) * width <= ROWS_MAX
        )
    )


def _patch_convolution(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None):
    """[N, C, *S] into [N, O, *(S // K)]: the patches as rows, times the flattened weight."""
    return _rows_convolution(_patches(x, weight), x, weight, bias, _grid(x, weight))


def _window_convolution(x, weight, bias, stride, padding):
    """[N, C, *S] into [N, O, *grid]: the windows as rows, times the flattened weight."""
    rows = _windows(x, weight, stride, padding)
    return _rows_convolution(rows, x, weight, bias, _window_grid(x, weight, stride, padding))


def _rows_convolution(rows, x, weight, bias, grid: Sequence) -> torch.Tensor:
    """The rows [N * prod(grid), C * prod(K)] times the flattened weight, as [N, O, *grid] laid
    out as the library's."""
    channels, rank = weight.shape[0], weight.dim() - 2
    flat = weight.reshape(channels, -1)
    if rows.shape[1] > flat.shape[1]:  # the rows' padding columns meet zeros
        flat = aten.constant_pad_nd(flat, [0, rows.shape[1] - flat.shape[1]])
    flat = flat.t()
    out = aten.mm(rows, flat) if bias is None else aten.addmm(bias, rows, flat)
    out = out.view(x.shape[0], *grid, channels)
    layout = _layout(x, weight)
    return out.permute(0, rank + 1, *range(1, rank + 1)).contiguous(memory_format=layout)


def _windows(x: torch.Tensor, weight: torch.Tensor, stride, padding) -> torch.Tensor:
    """[N, C, *S] as [N * prod(grid), C * prod(K)]: each window of the zero-padded input a row,
    its elements in the weight's order (channel, then each kernel dim), and zero columns up to a
    multiple of ROW_ALIGN (cuBLAS's fast kernels read rows at 16-byte steps: ResNet's stem
    rows are 147 elements)."""
    rank, kernel = weight.dim() - 2, weight.shape[2:]
    if any(padding):
        x = aten.constant_pad_nd(x, [p for pad in reversed(padding) for p in (pad, pad)])
    for dim, (k, step) in enumerate(zip(kernel, stride)):
        x = x.unfold(2 + dim, k, step)  # [N, C, *grid, *K]
    order = (0, *range(2, rank + 2), 1, *range(rank + 2, 2 * rank + 2))
    width = x.shape[1] * math.prod(kernel)
    rows = x.permute(order).reshape(-1, width)
    return aten.constant_pad_nd(rows, [0, -width % ROW_ALIGN]) if width % ROW_ALIGN else rows


def _window_grid(x: torch.Tensor, weight: torch.Tensor, stride, padding) -> list:
    """The number of windows along each spatial dim."""
    sizes = zip(x.shape[2:], weight.shape[2:], stride, padding)
    return [(size + 2 * pad - k) // step + 1 for size, k, step, pad in sizes]


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
