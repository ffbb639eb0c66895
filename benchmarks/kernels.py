"""Where a step's GPU time goes, kernel by kernel, backends side by side: the profiler's device
events of a few warm steps, per kernel name (calls and µs per step), and by kind of work.

    python3 -m benchmarks.kernels --models resnet --dtypes fp32 --modes train
    python3 -m benchmarks.kernels --models gpt2 --backends inductor,mind,mind-ro --top 30

Every backend of a model is compiled and warmed up in one process (as `benchmarks.interleaved`
does), then profiled for `--steps` steps. Kinds are read off kernel names (`KINDS`, first match):
the generated Triton kernels (Inductor's and mind's, `triton_*`), attention, convolutions (cuDNN),
matmuls (cuBLAS, CUTLASS), copies and fills, and other ATen kernels. `benchmarks.models` gives a
step's total GPU ms; this says which kernels make it, for finding where two backends differ.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict

import torch

from benchmarks.common import grid, names_arg, write_rows
from benchmarks.interleaved import steps_of
from benchmarks.measure import device_events
from benchmarks.model_row import BACKENDS, DTYPES, MODES, Task
from benchmarks.zoo import DEFAULT_MODELS, MODELS

#: kinds of GPU work by kernel name, the first pattern that matches (case-insensitive) wins
KINDS = (
    ("triton", r"^triton_"),
    ("attention", r"flash|fmha|attention|attn"),
    ("convolution", r"conv|cudnn|implicit_convolve|winograd|fprop|dgrad|wgrad"),
    ("matmul", r"gemm|cutlass|nvjet|cublas|xmma|wgmma|splitk"),
    ("copy, fill", r"^memcpy|^memset"),
    ("other aten", r""),
)


def kind_of(name: str) -> str:
    return next(kind for kind, pattern in KINDS if re.search(pattern, name, re.IGNORECASE))


def per_step(events: list[tuple[str, float]], steps: int) -> dict[str, dict[str, float]]:
    """Kernel name -> calls and µs per step, from (name, µs) device events of `steps` steps."""
    table: dict[str, dict[str, float]] = defaultdict(lambda: {"calls": 0.0, "us": 0.0})
    for name, us in events:
        table[name]["calls"] += 1 / steps
        table[name]["us"] += us / steps
    return dict(table)


def by_kind(kernels: dict[str, dict[str, float]]) -> dict[str, float]:
    """µs per step of each kind, in KINDS' order, kinds with no kernel left out."""
    totals: dict[str, float] = defaultdict(float)
    for name, stats in kernels.items():
        totals[kind_of(name)] += stats["us"]
    return {kind: totals[kind] for kind, _ in KINDS if kind in totals}


def row_of(model: str, dtype: str, mode: str, args: argparse.Namespace) -> dict:
    torch._dynamo.reset()
    kernels = {}
    for backend in args.backends:
        step = steps_of(Task(model, dtype, mode, backend, args.device, args.small))
        kernels[backend] = per_step(device_events(step, args.device, args.steps), args.steps)
    return {"model": model, "dtype": dtype, "mode": mode, "kernels": kernels}


def markdown(row: dict, top: int) -> str:
    backends = list(row["kernels"])
    kinds = {b: by_kind(k) for b, k in row["kernels"].items()}
    lines = [f"## {row['model']} {row['dtype']} {row['mode']}: µs per step", ""]
    lines += ["| kind | " + " | ".join(backends) + " |", "|---|" + "---:|" * len(backends)]
    for kind, _ in KINDS:
        if any(kind in k for k in kinds.values()):
            cells = (f"{kinds[b].get(kind, 0.0):.1f}" for b in backends)
            lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    totals = (f"**{sum(kinds[b].values()):.1f}**" for b in backends)
    lines.append("| **all** | " + " | ".join(totals) + " |")
    for backend in backends:
        ranked = sorted(row["kernels"][backend].items(), key=lambda kv: -kv[1]["us"])
        lines += ["", f"### {backend}: the {top} longest kernels", ""]
        lines += ["| kernel | kind | calls | µs |", "|---|---|---:|---:|"]
        lines += [
            f"| `{name[:90]}` | {kind_of(name)} | {s['calls']:.0f} | {s['us']:.1f} |"
            for name, s in ranked[:top]
        ]
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python3 -m benchmarks.kernels", description=__doc__.splitlines()[0]
    )
    p.add_argument("--models", type=names_arg(list(MODELS)), default=list(DEFAULT_MODELS))
    p.add_argument("--dtypes", type=names_arg(list(DTYPES)), default=["bf16"])
    p.add_argument("--modes", type=names_arg(MODES), default=["infer"])
    p.add_argument("--backends", type=names_arg(list(BACKENDS)), default=["inductor", "mind"])
    p.add_argument("--steps", type=int, default=5, help="profiled steps (default 5)")
    p.add_argument("--top", type=int, default=20, help="kernels listed per backend (default 20)")
    p.add_argument("--small", action="store_true", help="tiny configs")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args(argv)
    if args.steps < 1:
        p.error("--steps must be at least 1")
    if not torch.cuda.is_available():
        p.error("no CUDA device here: the profiler sees kernels only on a GPU")
    args.device = "cuda"
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rows = []
    for model, dtype, mode in grid(args):
        rows.append(row_of(model, dtype, mode, args))
        print(markdown(rows[-1], args.top), flush=True)
    write_rows(args.json, args, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
