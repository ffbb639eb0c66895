"""What the program fuzzer (tools/program_fuzz.py) draws from: the layouts its first input may
come in, and the ops a step applies, each with how it draws its parameters. A new op is a line
in OPS; the fuzzer keeps a step only where eager runs it, so an op need not fit every shape or
dtype.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F


def _every_other(x: torch.Tensor) -> torch.Tensor:
    """`x` as every other element along the last dim of a larger tensor, from element 1: strided,
    and at an offset."""
    larger = x.new_zeros(*x.shape[:-1], 2 * x.shape[-1] + 1)
    larger[..., 1::2] = x
    return larger[..., 1::2]


#: how the first input lies in memory, as a caller's tensor may: contiguous, or a view that a
#: graph's input strides and storage offset must describe
LAYOUTS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "dense": lambda x: x,
    "transposed": lambda x: x.transpose(0, 1).contiguous().transpose(0, 1) if x.dim() > 1 else x,
    "sliced": lambda x: _every_other(x) if x.dim() else x,
    # its first row along dim 0, broadcast (stride 0): elements share memory
    "expanded": lambda x: x[:1].expand(x.shape) if x.dim() else x,
}


@dataclass(frozen=True)
class Op:
    """`apply(params, *operands)`; `params(r, *operands)` draws its parameters; `rounds_to`: the
    dtype it rounds its result to inside (and widens back from), for the fuzzer's tolerance."""

    arity: int
    apply: Callable[..., torch.Tensor]
    params: Callable[..., tuple] = lambda r, *xs: ()
    rounds_to: torch.dtype | None = None


def _dim(r: random.Random, x: torch.Tensor) -> tuple:
    return (r.randrange(max(x.dim(), 1)),)


def _dim_keep(r: random.Random, x: torch.Tensor) -> tuple:
    return (r.randrange(max(x.dim(), 1)), r.random() < 0.5)


def _unary(fn: Callable[[torch.Tensor], torch.Tensor]) -> Op:
    return Op(1, lambda p, x: fn(x))


def _binary(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> Op:
    return Op(2, lambda p, x, y: fn(x, y))


def _reduction(fn: Callable[..., torch.Tensor]) -> Op:
    return Op(1, lambda p, x: fn(x, p[0], keepdim=p[1]), _dim_keep)


def _written(write: Callable[[torch.Tensor], object]) -> Op:
    """A copy of the operand, `write` applied in place to views of it: functionalization makes
    each write a scatter back into the copy (slice_scatter, diagonal_scatter, ...)."""

    def apply(p, x: torch.Tensor) -> torch.Tensor:
        y = x.clone()
        write(y)
        return y

    return Op(1, apply)


OPS: dict[str, Op] = {
    # elementwise
    "relu": _unary(torch.relu),
    "sigmoid": _unary(torch.sigmoid),
    "tanh": _unary(torch.tanh),
    "exp": _unary(torch.exp),
    "log1p_abs": _unary(lambda x: torch.log1p(x.abs())),
    "rsqrt": _unary(lambda x: torch.rsqrt(x.abs() + 0.5)),
    "sin": _unary(torch.sin),
    "erf": _unary(torch.erf),
    "gelu": _unary(F.gelu),
    "silu": _unary(F.silu),
    "clamp": _unary(lambda x: x.clamp(-0.5, 0.7)),
    "floor": _unary(lambda x: torch.floor(x * 3)),
    "sign": _unary(torch.sign),
    "remainder": _unary(lambda x: torch.remainder(x, 0.7)),
    "pow": _unary(lambda x: x.abs().pow(1.5)),
    "to_bf16": Op(1, lambda p, x: x.to(torch.bfloat16).float(), rounds_to=torch.bfloat16),
    "to_f16": Op(1, lambda p, x: x.to(torch.float16).float(), rounds_to=torch.float16),
    "to_i32": _unary(lambda x: (x * 4).to(torch.int32).float()),
    "positive": _unary(lambda x: (x > 0).float()),
    "where": _unary(lambda x: torch.where(x > 0.1, x, -2 * x)),
    "add": _binary(torch.add),
    "mul": _binary(torch.mul),
    "div": _binary(lambda x, y: x / (y.abs() + 1)),
    "maximum": _binary(torch.maximum),
    "select_greater": _binary(lambda x, y: torch.where(x > y, x, 0.5 * y)),
    "atan2": _binary(torch.atan2),
    "matmul": _binary(lambda x, y: x @ y.transpose(-1, -2)),
    # reductions and scans
    "sum": _reduction(torch.sum),
    "mean": _reduction(torch.mean),
    "amax": _reduction(torch.amax),
    "amin": _reduction(torch.amin),
    "var": _reduction(torch.var),
    "std": _reduction(torch.std),
    "logsumexp": _reduction(torch.logsumexp),
    "prod": _reduction(lambda x, d, keepdim: torch.prod(x.clamp(-1.1, 1.1), d, keepdim=keepdim)),
    "norm": _reduction(lambda x, d, keepdim: torch.linalg.vector_norm(x, 2, d, keepdim=keepdim)),
    "max": _reduction(lambda x, d, keepdim: torch.max(x, d, keepdim=keepdim).values),
    "argmax": _reduction(lambda x, d, keepdim: torch.argmax(x, d, keepdim=keepdim).float()),
    "softmax": Op(1, lambda p, x: torch.softmax(x, p[0]), _dim),
    "log_softmax": Op(1, lambda p, x: torch.log_softmax(x, p[0]), _dim),
    "cumsum": Op(1, lambda p, x: torch.cumsum(x, p[0]), _dim),
    # views and data movement
    "transpose": Op(1, lambda p, x: x.transpose(0, -1)),
    "permute": Op(
        1, lambda p, x: x.permute(p), lambda r, x: tuple(r.sample(range(x.dim()), x.dim()))
    ),
    "flatten": Op(1, lambda p, x: x.reshape(-1)),
    "half": Op(1, lambda p, x: x.narrow(p[0], 0, max(1, x.shape[p[0]] // 2)), _dim),
    "step": Op(1, lambda p, x: x[(slice(None),) * p[0] + (slice(None, None, 2),)], _dim),
    "last": Op(1, lambda p, x: x[..., -1:]),
    "flip": Op(1, lambda p, x: x.flip(p[0]), _dim),
    "roll": Op(1, lambda p, x: torch.roll(x, 1, p[0]), _dim),
    "expand": Op(1, lambda p, x: x.unsqueeze(0).expand(3, *x.shape)),
    "unsqueeze": Op(1, lambda p, x: x.unsqueeze(-1)),
    "cat": Op(1, lambda p, x: torch.cat([x, 2 * x], p[0]), _dim),
    "pad": Op(1, lambda p, x: F.pad(x, (1, 2))),
    "repeat": Op(1, lambda p, x: x.repeat(2, *[1] * (x.dim() - 1))),
    "contiguous": Op(1, lambda p, x: x.contiguous()),
    "index_select": Op(
        1,
        lambda p, x: x.index_select(p[0], torch.tensor([0, x.shape[p[0]] - 1, 0], device=x.device)),
        _dim,
    ),
    "stack": Op(1, lambda p, x: torch.stack([x, -x], p[0]), _dim),
    "chunk": Op(1, lambda p, x: torch.chunk(x, 2, p[0])[-1], _dim),
    "scatter_add": Op(
        1, lambda p, x: x.scatter_add(p[0], torch.zeros_like(x, dtype=torch.long), x), _dim
    ),
    "index_add": Op(
        1,
        lambda p, x: x.index_add(
            p[0], torch.zeros(x.shape[p[0]], dtype=torch.long, device=x.device), x
        ),
        _dim,
    ),
    "embedding": Op(
        1,
        lambda p, x: F.embedding(
            torch.tensor([[0, 1], [1, 0]], device=x.device) % x.shape[0], x.reshape(x.shape[0], -1)
        ),
    ),
    "layer_norm": Op(1, lambda p, x: F.layer_norm(x, x.shape[-1:])),
    "topk": Op(1, lambda p, x: torch.topk(x, 1, p[0]).values, _dim),
    "sort": Op(
        1, lambda p, x: torch.sort(x, stable=True, dim=p[0]).values, _dim
    ),  # (ties in order)
    "cummax": Op(1, lambda p, x: torch.cummax(x, p[0]).values, _dim),
    "masked_fill": Op(1, lambda p, x: x.masked_fill(x < -0.5, -1e4)),
    "add_inplace": Op(1, lambda p, x: x.clone().mul_(2).add_(1)),
    "floor_divide": Op(1, lambda p, x: torch.floor_divide((x * 8).to(torch.int64), 3).float()),
    "nan_to_num": Op(1, lambda p, x: torch.nan_to_num(torch.log(x), neginf=-5.0)),
    "gather_reversed": Op(
        1,
        lambda p, x: torch.gather(
            x, -1, torch.arange(x.shape[-1], device=x.device).flip(0).expand(x.shape).contiguous()
        ),
    ),
    # more elementwise
    "softplus": _unary(F.softplus),
    "hardswish": _unary(F.hardswish),
    "leaky_relu": _unary(lambda x: F.leaky_relu(x, 0.1)),
    "elu": _unary(F.elu),
    "mish": _unary(F.mish),
    "logsigmoid": _unary(F.logsigmoid),
    "expm1": _unary(torch.expm1),
    "round": _unary(lambda x: torch.round(x * 4)),
    "trunc_div": _binary(lambda x, y: torch.div(x, y.abs() + 0.5, rounding_mode="trunc")),
    "floor_div": _binary(lambda x, y: torch.div(x, y.abs() + 0.5, rounding_mode="floor")),
    "lerp": _binary(lambda x, y: torch.lerp(x, y, 0.3)),
    "addcmul": _binary(lambda x, y: torch.addcmul(x, x, y, value=0.5)),
    "clamp_tensor": _binary(lambda x, y: torch.clamp(x, min=y)),
    "isfinite": _unary(lambda x: torch.isfinite(x / (x - x.detach())).float()),
    "logical": _binary(lambda x, y: torch.logical_and(x > 0, y < 0.5).float()),
    "where_scalar": _unary(lambda x: torch.where(x > 0, x, 0.0)),
    "fmod": _unary(lambda x: torch.fmod(x, -0.6)),
    "full_like": _unary(lambda x: x + torch.full_like(x, 2.0)),
    "arange_add": _unary(lambda x: x + torch.arange(x.shape[-1], device=x.device)),
    # more reductions, scans and norms
    "sum_all": _unary(torch.sum),
    "amax_all": _unary(torch.amax),
    "mean_dims": _unary(lambda x: x.mean((0, -1), keepdim=True)),
    "min_indices": Op(1, lambda p, x: torch.min(x, p[0]).indices.float(), _dim),
    "var_biased": _reduction(lambda x, d, keepdim: torch.var(x, d, keepdim=keepdim, correction=0)),
    "cumprod": Op(1, lambda p, x: torch.cumprod(x.clamp(-1.2, 1.2), p[0]), _dim),
    "logcumsumexp": Op(1, lambda p, x: torch.logcumsumexp(x, p[0]), _dim),
    "cummin": Op(1, lambda p, x: torch.cummin(x, p[0]).values, _dim),
    "argsort": Op(1, lambda p, x: torch.argsort(x, dim=p[0], stable=True).float(), _dim),
    "rms_norm": Op(1, lambda p, x: F.rms_norm(x, x.shape[-1:])),
    "group_norm": Op(1, lambda p, x: F.group_norm(x, 1)),
    "batch_norm": Op(1, lambda p, x: F.batch_norm(x, None, None, training=True)),
    "cross_entropy": Op(1, lambda p, x: F.cross_entropy(x, x.argmax(1))),
    "one_hot": Op(1, lambda p, x: F.one_hot(x.argmax(-1), x.shape[-1]).float() * x),
    "bucketize": Op(
        1,
        lambda p, x: torch.bucketize(x, torch.tensor([-1.0, 0.0, 0.5], device=x.device)).float(),
    ),
    # sizes known only at run time: Dynamo breaks the graph there (two graphs, or more)
    "masked_select": Op(1, lambda p, x: x[x > 0]),
    "nonzero": Op(1, lambda p, x: torch.nonzero(x > 0).to(x.dtype)),
    # more views and data movement
    "select": Op(1, lambda p, x: x.select(p[0], -1), _dim),
    "squeeze": Op(1, lambda p, x: x.squeeze()),
    "tril": Op(1, lambda p, x: torch.tril(x, -1)),
    "diagonal": Op(1, lambda p, x: torch.diagonal(x, 0, 0, -1)),
    "diff": Op(1, lambda p, x: torch.diff(x, dim=p[0]), _dim),
    "unfold": Op(1, lambda p, x: x.unfold(p[0], 2, 1), _dim),
    "transpose_reshape": Op(1, lambda p, x: x.transpose(0, -1).reshape(-1, x.shape[0])),
    "unbind_sum": Op(1, lambda p, x: sum(torch.unbind(x, p[0])), _dim),
    "max_pool": Op(1, lambda p, x: F.max_pool1d(x, 2, 1)),
    "avg_pool": Op(1, lambda p, x: F.avg_pool1d(x, 3, 2, 1)),
    "interpolate": Op(1, lambda p, x: F.interpolate(x, scale_factor=2, mode="linear")),
    "bmm": _binary(lambda x, y: torch.matmul(x, y.mT.flip(-1))),
    "sdpa": Op(1, lambda p, x: F.scaled_dot_product_attention(x, x, x)),
    "scatter_amax": Op(
        1,
        lambda p, x: x.scatter_reduce(
            p[0], torch.zeros_like(x, dtype=torch.long), x, "amax", include_self=False
        ),
        _dim,
    ),
    "index_put": Op(
        1,
        lambda p, x: x.clone().index_put_(
            (torch.tensor([0, 0], device=x.device),), x[:1].expand(2, *x.shape[1:]), accumulate=True
        ),
    ),
    # NaN (which every op after it meets), integers, more math
    "nan_where": _unary(lambda x: torch.where(x > 1.2, torch.nan, x)),
    "isnan": _unary(lambda x: torch.isnan(x).float()),
    "abs": _unary(torch.abs),
    "neg": _unary(torch.neg),
    "square": _unary(torch.square),
    "reciprocal": _unary(lambda x: torch.reciprocal(x.abs() + 0.5)),
    "log2": _unary(lambda x: torch.log2(x.abs() + 0.1)),
    "sinh": _unary(lambda x: torch.sinh(x.clamp(-5, 5))),
    "asinh": _unary(torch.asinh),
    "atan": _unary(torch.atan),
    "ceil": _unary(lambda x: torch.ceil(x * 3)),
    "frac": _unary(lambda x: torch.frac(x * 3)),
    "trunc": _unary(lambda x: torch.trunc(x * 3)),
    "erfinv": _unary(lambda x: torch.erfinv(torch.tanh(x) * 0.9)),
    "lgamma": _unary(lambda x: torch.lgamma(x.abs() + 0.5)),
    "signbit": _unary(lambda x: torch.signbit(x).float()),
    "scale_shift": _unary(lambda x: x * 2.5 + 1),
    "bitwise_xor": _binary(lambda x, y: torch.bitwise_xor(x, y) & 7),
    "shifts": _unary(lambda x: (x << 2) >> 1),
    "hypot": _binary(torch.hypot),
    "logaddexp": _binary(torch.logaddexp),
    "copysign": _binary(torch.copysign),
    "xlogy": _binary(lambda x, y: torch.xlogy(x, y.abs())),
    "heaviside": _binary(lambda x, y: torch.heaviside(x.detach(), y.detach())),  # (no gradient)
    "minimum": _binary(torch.minimum),
    "remainder_tensor": _binary(lambda x, y: torch.remainder(x, y.abs() + 1)),
    "pow_tensor": _binary(lambda x, y: x.abs().pow(y.clamp(-2, 2))),
    # more reductions
    "nansum": _reduction(torch.nansum),
    "nanmean": _reduction(torch.nanmean),
    "min": _reduction(lambda x, d, keepdim: torch.min(x, d, keepdim=keepdim).values),
    "argmin": _reduction(lambda x, d, keepdim: torch.argmin(x, d, keepdim=keepdim).float()),
    "any": _reduction(lambda x, d, keepdim: torch.any(x > 0.3, d, keepdim=keepdim).float()),
    "all": _reduction(lambda x, d, keepdim: torch.all(x > -1, d, keepdim=keepdim).float()),
    "count_nonzero": Op(1, lambda p, x: torch.count_nonzero(x > 0, p[0]).float(), _dim),
    "aminmax": Op(1, lambda p, x: sum(torch.aminmax(x, dim=p[0])), _dim),
    "var_mean": Op(1, lambda p, x: sum(torch.var_mean(x, p[0])), _dim),
    "median": Op(1, lambda p, x: torch.median(x, p[0]).values, _dim),
    "kthvalue": Op(1, lambda p, x: torch.kthvalue(x, 1, p[0]).values, _dim),
    # more data movement
    "movedim": Op(1, lambda p, x: torch.movedim(x, 0, -1)),
    "rot90": Op(1, lambda p, x: torch.rot90(x, 1, (0, -1))),
    "triu": Op(1, lambda p, x: torch.triu(x, 1)),
    "narrow_from_1": Op(1, lambda p, x: x.narrow(p[0], 1, x.shape[p[0]] - 1), _dim),
    "split": Op(1, lambda p, x: torch.split(x, [1, x.shape[p[0]] - 1], p[0])[-1], _dim),
    "take_along_dim": Op(
        1, lambda p, x: torch.take_along_dim(x, torch.argsort(x, dim=p[0], stable=True), p[0]), _dim
    ),
    "scatter_permuted": Op(
        1, lambda p, x: x.scatter(p[0], torch.argsort(x, dim=p[0], stable=True), 2 * x), _dim
    ),
    "index_copy": Op(
        1,
        lambda p, x: x.index_copy(
            p[0], torch.tensor([x.shape[p[0]] - 1], device=x.device), x.narrow(p[0], 0, 1)
        ),
        _dim,
    ),
    "index_fill": Op(
        1, lambda p, x: x.index_fill(p[0], torch.tensor([0], device=x.device), -3), _dim
    ),
    "einsum_outer": _binary(lambda x, y: torch.einsum("...i,...j->...ij", x, y)),
    # losses and layers
    "mse_loss": _binary(F.mse_loss),
    "smooth_l1": _binary(F.smooth_l1_loss),
    "bce_logits": _binary(lambda x, y: F.binary_cross_entropy_with_logits(x, torch.sigmoid(y))),
    "kl_div": _binary(
        lambda x, y: F.kl_div(F.log_softmax(x, -1), F.softmax(y, -1), reduction="batchmean")
    ),
    "glu": Op(1, lambda p, x: F.glu(torch.cat([x, x.flip(-1)], -1))),
    "hardtanh": _unary(F.hardtanh),
    "threshold": _unary(lambda x: F.threshold(x, 0.2, -1.0)),
    "prelu": _unary(lambda x: F.prelu(x, torch.tensor([0.25], device=x.device, dtype=x.dtype))),
    "conv1d": Op(1, lambda p, x: F.conv1d(x, x[:2, :, :2].flip(-1), padding=1)),
    "adaptive_avg_pool": Op(1, lambda p, x: F.adaptive_avg_pool1d(x, 3)),
    "normalize": Op(1, lambda p, x: F.normalize(x, dim=p[0]), _dim),
    "cosine_similarity": _binary(lambda x, y: F.cosine_similarity(x, y, dim=-1)),
    "instance_norm": Op(1, lambda p, x: F.instance_norm(x)),
    # writes into views of a copy
    "write_narrow": _written(lambda y: y.narrow(-1, 0, 1).mul_(-1)),
    "write_diagonal": _written(lambda y: y.diagonal(0, 0, -1).add_(1)),
    "write_strided": _written(lambda y: y[::2].sub_(0.5)),
    "write_transposed_row": _written(lambda y: y.transpose(0, -1)[-1].mul_(3)),
    "write_flat_step": _written(lambda y: y.view(-1)[::3].zero_()),
    "write_twice": _written(lambda y: (y[1:].mul_(2), y[:1].add_(y[-1:].clone()))),
}
