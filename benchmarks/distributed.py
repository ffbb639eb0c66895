"""Distributed training of a GPT-style model under eager, Inductor and mind: the step time of
each strategy (benchmarks/parallel.py: DDP, DDP under compiled autograd, FSDP2, SimpleFSDP) and
how much of its communication overlaps compute. One process per GPU, started by torchrun:

    torchrun --nproc-per-node 2 -m benchmarks.distributed [--strategies ddp,fsdp2]
        [--backends eager,inductor,mind] [--size small] [--batch 8] [--steps 20]
        [--json F] [--md F]
    torchrun --nproc-per-node 2 -m benchmarks.distributed --device cpu --size tiny --steps 1 \\
        --warm-up 0 --backends eager,mind        # CPU smoke run on gloo

NCCL on CUDA (each rank on GPU LOCAL_RANK), gloo on CPU. Every (strategy, backend) cell builds
the model from the same seed, takes one SGD step to compile (the first-step time), a few to
warm up, then times `--steps` steps (device synchronized around each; the median, and the slowest
rank's). One more step runs under the profiler: communication is the device time of NCCL
kernels, compute the device time of every other kernel; overlap is the time both run at once
over the communication time, and exposed communication the rest. The check compares the first
step's loss with eager's. A cell that raises is recorded and the run goes on. Rank 0 prints the
Markdown table and writes the JSON (and Markdown) files.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
import traceback
from datetime import timedelta
from pathlib import Path

if __package__ in (None, ""):  # run as `torchrun benchmarks/distributed.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
import torch.distributed as dist

from benchmarks import parallel
from benchmarks.common import catch_fallbacks, describe, fresh_caches, names_arg
from benchmarks.gpt import GPT, TINY, GPTConfig, batch
from benchmarks.measure import sync

BACKENDS = ("eager", "inductor", "mind")
SIZES = {
    "tiny": TINY,
    "small": GPTConfig(vocab=8192, seq=512, dim=768, heads=12, layers=6),
    "gpt2": GPTConfig(vocab=50304, seq=1024, dim=768, heads=12, layers=12),
}
#: the first step's loss against eager's (relative): both run the same ops in float32
TOLERANCE = 1e-3

Interval = tuple[float, float]


def union(intervals: list[Interval]) -> list[Interval]:
    """The same time as disjoint sorted intervals."""
    merged: list[Interval] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def length(intervals: list[Interval]) -> float:
    return sum(end - start for start, end in union(intervals))


def overlap(comm: list[Interval], compute: list[Interval]) -> float:
    """How long communication and compute run at the same time."""
    a, b = union(comm), union(compute)
    total, j = 0.0, 0
    for start, end in a:
        while j < len(b) and b[j][1] <= start:
            j += 1
        k = j
        while k < len(b) and b[k][0] < end:
            total += min(end, b[k][1]) - max(start, b[k][0])
            k += 1
    return total


def is_communication(kernel: str) -> bool:
    return "nccl" in kernel.lower()


def profile_overlap(step, device: str) -> dict[str, float | None]:
    """Communication ms, the part of it that compute hides (overlap), and the exposed ms, from the
    device kernels of one step (None off CUDA: gloo's work is not kernels)."""
    if not device.startswith("cuda"):
        return {"comm_ms": None, "overlap": None, "exposed_comm_ms": None}
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    sync(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        sync(device)
    comm, compute = [], []
    for e in prof.events():
        if e.device_type == DeviceType.CUDA and not e.name.startswith("Memset"):
            span = (e.time_range.start / 1e3, e.time_range.end / 1e3)
            (comm if is_communication(e.name) else compute).append(span)
    comm_ms = length(comm)
    hidden = overlap(comm, compute)
    return {
        "comm_ms": comm_ms,
        "overlap": hidden / comm_ms if comm_ms else None,
        "exposed_comm_ms": comm_ms - hidden,
    }


def slowest(value: float, device: str) -> float:
    """The largest `value` over the ranks."""
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def run_cell(name: str, backend: str, args, device: str, mesh) -> dict:
    """Compile, check and time one strategy under one backend on every rank."""
    strategy = parallel.STRATEGIES[name]
    config = SIZES[args.size]
    torch._dynamo.reset()
    fallbacks: list[str] = []
    with parallel.dynamo_config(strategy), catch_fallbacks(fallbacks):
        torch.manual_seed(0)
        module = strategy.wrap(GPT(config).to(device), mesh)
        step = parallel.training_step(strategy, module, backend)
        optimizer = torch.optim.SGD(module.parameters(), lr=1e-3)
        data = batch(config, args.batch, seed=dist.get_rank(), device=device)

        def train() -> torch.Tensor:
            optimizer.zero_grad(set_to_none=True)
            loss = step(*data)
            optimizer.step()
            return loss

        start = time.perf_counter()
        loss = float(train())
        first = time.perf_counter() - start
        for _ in range(args.warm_up):
            train()
        times = []
        for _ in range(args.steps):
            sync(device)
            start = time.perf_counter()
            train()
            sync(device)
            times.append((time.perf_counter() - start) * 1e3)
        cell = {
            "loss": loss,
            "first_step_s": slowest(first, device),
            "step_ms": slowest(statistics.median(times), device),
            **profile_overlap(train, device),
        }
    if device.startswith("cuda"):
        cell["peak_gb"] = torch.cuda.max_memory_allocated() / 2**30
        torch.cuda.reset_peak_memory_stats()
    cell["fallbacks"] = fallbacks
    return cell


def run(args, device: str) -> list[dict]:
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(device.split(":")[0], (dist.get_world_size(),))
    rows = []
    for name in args.strategies:
        eager_loss = None
        for backend in args.backends:
            row: dict = {"strategy": name, "backend": backend}
            try:
                row |= run_cell(name, backend, args, device, mesh)
            except Exception as e:  # the backends are unfinished: the run goes on
                row |= {"error": describe(e), "traceback": traceback.format_exc()}
            failed = torch.tensor([float("error" in row)], device=device)
            dist.all_reduce(failed, op=dist.ReduceOp.MAX)  # every rank skips the check alike
            if failed.item() and "error" not in row:
                row["error"] = "another rank failed"
            if backend == "eager" and "error" not in row:
                eager_loss = row["loss"]
            if eager_loss is not None and "loss" in row:
                row["ok"] = abs(row["loss"] - eager_loss) <= TOLERANCE * max(1.0, abs(eager_loss))
            rows.append(row)
            gc.collect()
            if device.startswith("cuda"):
                torch.cuda.empty_cache()
            if dist.get_rank() == 0:
                print(f"{name} {backend}: {_summary(row)}", file=sys.stderr, flush=True)
    return rows


def _summary(row: dict) -> str:
    if "error" in row:
        return f"ERR {row['error']}"
    return f"{row['step_ms']:.2f} ms/step, first step {row['first_step_s']:.1f} s"


def _num(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


COLUMNS = (
    ("step ms", lambda r, e: _num(r.get("step_ms"), ".2f")),
    ("× eager", lambda r, e: _num(e and r.get("step_ms") and r["step_ms"] / e, ".2f")),
    ("overlap", lambda r, e: _num(r.get("overlap"), ".0%")),
    ("comm ms", lambda r, e: _num(r.get("comm_ms"), ".2f")),
    ("exposed comm ms", lambda r, e: _num(r.get("exposed_comm_ms"), ".2f")),
    ("first step s", lambda r, e: _num(r.get("first_step_s"), ".1f")),
    ("peak GB", lambda r, e: _num(r.get("peak_gb"), ".2f")),
    (
        "check",
        lambda r, e: "ERR" if "error" in r else {True: "ok", False: "FAIL"}.get(r.get("ok"), "-"),
    ),
)


def markdown(rows: list[dict], meta: dict) -> str:
    eager = {r["strategy"]: r.get("step_ms") for r in rows if r["backend"] == "eager"}
    heads = ["strategy", "backend", *(h for h, _ in COLUMNS)]
    lines = [
        f"{meta['world_size']} × {meta['device_name']} | model {meta['size']} "
        f"({meta['parameters']:,} parameters), batch {meta['batch']} per rank"
        f" | {meta['steps']} timed steps",
        "",
        "| " + " | ".join(heads) + " |",
        "|" + "|".join("---" for _ in heads) + "|",
    ]
    for r in rows:
        cells = [r["strategy"], r["backend"], *(f(r, eager.get(r["strategy"])) for _, f in COLUMNS)]
        lines.append("| " + " | ".join(cells) + " |")
    notes = [f"- {r['strategy']} {r['backend']}: {r['error']}" for r in rows if "error" in r]
    notes += [
        f"- {r['strategy']} {r['backend']} ran partly eagerly: {'; '.join(r['fallbacks'])}"
        for r in rows
        if r.get("fallbacks")
    ]
    return "\n".join(lines + ([""] + notes if notes else []))


def _meta(args, device: str) -> dict:
    import triton

    cuda = device.startswith("cuda")
    return {
        "world_size": dist.get_world_size(),
        "device_name": torch.cuda.get_device_name() if cuda else "CPU",
        "backend": dist.get_backend(),
        "size": args.size,
        "config": vars(SIZES[args.size]),
        "parameters": sum(p.numel() for p in GPT(SIZES[args.size]).parameters()),
        "batch": args.batch,
        "steps": args.steps,
        "torch": torch.__version__,
        "triton": triton.__version__,
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="benchmarks.distributed", description=__doc__.split("\n")[0])
    p.add_argument("--strategies", type=names_arg(list(parallel.STRATEGIES)),
                   default=list(parallel.STRATEGIES))  # fmt: skip
    p.add_argument("--backends", type=names_arg(BACKENDS), default=list(BACKENDS))
    p.add_argument("--size", choices=list(SIZES), default="small")
    p.add_argument("--batch", type=int, default=8, help="sequences per rank")
    p.add_argument("--steps", type=int, default=20, help="timed steps")
    p.add_argument("--warm-up", type=int, default=2, help="untimed steps after the first")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--json", help="write every number here (rank 0)")
    p.add_argument("--md", help="write the table here too (rank 0)")
    p.add_argument(
        "--caches", help="compile caches under DIR/rank<N> (default: a new temporary folder)"
    )
    args = p.parse_args(argv)
    if "eager" in args.backends:  # eager first: it is what the others are checked against
        args.backends = ["eager", *(b for b in args.backends if b != "eager")]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rank = os.environ.get("RANK", "0")
    fresh_caches(os.path.join(args.caches, f"rank{rank}") if args.caches else None)
    cuda = args.device == "cuda"
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = f"cuda:{local}" if cuda else "cpu"
    if cuda:
        torch.cuda.set_device(local)
    dist.init_process_group("nccl" if cuda else "gloo", timeout=timedelta(minutes=10))
    try:
        rows = run(args, device)
        if dist.get_rank() == 0:
            meta = _meta(args, device)
            table = markdown(rows, meta)
            print(table)
            if args.json:
                Path(args.json).write_text(
                    json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n"
                )
            if args.md:
                Path(args.md).write_text(table + "\n")
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
