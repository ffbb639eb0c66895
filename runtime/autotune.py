"""Autotuning a launch among its candidates (`mode="max-autotune"`, `to-triton{autotune=true}`).

A tuned launch's binding in the emitted module is

    k_launch = tune("<key>", (bind(k, ...heuristic config...), grid), (bind(k, ...), grid), ...,
                    extents=(...))

one (binding, grid) per candidate, the heuristic's first: block sizes, warps and stages of one
kernel, or another kernel computing the same (a looped kernel for a persistent one). `key` hashes
the candidates' kernel source, configs and grids; `extents` are the storage sizes of the pointer
arguments, in elements.

The loader compiles every candidate in the compile pool and, as soon as all of a launch's
candidates are compiled (while the workers compile others), `Tuned.choose` picks one: the winner
recorded for its key on this device (runtime/cache.py), or else the fastest under the timer, run
on zero-filled buffers of the arguments' sizes (zeros keep every indirect load in bounds) and
then recorded. A candidate that fails (too much shared memory) never wins. Where nothing can be
timed (CPU tensors, Triton's interpreter) the heuristic's candidate is used and nothing is
recorded. The module then holds the winner's launcher, called with the heuristic's grid by
`call` and launching its own: a call costs what it costs without tuning.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from mind.ir.logs import channel
from triton import knobs

from .cache import recall_tuning, remember_tuning
from .gpu_timer import gpu_time
from .interpreter import interpreted_language
from .launch import Binding, Launcher, get_raw_stream, misaligned

log = channel("autotune")

#: milliseconds one run of a function takes
Timer = Callable[[Callable[[], object]], float]
_TIMER: list[Timer] = []


def set_timer(timer: Timer | None) -> None:
    """Time candidates with `timer` (None: the device's own), on any device: tests fake one."""
    _TIMER[:] = [timer] if timer is not None else []


def timer_for(device: torch.device) -> Timer | None:
    """What times runs on `device`: device time on a GPU (runtime/gpu_timer.py), nothing in the
    interpreter or where the GPU is missing (`mind-opt` on a dump of a GPU graph)."""
    if _TIMER:
        return _TIMER[0]
    if device.type == "cuda" and not knobs.runtime.interpret and torch.cuda.is_available():
        return gpu_time
    return None


@dataclass
class Candidate:
    binding: Binding
    grid: tuple[int, int, int]

    def describe(self) -> str:
        options = ", ".join(f"{k}={v}" for k, v in self.binding.options.items())
        return f"{self.binding.name}({options}) grid={self.grid}"


class Tuned:
    """A launch whose candidates the loader tunes (`choose`) before it binds the winner."""

    def __init__(self, key: str, candidates: list[Candidate], extents: tuple[int, ...]):
        self.key, self.candidates, self.extents = key, candidates, extents
        self.choice: int | None = None
        self.launchers: dict[int, Launcher] = {}

    @property
    def bindings(self) -> list[Binding]:
        return [c.binding for c in self.candidates]

    @property
    def device(self) -> torch.device:
        return self.candidates[0].binding.device

    def choose(self) -> int:
        """The winning candidate's position: recorded, measured, or the heuristic's."""
        if self.choice is not None:
            return self.choice
        interpret = knobs.runtime.interpret or self.device.type != "cuda"
        record = recall_tuning(self.key, interpret)
        names = [c.describe() for c in self.candidates]
        if record is not None and record.get("winner") in names:
            self.choice = names.index(record["winner"])
            return self.choice
        timer = timer_for(self.device)
        if timer is None:
            self.choice = 0
            return self.choice
        times = self.measure(timer)
        self.choice = min(range(len(times)), key=times.__getitem__)
        log.info(
            "%s: %s in %.4f ms of %d candidates (the heuristic's %.4f ms)",
            self.candidates[0].binding.name, names[self.choice], times[self.choice],
            len(times), times[0],
        )  # fmt: skip
        if math.isfinite(times[self.choice]):
            ints = [e for e in self.candidates[0].binding.call_signature if isinstance(e, int)]
            record = {"winner": names[self.choice], "candidates": names, "ms": times}
            remember_tuning(self.key, interpret, {**record, "sizes": ints})
        return self.choice

    def measure(self, timer: Timer) -> list[float]:
        """Milliseconds per run of each candidate on zero-filled arguments (inf: it failed)."""
        args = self.arguments()
        stream = get_raw_stream(self.device.index or 0) if self.device.type == "cuda" else None
        times = []
        for i, candidate in enumerate(self.candidates):
            interpreted = candidate.binding.interpreted
            try:
                with interpreted_language() if interpreted else contextlib.nullcontext():
                    run = _runner(self.launcher_of(i), candidate.grid, stream, args)
                    run()  # compiles and loads what is left, and fails before timing if it must
                    times.append(timer(run))
            except Exception:  # a config that cannot run here (shared memory, registers)
                times.append(math.inf)
        return times

    def arguments(self) -> list:
        """Zero-filled buffers of the pointer arguments' sizes, and the scalar arguments."""
        extents = iter(self.extents)
        args = []
        for entry in self.candidates[0].binding.call_signature:
            if isinstance(entry, (int, float)):
                args.append(entry)
            else:
                dtype = entry.dtype if isinstance(entry, misaligned) else entry
                args.append(torch.zeros(next(extents), dtype=dtype, device=self.device))
        return args

    def launcher_of(self, i: int) -> Launcher:
        if i not in self.launchers:
            self.launchers[i] = self.candidates[i].binding.launcher()
        return self.launchers[i]

    def launcher(self) -> Launcher:
        """The winner's launcher, taking (and ignoring) the heuristic's grid."""
        i = self.choose()
        launch = self.launcher_of(i)
        if i == 0:
            return launch
        gx, gy, gz = self.candidates[i].grid

        def tuned(_gx: int, _gy: int, _gz: int, stream: int, *args) -> None:
            launch(gx, gy, gz, stream, *args)

        return tuned


def _runner(launch: Launcher, grid: tuple, stream, args: list) -> Callable[[], None]:
    def run() -> None:
        launch(*grid, stream, *args)

    return run


def tune(key: str, *candidates: tuple, extents: tuple[int, ...] = ()) -> Tuned | Launcher:
    """A launch to tune among `candidates`, (binding, grid) pairs, the heuristic's first. Bound
    outside a loader (no deferred bindings), it is the heuristic's launcher."""
    first = candidates[0][0]
    if not isinstance(first, Binding):
        return first
    return Tuned(key, [Candidate(b, tuple(g)) for b, g in candidates], tuple(extents))
