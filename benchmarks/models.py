"""Models under eager, Inductor and mind (default and reduce-overhead), fp32 and bf16, inference
and one training step: wall, GPU and host ms, kernels, peak memory, first-call s, error against
eager, speedup.

    python3 -m benchmarks.models [--models gpt2,bert] [--dtypes bf16] [--modes infer,train]
        [--backends eager,mind] [--jobs N] [--json F] [--md F] [--png F]
    python3 -m benchmarks.models --device cpu --small --models mlp --backends eager,mind
    python3 -m benchmarks.models --from-json F [F ...] [--md F] [--png F]   # render runs again

Every row runs in a fresh process (`workers.py`): an error, hang or crash ends that row only.
Progress goes to stderr, the Markdown to stdout; the JSON and Markdown files are rewritten after
every row, so a run cut short keeps what it finished.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from importlib import metadata
from pathlib import Path

import torch

from benchmarks import model_report, plot, workers
from benchmarks.common import fresh_caches, grid, names_arg
from benchmarks.measure import check_graph_kernel_counter, check_kernel_counter
from benchmarks.model_row import (
    BACKENDS,
    DEFAULT_BACKENDS,
    DTYPES,
    FLOOR,
    FLOOR_SHARE,
    MODES,
    MULTIPLIER,
    TIMING,
    WARM_UP_CALLS,
    Task,
    run,
)
from benchmarks.zoo import DEFAULT_MODELS, MODELS

PACKAGES = ("torch", "triton", "transformers", "timm", "torchvision")
NOTES = (
    "wall ms: median over many calls of one call's wall time, the device synchronized before and"
    " after each call (at least {min_reps} calls, more while {budget_s} s last), after warm-up."
    " A training call is one step: gradients set to None, forward, loss = mean(out.float() * W)"
    " with W a fixed random tensor of the output's shape, backward. The loss is eager code"
    " outside the compiled model, as in a training loop. (Not mean(out**2): of an output that"
    " ends in a LayerNorm or RMSNorm, as GPT-2's, BERT's and Llama's do, that is constant up to"
    " the norm's eps, and every gradient upstream of the norm would be rounding noise.)",
    "GPU ms: the device time of one call, summed over the profiler's device events (kernels,"
    " copies, fills). kernels: the profiler's device events of one call that are kernels."
    " host ms: wall ms - GPU ms, the part of a call the GPU spends waiting for the host (Python,"
    " guards, launches, gaps between kernels). The profiler's own CPU times are not used: the"
    " profiler slows the host down, and it sees none of a CUDA graph's launches.",
    "peak MiB: the device memory allocated at the most during one call, as torch's caching"
    " allocator counts it (torch.cuda.max_memory_allocated): the weights, inputs, gradients and"
    " CUDA-graph pools the row's process holds, and what the call allocates on top. A pool counts"
    " where live tensors hold it: Inductor's cudagraph trees rebuild their outputs from data"
    " pointers, so none of theirs counts.",
    "reserved MiB: the device memory torch's caching allocator holds at the most during one call"
    " (torch.cuda.max_memory_reserved), its cache emptied before the call: the call's cache and"
    " every CUDA-graph pool, whoever holds it.",
    "first call s: from torch.compile to the synchronized end of the first call (a training step:"
    " forward and backward compile), after torch._dynamo.reset(), with empty on-disk caches of"
    " its own (Inductor, Triton, mind), in a process that compiled a throwaway Linear first so"
    " that one-off start-up is not counted. With --jobs > 1 other rows compile at the same time.",
    "kernels compiled here: of the kernels mind compiled during the first call, those the loading"
    " process compiled itself, the others by its compile workers (a worker not ready yet leaves"
    " its share to the loader).",
    "out err: max |compiled - eager| / max |eager| of the output; grad err: the same over all"
    " parameter gradients together, relative to the largest eager gradient; the JSON has absolute"
    " errors and the worst gradient's name. Reported, not judged: eager's own errors are of that"
    " size in bf16 (see check).",
    "check: the reference is the same step run once more in fp64 on the same device, with the"
    " same weights and inputs (the model's dtype's values, exactly). Per tensor (the output, each"
    " parameter gradient): ratio = RMS(compiled - fp64) / (RMS(eager - fp64) + floor), floor ="
    " {floor:g} x the dtype's epsilon x max(the tensor's fp64 RMS, {share:g} x the largest fp64"
    " RMS among the tensors of its kind). out ratio, grad ratio: the largest ratio of the output,"
    " and among the gradients (the JSON names that tensor, with both RMS errors and the floor)."
    " check ok: both at most {mult:g}, that is, the compiled step is at most {mult:g} times as far"
    " from the fp64 result as eager's own step is, plus the floor (Inductor's accuracy check,"
    " torch._dynamo.utils.same with an fp64 reference, compares RMS errors the same way). The"
    " first call and a call after {warm_up} more (CUDA-graph replays by then) are both checked,"
    " the worse counts. reference_s in the JSON: the reference step's seconds. (fallback): mind"
    " ran some graph eagerly; the row's numbers are partly eager's.",
    "speedup: eager wall ms / the row's wall ms, eager from the same model, dtype and mode.",
    "Every row runs in its own process; with --jobs N, N rows build, compile, warm up and check"
    " side by side, and one at a time times and profiles, with no other row's work running.",
)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python3 -m benchmarks.models", description=__doc__.splitlines()[0]
    )
    p.add_argument("--models", type=names_arg(list(MODELS)), default=list(DEFAULT_MODELS))
    p.add_argument("--dtypes", type=names_arg(list(DTYPES)), default=list(DTYPES))
    p.add_argument("--modes", type=names_arg(MODES), default=list(MODES))
    p.add_argument("--backends", type=names_arg(list(BACKENDS)), default=DEFAULT_BACKENDS)
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--small", action="store_true", help="tiny configs (for CPU smoke tests)")
    p.add_argument(
        "--jobs", type=int, default=1,
        help="rows compiling at once, each in its own process (default 1); 0: every row in"
        " this process, one after another, no time limit (for debugging)",
    )  # fmt: skip
    p.add_argument("--timeout", type=float, default=300.0, help="seconds of work per row")
    p.add_argument("--deadline", type=float, help="seconds for the whole run; then stop")
    p.add_argument("--json", help="write the rows and settings here")
    p.add_argument("--md", help="write the Markdown here (it also goes to stdout)")
    p.add_argument("--png", help="plot the speedups here (needs matplotlib)")
    p.add_argument(
        "--from-json", nargs="+", metavar="JSON",
        help="render these earlier runs (their rows together) instead of running",
    )  # fmt: skip
    args = p.parse_args(argv)
    if args.jobs < 0:
        p.error("--jobs must be 0 or more")
    if not args.from_json and args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA device here (use --device cpu --small)")
    return args


def tasks(args: argparse.Namespace) -> list[Task]:
    """Inference before training and one dtype at a time, so that a run cut short has the most
    comparable rows; within a model, eager first (the others' baseline)."""
    return [
        Task(model, dtype, mode, backend, args.device, args.small)
        for model, dtype, mode in grid(args)
        for backend in args.backends
    ]


def _version(package: str) -> str:
    """The installed version, without importing it (Triton may be installed as pytorch-triton)."""
    for name in (package, f"pytorch-{package}"):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return "absent"


def settings(args: argparse.Namespace) -> dict[str, object]:
    """What the report says about the run: device, versions, models and their sizes, lists."""
    timing = TIMING[args.device]
    checks = {
        "kernel counter": check_kernel_counter(args.device),
        "CUDA-graph kernel counter": check_graph_kernel_counter(args.device),
    }
    return {
        "device_name": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
        "versions": {p: _version(p) for p in PACKAGES},
        "sizes": {
            m: {"what": MODELS[m].what, "size": MODELS[m].size(args.small)} for m in args.models
        },
        **{f"{f}s": getattr(args, f"{f}s") for f in model_report.FIELDS},
        "small": args.small,
        "jobs": args.jobs,
        "timeout_s": args.timeout,
        "counter_checks": checks,
        "warnings": [
            f"{name} self-check failed ({c}): kernel counts and GPU ms are suspect"
            for name, c in checks.items()
            if c.get("ok") is False
        ],
        "notes": [
            n.format(
                **timing,
                warm_up=WARM_UP_CALLS[args.device],
                mult=MULTIPLIER,
                floor=FLOOR,
                share=FLOOR_SHARE,
            )
            for n in NOTES
        ],
    }


def progress(started: float, done: int, total: int, row: dict[str, object]) -> None:
    what = " ".join(str(row[f]) for f in model_report.FIELDS)
    if row.get("error"):
        result = f"ERR {row['error']}"
    else:
        result = f"wall {row.get('wall_ms', 0):.3f} ms"
        if row.get("first_s") is not None:
            result += f", first call {row['first_s']:.1f} s, {model_report.check_text(row)}"
    print(
        f"[{time.perf_counter() - started:6.1f}s] {done}/{total} {what}: {result}", file=sys.stderr
    )


def write(args: argparse.Namespace, rows: list[dict], meta: dict, final: bool) -> None:
    if args.json:
        model_report.write_json(args.json, rows, meta)
    if args.md:
        Path(args.md).write_text(model_report.markdown(rows, meta))
    if final and args.png:
        plot.save_or_say(args.png, model_report.chart(rows, meta))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.from_json:
        rows, meta = model_report.read_json(args.from_json)
    else:
        rows, meta = run_all(args)
    write(args, rows, meta, final=True)
    print(model_report.markdown(rows, meta))
    return 0


def run_all(args: argparse.Namespace) -> tuple[list[dict], dict]:
    started = time.perf_counter()
    meta = settings(args)
    todo = tasks(args)
    rows: list[dict] = []

    def done(row: dict) -> None:
        rows.append(row)
        progress(started, len(rows), len(todo), row)
        write(args, rows, meta, final=False)

    print(f"{len(todo)} rows, --jobs {args.jobs}", file=sys.stderr)
    if args.jobs == 0:
        fresh_caches()
        for task in todo:
            done(run(task))
    else:
        # both compilers' compile workers, per row: the cores shared among the rows at once
        threads = str(max(1, len(os.sched_getaffinity(0)) // args.jobs))
        meta["compile_threads"] = os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", threads)
        meta["mind_compile_workers"] = os.environ.setdefault("MIND_COMPILE_WORKERS", threads)
        deadline = None if args.deadline is None else time.monotonic() + args.deadline
        workers.run_rows(todo, args.jobs, args.timeout, deadline, done)
    meta["total_s"] = time.perf_counter() - started
    return rows, meta


if __name__ == "__main__":
    sys.exit(main())
