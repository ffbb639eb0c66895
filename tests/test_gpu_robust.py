"""On a CUDA GPU: the robustness fixes of the CPU tests, where the GPU path differs (compiled
Triton, not the interpreter). Skipped without CUDA."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from mind.passes import run_pipeline
from mind.target.triton import emit
from programs import ON_GPU, compile_strictly, no_fallback
from torch._dynamo.utils import counters

import mind
from mind.options import PIPELINE

pytestmark = [*ON_GPU, pytest.mark.usefixtures("isolated_runtime")]


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


def test_a_gather_compiles_with_debug_in_the_workers_and_the_loader_alike(tmp_path, monkeypatch):
    """An embedding's kernel asserts its index is in bounds (`@triton.jit(debug=True)`): the
    compile workers and the loader's binding compile it with the same options (one cubin per
    kernel in Triton's cache), and it gives eager's answer."""
    from mind.runtime import compile_pool
    from mind.runtime.launch import deferred, target_of

    def fn(i, w, m):
        return (F.embedding(i, w) @ m).relu().sum(-1)

    i = torch.randint(0, 10, (3, 4), device="cuda")
    w, m = torch.randn(10, 16, device="cuda"), torch.randn(16, 16, device="cuda")
    torch.testing.assert_close(compile_strictly(fn, i, w, m), fn(i, w, m))
    source = emit(run_pipeline(mind.capture(fn, i, w, m, stage="aten"), PIPELINE))
    assert "@triton.jit(debug=True)" in source
    path = tmp_path / "module.py"
    path.write_text(source)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.setenv("MIND_COMPILE_WORKERS", "2")
    monkeypatch.setattr(compile_pool, "_POOL", None)
    try:
        with deferred() as bindings:
            compile_pool.exec_source(source, str(path), {"__name__": "module"})
        pool = compile_pool.pool()
        target = target_of(bindings[0].device)
        assert pool.workers[0].ready.wait(120)
        for binding in bindings:  # (a worker compiles from the binding's Spec)
            assert (
                pool.workers[0].compile(("module", source, str(path), binding.spec(), target))
                is not None
            )
        cubins = len(list((tmp_path / "triton").rglob("*.cubin")))
        assert cubins == len(bindings) >= 2
        for binding in bindings:  # found in Triton's cache: the same options, no new cubin
            binding.compile()
        assert len(list((tmp_path / "triton").rglob("*.cubin"))) == cubins
    finally:
        compile_pool._POOL.shutdown()
