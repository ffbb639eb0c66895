"""Autotuning's GPU timer: the device milliseconds of one run of a function, on a cold L2,
without the host's cost of launching it.

Triton's do_bench records an event, launches the function and records another, run after run.
Where the host takes longer to launch a run than the GPU takes to clear its L2 before it (an ATen
op's launch path through Python and the dispatcher, or a CPU busy with the compile workers, as
while a graph compiles), the GPU waits between the two events and the wait is timed. On the H200,
while BERT compiled, ATen's attention bmm timed 35 to 56 µs in different compiles (26 µs in the
graph; launching it took the host 30-40 µs there), and lost to a template once. Here the runs
are queued behind a GPU sleep long enough for the host to queue them all (Inductor's benchmarker
does the same), so only the device's work between the events counts. Each run first zeroes a
buffer larger than any L2, as do_bench does; the median run is the answer.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

#: bytes zeroed before each run, more than any GPU's L2 (do_bench's size)
FLUSH_BYTES = 256 << 20
#: device milliseconds of runs to time, within a count of runs that the launch queue holds
BUDGET_MS, MIN_RUNS, MAX_RUNS = 40.0, 10, 100
#: the longest the GPU sleeps while the host queues the runs
MAX_SLEEP_MS = 500.0
#: timings tried before the last is taken, each behind a sleep measured by the one before
ATTEMPTS = 3

_CYCLES_PER_MS: dict[int, float] = {}


def gpu_time(fn: Callable[[], object]) -> float:
    """Median device milliseconds of `fn`'s runs on the current CUDA device and stream."""
    device = torch.cuda.current_device()
    # (allocated each time, as do_bench does: kept, it would hold 256 MiB of the program's GPU)
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    fn()  # whatever loads lazily loads now
    torch.cuda.synchronize()
    host_ms, device_ms = _estimate(fn, flush)
    runs = min(MAX_RUNS, max(MIN_RUNS, BUDGET_MS / max(device_ms, 1e-3)))
    # fewer where the host is slow, so that the longest sleep still covers queueing them all
    runs = int(min(runs, max(MIN_RUNS, (MAX_SLEEP_MS - 1.0) / (1.5 * max(host_ms, 1e-3)))))
    sleep_ms = min(MAX_SLEEP_MS, 1.5 * host_ms * runs + 1.0)
    for _ in range(ATTEMPTS):
        times, covered = _queued_runs(fn, flush, runs, sleep_ms, device)
        if covered:
            break
    return statistics.median(times)


def _queued_runs(
    fn: Callable[[], object], flush: torch.Tensor, runs: int, sleep_ms: float, device: int
) -> tuple[list[float], bool]:
    """Device milliseconds of `runs` runs queued behind a GPU sleep, and whether the sleep
    outlasted the queueing (if not, the later runs timed the host's launches too). The sleep
    counts clock cycles, and the clock speeds up under load: an H200 measured idle counted
    314,000 cycles a millisecond and 1,975,000 under load, so its sleeps lasted a sixth of what
    was asked, and from the second run on the host's launches were timed. Each sleep measures
    the clock again for the next."""
    events = [_events() for _ in range(runs)]
    cycles = int(sleep_ms * _cycles_per_ms(device))
    asleep, awake = _events()
    asleep.record()
    torch.cuda._sleep(cycles)
    awake.record()
    for start, end in events:
        flush.zero_()
        start.record()
        fn()
        end.record()
    covered = not awake.query()
    torch.cuda.synchronize()
    _CYCLES_PER_MS[device] = cycles / asleep.elapsed_time(awake)
    return [start.elapsed_time(end) for start, end in events], covered


def _estimate(fn: Callable[[], object], flush: torch.Tensor, runs: int = 5) -> tuple[float, float]:
    """Host and device milliseconds per run, a flush included, over a few runs."""
    start, end = _events()
    began = time.perf_counter()
    start.record()
    for _ in range(runs):
        flush.zero_()
        fn()
    end.record()
    host_ms = (time.perf_counter() - began) * 1000 / runs
    end.synchronize()
    return host_ms, start.elapsed_time(end) / runs


def _cycles_per_ms(device: int) -> float:
    """The device's clock, as `torch.cuda._sleep` counts it, measured once."""
    if device not in _CYCLES_PER_MS:
        cycles = 10_000_000
        start, end = _events()
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        _CYCLES_PER_MS[device] = cycles / start.elapsed_time(end)
    return _CYCLES_PER_MS[device]


def _events() -> tuple[torch.cuda.Event, torch.cuda.Event]:
    return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
