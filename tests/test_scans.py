"""Scans and sorts (cumsum, cumprod, logcumsumexp, cummax, cummin, sort) in mind's own kernels,
end to end against eager (the kernels run in Triton's interpreter): dtypes, dims other than the
last, non-contiguous inputs, empty and one-element dims, rows longer than registers hold (a
looped scan), symbolic sizes; and where Inductor keeps ATen (long sorts, topk), so does mind."""

from __future__ import annotations

import pytest
import torch
from mind.interpreters.loops import evaluate
from mind.passes import run_pipeline
from mind.target.triton import emit
from programs import no_fallback
from torch._dynamo.utils import counters

import mind
from mind.options import PIPELINE

pytestmark = pytest.mark.usefixtures("isolated_runtime")

#: a looped scan on small rows: registers hold rows of 8 at most, blocks of 16 (rows of 37 take
#: three blocks, the last one partly masked)
LOOPED = PIPELINE.replace("to-triton", "to-triton{persistent-max=8 max-r-block=16}")


def scans(x, dim):
    """Every scan of `x` along `dim`: one kernel computes them all."""
    return (
        torch.cumsum(x, dim),
        torch.cumprod(x, dim),
        torch.logcumsumexp(x, dim) if x.is_floating_point() else None,
        torch.cummax(x, dim),
        torch.cummin(x, dim),
    )


def sorts(x, dim):
    return torch.sort(x, dim), torch.sort(x, dim, descending=True), torch.argsort(x, dim)


def leaves(tree) -> list[torch.Tensor]:
    return [t for t in torch.utils._pytree.tree_leaves(tree) if t is not None]


def check(fn, *args, tol=1e-5, reference=None, **compile_kwargs):
    """`fn` compiled by mind (no fallback) gives eager's results (or `reference`'s), dtypes
    and shapes."""
    torch._dynamo.reset()
    with no_fallback():
        got = torch.compile(fn, backend="mind", **compile_kwargs)(*args)
    want = fn(*args) if reference is None else reference
    for g, w in zip(leaves(got), leaves(want), strict=True):
        assert (g.dtype, g.shape) == (w.dtype, w.shape)
        torch.testing.assert_close(g.cpu(), w.cpu(), rtol=tol, atol=tol, equal_nan=True)


def source(fn, *args, pipeline: str = PIPELINE, **capture) -> str:
    """The Python module mind emits for `fn`."""
    aten = mind.capture(fn, *args, stage="aten", **capture)
    return emit(run_pipeline(aten, pipeline))


def sample(shape, dtype) -> torch.Tensor:
    """Values whose products stay finite; NaN and infinities in float rows, ties in integers."""
    gen = torch.Generator().manual_seed(0)
    if dtype == torch.bool:
        return torch.rand(shape, generator=gen) > 0.5
    if not dtype.is_floating_point:
        return torch.randint(-3, 4, shape, generator=gen).to(dtype)
    x = torch.rand(shape, generator=gen) + 0.5
    flat = x.view(-1)
    if flat.numel() > 12:
        flat[5], flat[9], flat[11] = float("nan"), float("inf"), float("-inf")
    return x.to(dtype)


# bf16: eager rounds once at the end, as mind's f32 scan does, but sums in another order: a
# result may be an ulp (2**-7 of it) apart
TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 2e-2, torch.int32: 0, torch.int64: 0}


@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("dtype", list(TOLERANCE), ids=str)
def test_scans_match_eager(dtype, dim):
    check(scans, sample((5, 3, 7), dtype), dim, tol=TOLERANCE[dtype])


def test_scans_of_bools_count_in_i64():
    x = sample((4, 9), torch.bool)
    check(lambda x: (x.cumsum(1), x.cumprod(0), torch.cummax(x, 1), torch.cummin(x, 0)), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_looped_scans_carry_the_fold_from_block_to_block(dtype):
    x = sample((3, 37), dtype)
    check(scans, x, 1, options={"pipeline": LOOPED})
    assert "for r0_offset in range(0, 37, R0_BLOCK):" in source(scans, x, 1, pipeline=LOOPED)


def test_one_kernel_scans_and_normalizes_a_row_in_registers_or_in_blocks():
    def normalized(x):
        c = x.exp().cumsum(1)
        return c / c.sum(1, keepdim=True)

    x = torch.randn(3, 37)
    for pipeline in (PIPELINE, LOOPED):
        check(normalized, x, options={"pipeline": pipeline})
        assert source(normalized, x, pipeline=pipeline).count("@triton.jit") == 1


@pytest.mark.parametrize("pipeline", [PIPELINE, LOOPED], ids=["rows", "blocks"])
def test_a_value_the_same_along_the_row_still_scans(pipeline):
    """The scanned value varies along r only through the scan (a broadcast, a constant)."""

    def fn(y):
        row = y[:, None].expand(3, 37)
        return row.cumsum(1), torch.cummax(row, 1), torch.ones(3, 37).cumsum(1) * y[:, None]

    check(fn, torch.randn(3), options={"pipeline": pipeline})


def test_non_contiguous_inputs():
    x = torch.randn(12, 10)
    check(lambda x: (scans(x.t(), 1), sorts(x[::2, 1::3], 0)), x)


@pytest.mark.parametrize(
    "shape, dim", [((4, 0), 1), ((0, 5), 1), ((4, 1), 1), ((), 0), ((1,), 0)], ids=str
)
def test_empty_and_one_element_dims(shape, dim):
    check(lambda x: (scans(x, dim), sorts(x, dim)), torch.randn(shape))


@pytest.mark.parametrize(
    "fn, kernel",
    [
        (lambda x: (x.cumsum(1), torch.logcumsumexp(x, 1)), "while r0_offset < r0_numel:"),
        (lambda x: torch.cummax(x, 0), "while r0_offset < r0_numel:"),
        (lambda x: sorts(x, 1), "torch.ops.aten.sort.default"),
    ],
    ids=["scans", "cummax_dim0", "sorts"],
)
def test_dynamic_sizes_compile_once(fn, kernel):
    """A symbolic scan runs a looped kernel for any length (here in blocks of 16, so that rows
    of 17 and 40 take several); a symbolic sort stays ATen's."""
    counters.clear()
    torch._dynamo.reset()
    pipeline = PIPELINE.replace("to-triton", "to-triton{max-r-block=16}")
    compiled = torch.compile(fn, backend="mind", dynamic=True, options={"pipeline": pipeline})
    with no_fallback():
        for shape in ((3, 10), (5, 17), (2, 40)):
            x = torch.randn(shape)
            for g, w in zip(leaves(compiled(x)), leaves(fn(x)), strict=True):
                torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    assert counters["stats"]["unique_graphs"] == 1
    assert kernel in source(fn, torch.randn(3, 10), pipeline=pipeline, dynamic=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool], ids=str)
@pytest.mark.parametrize("dim", [0, -1])
def test_sorts_match_eager(dtype, dim):
    """Ties: eager's unstable sort may order them otherwise; mind sorts stably, as eager's
    stable sort does."""
    x = sample((6, 13), dtype)

    def stable(x):
        return torch.sort(x, stable=True, dim=dim), torch.sort(
            x, stable=True, dim=dim, descending=True
        )

    check(stable, x)
    assert "sort_with_index" in source(stable, x)


def test_sort_places_nan_as_eager_does():
    x = torch.tensor([[3.0, float("nan"), -1.0, float("inf"), float("nan"), 0.5, -float("inf")]])
    check(lambda x: sorts(x, 1), x)


def test_long_sorts_and_topk_stay_aten_as_in_inductor():
    x = torch.randn(2, 513)
    for fn in (lambda x: torch.sort(x, 1), lambda x: torch.topk(x, 3)):
        check(fn, x)
        text = source(fn, x)
        assert "@triton.jit" not in text
        assert "torch.ops.aten.sort.default" in text or "torch.ops.aten.topk.default" in text
    assert "sort_with_index" in source(lambda x: torch.sort(x, 1), torch.randn(2, 512))


def test_scan_fuses_with_its_producer_and_consumer():
    def fn(x):
        return (x.sin() * 2).cumsum(1) + 1, torch.cummax(x.cos(), 1)

    x = torch.randn(4, 33)
    check(fn, x)
    assert source(fn, x).count("@triton.jit") == 1


def test_gradients_through_scans_and_sorts():
    """Backward graphs scan too (cumsum's gradient is a reversed cumsum)."""

    def loss(x):
        top = torch.sort(x, 1, descending=True).values[:, :3]
        return (x.cumsum(1) * x).sum() + torch.logcumsumexp(x, 0).sum() + top.sum()

    x = torch.randn(4, 37, requires_grad=True)
    torch._dynamo.reset()
    with no_fallback():
        torch.compile(loss, backend="mind")(x).backward()
    got, x.grad = x.grad, None
    loss(x).backward()
    torch.testing.assert_close(got, x.grad)


def test_loops_evaluator_agrees_with_eager():
    x = sample((5, 3, 7), torch.float32)
    for fn in (lambda x: scans(x, 1), lambda x: sorts(x, 0)):
        aten = mind.capture(fn, x, stage="aten")
        loops = run_pipeline(aten, "lower")
        got = evaluate(loops.ops[0], [x])
        for g, w in zip(got, leaves(fn(x)), strict=True):
            torch.testing.assert_close(g, w, equal_nan=True)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.usefixtures("compiled_for_the_gpu")
@pytest.mark.parametrize("pipeline", [PIPELINE, LOOPED], ids=["rows", "blocks"])
def test_scans_and_sorts_compiled_for_the_gpu(pipeline):
    x = sample((64, 300), torch.float32).cuda()
    check(lambda x: (scans(x, 1), scans(x, 0), sorts(x, 1)), x, options={"pipeline": pipeline})
    # eager CUDA (torch 2.11) sorts a bf16 NaN first and rounds its bf16 cumsum more coarsely:
    # eager on the CPU, which sorts NaN last and sums in f32 as the kernels do, is the reference
    h = sample((8, 300), torch.bfloat16)
    fn = lambda h: (h.cumsum(1), torch.sort(h, dim=1, stable=True))  # noqa: E731
    check(fn, h.cuda(), tol=2e-2, reference=fn(h))
