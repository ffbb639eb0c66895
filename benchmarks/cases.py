"""The benchmark programs: each a plain PyTorch function, its inputs at full and at smoke-test size.

Bytes moved are not written here: every case reads each input whole and writes its outputs once,
so the minimum traffic is the sum of their sizes, which the harness measures from the tensors.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

EPS = 1e-5


def seed(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    return ((a + b) * c.relu()).sum(dim=-1)


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


def layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) * torch.rsqrt(var + EPS) * w + b


def softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def rms_norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + EPS)).type_as(x) * w


def column_sum(x: torch.Tensor) -> torch.Tensor:
    return x.sum(0)


def add_transpose(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x + y.t()


def silu_mul(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return F.silu(a) * b


def linear_gelu(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.gelu(x @ w + b, approximate="tanh")


def mlp_projection(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """A transformer MLP's first Linear and its tanh-GELU (an addmm: mm-epilogues folds it)."""
    return F.gelu(F.linear(x, w, b), approximate="tanh")


@dataclass(frozen=True)
class Input:
    """One argument: its shape at full and small size, dtype, and a scale that keeps values O(1)."""

    full: tuple[int, ...]
    small: tuple[int, ...]
    dtype: torch.dtype = torch.float32
    scale: float = 1.0


@dataclass(frozen=True)
class Case:
    name: str
    fn: Callable[..., torch.Tensor]
    inputs: tuple[Input, ...]
    flops: Callable[[tuple[torch.Tensor, ...]], int] | None = None  # only where compute-bound
    tol: float | None = None  # rtol = atol; None: by output dtype (see TOLERANCE)


# rtol = atol per output dtype: loose enough for a different reduction order, tight enough for a bug.
TOLERANCE = {torch.float32: 1e-3, torch.bfloat16: 2e-2, torch.float16: 1e-2}

BF16 = torch.bfloat16
K = 4096


def _matmul_flops(args: tuple[torch.Tensor, ...]) -> int:
    x, w, _ = args
    return 2 * x.shape[0] * x.shape[1] * w.shape[1]


def _linear_flops(args: tuple[torch.Tensor, ...]) -> int:
    x, w, _ = args
    return 2 * x.shape[0] * x.shape[1] * w.shape[0]


CASES: tuple[Case, ...] = (
    Case("seed_4x128", seed, (Input((4, 128), (4, 128)),) * 3),
    Case("seed_16384x4096", seed, (Input((16384, 4096), (8, 32)),) * 3),
    Case("gelu_tanh_2^26", gelu_tanh, (Input((2**26,), (1000,)),)),
    Case(
        "layer_norm_128x512",
        layer_norm,
        (Input((128, 512), (4, 32)), Input((512,), (32,)), Input((512,), (32,))),
    ),
    Case(
        "layer_norm_16384x4096",
        layer_norm,
        (Input((16384, 4096), (8, 64)), Input((4096,), (64,)), Input((4096,), (64,))),
    ),
    Case("softmax_16384x4096", softmax, (Input((16384, 4096), (8, 64)),)),
    Case("softmax_1024x65536", softmax, (Input((1024, 65536), (4, 256)),)),
    Case(
        "rms_norm_bf16_16384x4096",
        rms_norm,
        (Input((16384, 4096), (8, 64), BF16), Input((4096,), (64,), BF16)),
    ),
    Case("column_sum_8192x8192", column_sum, (Input((8192, 8192), (64, 48)),)),
    Case(
        "add_transpose_8192x8192",
        add_transpose,
        (Input((8192, 8192), (32, 48)), Input((8192, 8192), (48, 32))),
    ),
    Case("silu_mul_bf16_8192x28672", silu_mul, (Input((8192, 28672), (16, 64), BF16),)),
    Case(
        "linear_gelu_4096",
        linear_gelu,
        (
            Input((K, K), (16, 32)),
            Input((K, K), (32, 24), scale=1 / math.sqrt(K)),
            Input((K,), (24,)),
        ),
        flops=_matmul_flops,
        tol=1e-2,  # a compiler may run the matmul in TF32
    ),
    Case(  # GPT-2's MLP projection, batch 8 x 256 tokens
        "mlp_gelu_bf16_2048x768x3072",
        mlp_projection,
        (
            Input((2048, 768), (16, 32), BF16),
            Input((3072, 768), (24, 32), BF16, scale=1 / math.sqrt(768)),
            Input((3072,), (24,), BF16),
        ),
        flops=_linear_flops,
    ),
)

CASE_NAMES = tuple(c.name for c in CASES)


def select(names: list[str] | None) -> list[Case]:
    """The cases named (all when None), in table order; unknown names raise ValueError listing the known."""
    if not names:
        return list(CASES)
    unknown = sorted(set(names) - set(CASE_NAMES))
    if unknown:
        raise ValueError(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(CASE_NAMES)}")
    return [c for c in CASES if c.name in names]


def make_inputs(case: Case, device: str, small: bool, seed_: int = 0) -> tuple[torch.Tensor, ...]:
    """Deterministic normal inputs, made on the device directly (no host round trip for 470 MB)."""
    gen = torch.Generator(device=device).manual_seed(seed_)
    return tuple(
        (
            torch.randn(
                i.small if small else i.full, generator=gen, device=device, dtype=torch.float32
            )
            * i.scale
        ).to(i.dtype)
        for i in case.inputs
    )
