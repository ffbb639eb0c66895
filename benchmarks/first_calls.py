"""First calls of the models, mind against Inductor, cold and warm, on one host.

Each row (model, mode, backend) runs in processes of its own and times its first call as
`benchmarks.models` times its "first call s" column: a throwaway Linear compiled and run first
(imports, compile workers), one eager step of the model, then `torch.compile` and the first call,
synchronized (a training call is one step: forward, loss, backward). Cold: empty on-disk caches
(Inductor's, Triton's, mind's); warm: a second process on the caches the cold one filled, the
same graph compiled again in a new process. Within a round the backends take turns, in an order
reversed every round, and before the first round a throwaway process per backend compiles the
Python sources both import to bytecode (on a freshly started host that takes seconds, and
whichever ran first would pay for both). A row reports the median over rounds, and a pair
mind / Inductor: first calls move by 2x between hosts, so only a ratio from one run compares.
With `--start-up` there is no throwaway Linear: the first call also pays the process's start-up
(the backend's imports, its compile workers, Triton's and AOTAutograd's one-off costs), as a
user's first call does.

    python3 -m benchmarks.first_calls [--models resnet,gpt2] [--modes infer,train]
        [--dtype bf16] [--backends mind,inductor] [--rounds 2] [--no-warm] [--start-up]
        [--json F] [--md F]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import CACHE_DIRS, names_arg, write_outputs

ROOT = Path(__file__).resolve().parent.parent
BACKENDS = ("mind", "inductor")
MODES = ("infer", "train")
RUNS = ("cold", "warm")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from benchmarks.zoo import MODELS

    p = argparse.ArgumentParser(
        prog="python3 -m benchmarks.first_calls", description=__doc__.splitlines()[0]
    )
    p.add_argument("--models", type=names_arg(list(MODELS)), default=list(MODELS))
    p.add_argument("--modes", type=names_arg(MODES), default=list(MODES))
    p.add_argument("--dtype", default="bf16", choices=("bf16", "fp32"))
    p.add_argument("--backends", type=names_arg(BACKENDS), default=list(BACKENDS))
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--small", action="store_true", help="tiny configs (for CPU smoke tests)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--no-warm", action="store_true", help="cold first calls only")
    p.add_argument(
        "--start-up", action="store_true", help="no throwaway compile first: start-up included"
    )
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per process")
    p.add_argument("--json", default=None)
    p.add_argument("--md", default=None)
    p.add_argument("--row", default=None, help=argparse.SUPPRESS)  # a child process's row
    return p.parse_args(argv)


def first_call(spec: dict) -> dict:
    """The row's first call, timed in this process (a child's): seconds, and under mind the
    kernels compiled in this process and by its workers (none where its caches held them)."""
    import torch

    from benchmarks.measure import sync
    from benchmarks.model_row import (
        DTYPES,
        Task,
        compiled,
        compiled_since,
        snapshot,
        stepper,
        warm_up,
    )
    from benchmarks.zoo import MODELS, make

    task = Task(*(spec[k] for k in ("model", "dtype", "mode", "backend", "device", "small")))
    if not spec.get("start_up"):
        warm_up(task)
    module, inputs = make(MODELS[task.model], task.small, task.device, DTYPES[task.dtype])
    module.train(task.mode == "train")
    snapshot(module, stepper(task, module, module, inputs))
    sync(task.device)
    torch._dynamo.reset()
    before = dict(torch._dynamo.utils.counters["mind_compile"])
    start = time.perf_counter()
    snapshot(module, stepper(task, module, compiled(module, task.backend), inputs))
    sync(task.device)
    seconds = time.perf_counter() - start
    return {
        "first_s": seconds,
        **({"compiles": compiled_since(before)} if task.backend == "mind" else {}),
    }


def run_child(spec: dict, caches: str, timeout: float) -> dict:
    """`first_call(spec)` in a fresh process whose caches are under `caches`."""
    env = dict(os.environ, **{var: os.path.join(caches, sub) for var, sub in CACHE_DIRS.items()})
    argv = [sys.executable, "-m", "benchmarks.first_calls", "--row", json.dumps(spec)]
    try:
        proc = subprocess.run(
            argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"error": f"no first call in {timeout:.0f} s"}
    if proc.returncode != 0:
        return {"error": proc.stderr.strip()[-2000:] or f"exit status {proc.returncode}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.row is not None:
        print(json.dumps(first_call(json.loads(args.row))))
        return 0
    pairs = [(m, mode) for mode in args.modes for m in args.models]
    base = {"dtype": args.dtype, "device": args.device, "small": args.small}
    base["start_up"] = args.start_up
    for backend in args.backends:  # bytecode for both, before anything is timed
        model, mode = pairs[0]
        spec = {**base, "model": model, "mode": mode, "backend": backend}
        run_child(spec, tempfile.mkdtemp(prefix="mind-first-"), args.timeout)
    rows: list[dict] = []
    for round_ in range(args.rounds):
        order = args.backends if round_ % 2 == 0 else args.backends[::-1]
        for model, mode in pairs:
            for backend in order:
                spec = {**base, "model": model, "mode": mode, "backend": backend}
                caches = tempfile.mkdtemp(prefix="mind-first-")
                for run in RUNS[: 1 if args.no_warm else 2]:
                    print(f"round {round_}: {model} {mode} {backend} {run}...", file=sys.stderr)
                    row = {**spec, "round": round_, "run": run}
                    rows.append({**row, **run_child(spec, caches, args.timeout)})
                    write_outputs(rows, args, markdown)
    sys.stdout.write(markdown(rows, args))
    return 0


def median_s(rows: list[dict], model: str, mode: str, backend: str, run: str) -> float | None:
    times = [
        r["first_s"]
        for r in rows
        if (r["model"], r["mode"], r["backend"], r["run"]) == (model, mode, backend, run)
        and "first_s" in r
    ]
    return statistics.median(times) if times else None


def _cell(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f}"


def markdown(rows: list[dict], args: argparse.Namespace) -> str:
    """Per model and mode, each backend's median cold (and warm) first call over the rounds,
    and mind / Inductor where both ran."""
    runs = RUNS[: 1 if args.no_warm else 2]
    head = ["model", "mode"]
    for run in runs:
        head += [f"{b} {run} s" for b in args.backends]
        if len(args.backends) == 2:
            head.append(f"{run}: mind / inductor")
    included = ", start-up included" if args.start_up else ""
    out = [
        f"# First calls, {args.dtype}{included}: each the median of the rounds it ran"
        f" (of {args.rounds})",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for mode in args.modes:
        for model in args.models:
            cells = [model, mode]
            for run in runs:
                times = [median_s(rows, model, mode, b, run) for b in args.backends]
                cells += [_cell(t) for t in times]
                if len(times) == 2:
                    both = None not in times and times[1] > 0
                    cells.append(f"{times[0] / times[1]:.2f}" if both else "-")
            out.append("| " + " | ".join(cells) + " |")
    for r in rows:
        if "error" in r:
            where = f"{r['model']} {r['mode']} {r['backend']} {r['run']}, round {r['round']}"
            out += ["", f"error in {where}:", "```", r["error"][-1500:], "```"]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())
