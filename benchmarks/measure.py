"""Measurements of one callable: median time, kernel launches per call, copy bandwidth, agreement.

Timing on CUDA is `triton.testing.do_bench` with `return_mode="median"`: it flushes L2 (zeroes a
256 MB buffer) before every call and times each call with its own pair of CUDA events, so every
call reads its inputs from HBM as a cold kernel in a real model would. On CPU a wall-clock median.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile
from torch.utils._pytree import tree_leaves

# Device-side profiler events that are copies or fills, not kernel launches.
NOT_KERNELS = ("Memcpy", "Memset")


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def median_ms(fn: Callable[[], object], device: str) -> float:
    """Median milliseconds of one call (after warm-up)."""
    if device.startswith("cuda"):
        from triton.testing import do_bench

        return float(do_bench(fn, warmup=25, rep=100, return_mode="median"))
    return wall_ms(fn, device)


def wall_ms(
    fn: Callable[[], object],
    device: str,
    budget_s: float = 0.05,
    min_reps: int = 1,
    max_reps: int = 10,
) -> float:
    """Median wall milliseconds of one call after one warm-up call, the device synchronized before
    and after each: what a caller waits for one call, host overhead and launch gaps included.
    Takes at least `min_reps` calls, then more while `budget_s` lasts, `max_reps` at most."""
    fn()
    sync(device)
    times: list[float] = []
    deadline = time.perf_counter() + budget_s
    while len(times) < max_reps and (len(times) < min_reps or time.perf_counter() < deadline):
        t0 = time.perf_counter()
        fn()
        sync(device)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def loop_ms(fn: Callable[[], object], device: str, budget_s: float = 0.05) -> float | None:
    """Wall milliseconds per call of back-to-back calls with warm caches: unlike `median_ms` on
    CUDA this includes host overhead (guards, launches), which is what bounds tiny cases.
    None off CUDA, where `median_ms` is wall time already."""
    if not device.startswith("cuda"):
        return None
    fn()
    sync(device)
    calls, start = 0, time.perf_counter()
    while calls < 10 or time.perf_counter() - start < budget_s:
        fn()
        calls += 1
    sync(device)
    return (time.perf_counter() - start) * 1e3 / calls


def kernel_count(fn: Callable[[], object], device: str) -> int | None:
    """CUDA kernels launched by one call, from the profiler's device-side events (None off CUDA)."""
    stats = kernel_stats(fn, device)
    return None if stats is None else stats[0]


def kernel_stats(fn: Callable[[], object], device: str) -> tuple[int, float] | None:
    """(kernels launched, device milliseconds) of one call, from the profiler's device-side events
    (None off CUDA). The milliseconds add up every device event, copies and fills included: the
    time the GPU was busy; the count leaves copies and fills out."""
    if not device.startswith("cuda"):
        return None
    events = device_events(fn, device)
    kernels = sum(1 for name, _ in events if not name.startswith(NOT_KERNELS))
    return kernels, sum(us for _, us in events) / 1e3


def device_events(fn: Callable[[], object], device: str, calls: int = 1) -> list[tuple[str, float]]:
    """(name, µs) of every device event (kernels, copies, fills) the profiler sees in `calls`
    calls of `fn`; none off CUDA."""
    sync(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        sync(device)
    return [
        (e.name, e.time_range.elapsed_us())
        for e in prof.events()
        if e.device_type == DeviceType.CUDA
    ]


def memory_mib(fn: Callable[[], object], device: str) -> tuple[float, float] | None:
    """MiB of device memory at the most during one call, None off CUDA: allocated (torch's
    caching allocator's high-water mark of live tensors: weights, inputs, and what tensors alive
    in CUDA-graph pools hold), and reserved (what the allocator holds from the device: its cache
    and every CUDA-graph pool, whether or not a live tensor counts it). The cache that earlier
    work left (the row's fp64 reference step: a gigabyte of GPT-2's) is let go first, or it would
    be every row's reserved figure."""
    if not device.startswith("cuda"):
        return None
    sync(device)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    fn()
    sync(device)
    allocated = torch.cuda.max_memory_allocated(device) / 2**20
    return allocated, torch.cuda.max_memory_reserved(device) / 2**20


def check_kernel_counter(device: str) -> dict[str, object]:
    """Counts known programs (one `add` is 1 kernel, `add` then `mul` is 2) so a broken profiler shows."""
    if not device.startswith("cuda"):
        return {"ok": None, "note": "kernel counts need CUDA"}
    x = torch.ones(1 << 20, device=device)
    try:
        got = (kernel_count(lambda: x + 1, device), kernel_count(lambda: (x + 1) * 2, device))
    except Exception as e:  # no profiler: the run goes on without kernel counts
        return {"ok": False, "error": f"{type(e).__name__}: {e}"[:500]}
    return {"ok": got == (1, 2), "counted": list(got), "expected": [1, 2]}


def check_graph_kernel_counter(device: str) -> dict[str, object]:
    """Counts the kernels of a replayed CUDA graph of `add` then `mul` (2), so that kernel counts
    and GPU times of CUDA-graph runs (reduce-overhead) are known to be seen by the profiler."""
    if not device.startswith("cuda"):
        return {"ok": None, "note": "kernel counts need CUDA"}
    try:
        x = torch.ones(1 << 20, device=device)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # warm up off the default stream, as capture wants
            (x + 1) * 2
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            (x + 1) * 2
        got = kernel_count(graph.replay, device)
    except Exception as e:  # no graphs or no profiler: the counts of graph runs are unknown
        return {"ok": False, "error": f"{type(e).__name__}: {e}"[:500]}
    return {"ok": got == 2, "counted": got, "expected": 2}


def copy_gbps(device: str, size: int) -> float:
    """Device-to-device copy bandwidth (read + write bytes / time): the roof for memory-bound cases."""
    src = torch.empty(size // 4, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    return 2 * size / (median_ms(lambda: dst.copy_(src), device) * 1e6)


def nbytes(tensors: object) -> int:
    return sum(
        t.numel() * t.element_size() for t in tree_leaves(tensors) if isinstance(t, torch.Tensor)
    )


def max_error(got: torch.Tensor, want: torch.Tensor) -> tuple[float, float]:
    """(max |got - want|, max |want|) of two same-shaped tensors, in float64; the error is nan
    where either has a nan."""
    if not got.numel():
        return 0.0, 0.0
    g64, w64 = got.detach().double(), want.detach().double()
    err = (g64 - w64).abs().max().item()
    return (float("nan") if g64.isnan().any() else err), w64.abs().max().item()


def rms(t: torch.Tensor) -> float:
    """The root mean square of a tensor, in float64 (0 for an empty one)."""
    return t.detach().double().square().mean().sqrt().item() if t.numel() else 0.0


def rms_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """The root mean square of got - want, in float64; nan where either has a nan."""
    return rms(got.detach().double() - want.detach().double())


def compare(got: object, want: object, tol: float) -> tuple[bool, float | None, str]:
    """(ok, max abs error, why not ok) of a compiled result against eager, leaf by leaf."""
    got_l, want_l = tree_leaves(got), tree_leaves(want)
    if len(got_l) != len(want_l):
        return False, None, f"{len(got_l)} outputs, eager has {len(want_l)}"
    worst = 0.0
    for g, w in zip(got_l, want_l):
        if not isinstance(g, torch.Tensor) or g.shape != w.shape or g.dtype != w.dtype:
            what = (type(g).__name__, getattr(g, "shape", None), getattr(g, "dtype", None))
            return False, None, f"got {what}, eager has {tuple(w.shape)} {w.dtype}"
        g64, w64 = g.double(), w.double()
        worst = max(worst, (g64 - w64).abs().max().item() if g.numel() else 0.0)
        if not torch.allclose(g64, w64, rtol=tol, atol=tol, equal_nan=True):
            return False, worst, f"max abs error {worst:.3g} over tolerance {tol:g}"
    return True, worst, ""
