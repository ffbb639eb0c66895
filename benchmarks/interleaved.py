"""Backends side by side in one process, timed in alternating rounds: the wall time of host-bound
steps, where `benchmarks.models` (a process per row, rows timed minutes apart) is at the mercy
of the machine's other load.

    python3 -m benchmarks.interleaved --models vit,gpt2 --modes infer --backends inductor,mind
    python3 -m benchmarks.interleaved --device cpu --small --models mlp --backends eager,mind

Every backend of a model is compiled and warmed up first; then each round times `--steps` steps
of every backend in turn, the device synchronized around each backend's steps. A model's rows
therefore meet the same host and GPU state, round after round, and a slow spell of the machine
lands on all of them. The median over rounds is the row's ms per step; `vs first` divides it by
the first backend's. It measures time only: `benchmarks.models` checks results, profiles the GPU
and times the first call.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import torch

from benchmarks.common import grid, names_arg, write_rows
from benchmarks.measure import sync
from benchmarks.model_row import (
    BACKENDS,
    DTYPES,
    MODES,
    WARM_UP_CALLS,
    Task,
    compiled,
    device_kind,
    stepper,
)
from benchmarks.zoo import DEFAULT_MODELS, MODELS, make


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python3 -m benchmarks.interleaved", description=__doc__.splitlines()[0]
    )
    p.add_argument("--models", type=names_arg(list(MODELS)), default=list(DEFAULT_MODELS))
    p.add_argument("--dtypes", type=names_arg(list(DTYPES)), default=["bf16"])
    p.add_argument("--modes", type=names_arg(MODES), default=list(MODES))
    p.add_argument(
        "--backends", type=names_arg(list(BACKENDS)), default=["eager", "inductor", "mind"]
    )
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--small", action="store_true", help="tiny configs (for CPU smoke tests)")
    p.add_argument("--rounds", type=int, default=7, help="timing rounds (default 7)")
    p.add_argument("--steps", type=int, default=50, help="steps per backend a round (default 50)")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args(argv)
    if args.rounds < 1 or args.steps < 1:
        p.error("--rounds and --steps must be at least 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA device here (use --device cpu --small)")
    return args


def steps_of(task: Task) -> Callable[[], object]:
    """One warmed-up step of `task`, on a model of its own: the first call, then as many as
    `benchmarks.models` makes before it times (CUDA graphs replay by then)."""
    module, inputs = make(MODELS[task.model], task.small, task.device, DTYPES[task.dtype])
    module.train(task.mode == "train")
    step = stepper(task, module, compiled(module, task.backend), inputs)
    for _ in range(1 + WARM_UP_CALLS[device_kind(task.device)]):
        step()
    return step


def time_rounds(steps: dict[str, Callable], device: str, rounds: int, n: int) -> dict[str, list]:
    """ms per step of each backend in each round, the backends taking turns within a round."""
    times: dict[str, list[float]] = {b: [] for b in steps}
    for _ in range(rounds):
        for backend, step in steps.items():
            sync(device)
            start = time.perf_counter()
            for _ in range(n):
                step()
            sync(device)
            times[backend].append((time.perf_counter() - start) / n * 1e3)
    return times


def rows_of(model: str, dtype: str, mode: str, args: argparse.Namespace) -> list[dict]:
    torch._dynamo.reset()
    tasks = [Task(model, dtype, mode, b, args.device, args.small) for b in args.backends]
    steps = {t.backend: steps_of(t) for t in tasks}
    times = time_rounds(steps, args.device, args.rounds, args.steps)
    medians = {b: statistics.median(ts) for b, ts in times.items()}
    first = medians[args.backends[0]]
    return [
        {
            "model": model,
            "dtype": dtype,
            "mode": mode,
            "backend": b,
            "median_ms": medians[b],
            "min_ms": min(ts),
            "rounds_ms": ts,
            "vs_first": medians[b] / first,
        }  # fmt: skip
        for b, ts in times.items()
    ]


def markdown(rows: list[dict], args: argparse.Namespace) -> str:
    lines = [
        f"{args.rounds} rounds of {args.steps} steps per backend, backends in turn within a round;"
        " ms per step: median over rounds (min)",
        "",
        f"| model | dtype | mode | backend | ms per step | min | vs {args.backends[0]} |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['model']} | {r['dtype']} | {r['mode']} | {r['backend']} | {r['median_ms']:.3f} |"
        f" {r['min_ms']:.3f} | {r['vs_first']:.2f} |"
        for r in rows
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rows: list[dict] = []
    for model, dtype, mode in grid(args):
        rows += rows_of(model, dtype, mode, args)
        print(f"{model} {dtype} {mode}: done", file=sys.stderr, flush=True)
    print(markdown(rows, args))
    write_rows(args.json, args, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
