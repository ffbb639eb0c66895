"""On a CUDA GPU: the same programs compiled by mind match eager with no fallback, including
shapes that take the looped-reduction and 2-D tiled paths. Skipped without CUDA."""

from __future__ import annotations

import pytest
import torch
from programs import (
    ON_GPU,
    PROGRAMS,
    assert_same_step,
    compile_strictly,
    mlp_training_step,
    no_fallback,
)

from benchmarks import cases

pytestmark = ON_GPU


def _flat(out):
    return list(out) if isinstance(out, tuple | list) else [out]


@pytest.mark.parametrize("case", cases.CASES, ids=[c.name for c in cases.CASES])
def test_benchmark_pattern_small(case):
    inputs = cases.make_inputs(case, "cuda", small=True)
    want = case.fn(*inputs)
    tol = case.tol or cases.TOLERANCE[want.dtype]
    torch.testing.assert_close(compile_strictly(case.fn, *inputs), want, rtol=tol, atol=tol)


#: rows longer than a persistent reduction takes, odd sizes, outer reductions, transposes
LARGER = {
    "softmax_looped": (cases.softmax, [(16, 5000)]),
    "layer_norm_looped": (cases.layer_norm, [(8, 3000), (3000,), (3000,)]),
    "column_sum": (cases.column_sum, [(300, 700)]),
    "argmax_looped": (lambda x: x.argmax(-1), [(7, 3333)]),
    "add_transpose": (cases.add_transpose, [(333, 517), (517, 333)]),
    "seed_large": (cases.seed, [(1000, 2048)] * 3),
}


@pytest.mark.parametrize("name", LARGER)
def test_larger_shapes(name):
    fn, shapes = LARGER[name]
    inputs = [torch.randn(s, device="cuda") for s in shapes]
    torch.testing.assert_close(
        _flat(compile_strictly(fn, *inputs)), _flat(fn(*inputs)), rtol=1e-3, atol=1e-3
    )


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program(name):
    fn, make = PROGRAMS[name]
    inputs = [x.cuda() for x in make()]
    torch.testing.assert_close(
        _flat(compile_strictly(fn, *inputs)), _flat(fn(*inputs)), rtol=1e-3, atol=1e-3
    )


def test_mlp_training_step():
    step, model, reference, x, y = mlp_training_step("cuda", batch=32, width=64)
    loss = compile_strictly(step, model, x, y)
    assert_same_step(loss, step, model, reference, x, y, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("name", ["seed_large", "softmax_looped", "column_sum"])
def test_dynamic_sizes(name):
    """Symbolic sizes: one compiled graph serves two shapes (looped reductions loop to a runtime
    bound)."""
    fn, shapes = LARGER[name]
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="mind", dynamic=True)
    with no_fallback():
        for grow in (0, 7):
            inputs = [torch.randn(tuple(d + grow for d in s), device="cuda") for s in shapes]
            torch.testing.assert_close(compiled(*inputs), fn(*inputs), rtol=1e-3, atol=1e-3)


def test_peak_memory_counts_what_a_call_allocates_on_top_of_what_is_held():
    """`benchmarks.measure.memory_mib`, the models table's figures: what the process holds (a
    32 MiB tensor among it) and the 64 MiB a call makes; the allocator reserves at least that,
    and not the cache that earlier work left."""
    from benchmarks.measure import memory_mib

    held = torch.empty(8 << 20, device="cuda")  # 32 MiB
    torch.empty(256 << 20, device="cuda")  # 1 GiB, freed at once: cached, not the call's
    before = torch.cuda.memory_allocated() / 2**20
    peak, reserved = memory_mib(lambda: torch.empty(16 << 20, device="cuda"), "cuda")
    assert peak == pytest.approx(before + 64, abs=1)
    assert peak <= reserved < peak + 512
    assert memory_mib(lambda: held, "cpu") is None
