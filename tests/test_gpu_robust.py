"""On a CUDA GPU: the robustness fixes of the CPU tests, where the GPU path differs (compiled
Triton, not the interpreter). Skipped without CUDA."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from programs import compile_strictly, no_fallback
from torch._dynamo.utils import counters

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
    pytest.mark.usefixtures("isolated_runtime"),
]


@pytest.fixture(autouse=True)
def compiled_for_the_gpu(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)


def rms_norm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w


def layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b)


def silu_halves(x):
    a, b = x.chunk(2, -1)
    return F.silu(a) * b


def first_half(x):
    return x[:, : x.shape[1] // 2] * 2


@pytest.mark.parametrize(
    "fn", [rms_norm, layer_norm, silu_halves, first_half], ids=lambda f: f.__name__
)
def test_dynamic_shapes_compile_once_without_fallback(fn):
    """The issue's H200 failures at the first call under dynamic=True."""
    compiled = torch.compile(fn, backend="mind", dynamic=True)
    arity = {rms_norm: 2, layer_norm: 3}.get(fn, 1)
    with no_fallback():
        for rows, cols in ((8, 64), (33, 130), (5, 4098)):
            x = torch.randn(rows, cols, device="cuda")
            extra = [torch.randn(cols, device="cuda") for _ in range(arity - 1)]
            torch.testing.assert_close(compiled(x, *extra), fn(x, *extra), rtol=1e-4, atol=1e-4)
    assert counters["stats"]["unique_graphs"] == 1


def test_benchmark_patterns_under_dynamic_shapes():
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks.cases import CASES

    for case in CASES:
        torch._dynamo.reset()
        compiled = torch.compile(case.fn, backend="mind", dynamic=True)
        with no_fallback():
            for step in range(3):
                inputs = [
                    (torch.randn([s + 2 * step for s in i.small], device="cuda") * i.scale).to(
                        i.dtype
                    )
                    for i in case.inputs
                ]
                want = case.fn(*inputs)
                torch.testing.assert_close(compiled(*inputs), want, rtol=2e-2, atol=2e-2)


def test_max_reductions_keep_nan():
    x = torch.randn(4, 5000, device="cuda")
    x[1, 4321] = float("nan")
    for fn in (lambda x: x.amax(-1), lambda x: x.amin(-1), lambda x: x[:, :100].amax(-1)):
        torch.testing.assert_close(compile_strictly(fn, x), fn(x), equal_nan=True)


def test_integer_division_by_zero_does_not_assert_on_cuda():
    """CUDA eager returns a number for `// 0`: the CUDA kernel has no divisor assert."""
    a, b = torch.tensor([5, 6], device="cuda"), torch.tensor([0, 2], device="cuda")
    out = compile_strictly(lambda a, b: a // b, a, b)
    assert out[1].item() == 3
