"""Where compile time goes on real graphs: a plain-torch transformer stack of 1, 4 and 16 layers,
or the models benchmark's models (`--models`), inference and a training step, each row compiled
in fresh processes: cold (empty caches) and warm (the caches the cold run filled; `--warm-runs`
of them, the median reported). Reports mind's seconds per phase and per pass, per layer (per
model), and the first call of Inductor beside it, with the garbage collection in each.

    python3 -m benchmarks.compile_time [--layers 1,4,16] [--modes infer,train]
        [--backends mind,inductor] [--device cpu|cuda] [--warm-runs N] [--json F] [--md F]
    python3 -m benchmarks.compile_time --models resnet,gpt2 --dtype bf16 --device cuda

On CPU the kernels run in Triton's interpreter and Inductor compiles C++: everything mind does
but Triton's own compile is the same work as on a GPU. Rows run one at a time (`benchmarks.
compile_phases` in a fresh process each); the JSON and Markdown are rewritten after every row.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common import CACHE_DIRS, names_arg, write_outputs
from benchmarks.compile_phases import NOT_COMPILE
from benchmarks.model_row import DTYPES
from benchmarks.zoo import MODELS

ROOT = Path(__file__).resolve().parent.parent
MODES = ("infer", "train")
BACKENDS = ("mind", "inductor")
#: phases outside mind's own work, in table order (the rest are mind's, then its passes)
OUTSIDE = ("dynamo", "aot_autograd")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python3 -m benchmarks.compile_time", description=__doc__.splitlines()[0]
    )
    p.add_argument("--layers", type=lambda s: [int(n) for n in s.split(",")], default=[1, 4, 16])
    p.add_argument(
        "--models", type=names_arg(list(MODELS)), default=None, help="these models, not the stack"
    )
    p.add_argument("--dtype", default="fp32", choices=list(DTYPES), help="the models' dtype")
    p.add_argument("--small", action="store_true", help="the models' tiny configs (CPU)")
    p.add_argument("--modes", type=names_arg(MODES), default=list(MODES))
    p.add_argument("--backends", type=names_arg(BACKENDS), default=["mind"])
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--attention", default="softmax", choices=("softmax", "sdpa"))
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seq", type=int, default=16)
    p.add_argument("--no-warm", action="store_true", help="skip the warm (cache-hit) runs")
    p.add_argument(
        "--warm-runs",
        type=int,
        default=1,
        help="warm processes per row; the one of median CPU time is reported (a shared machine)",
    )
    p.add_argument("--json", default=None)
    p.add_argument("--md", default=None)
    return p.parse_args(argv)


def run_row(spec: dict, caches: str) -> dict:
    """One first call in a fresh process, with its caches in `caches`."""
    env = dict(os.environ, **{var: os.path.join(caches, sub) for var, sub in CACHE_DIRS.items()})
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.compile_phases", json.dumps(spec)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    if proc.returncode != 0:
        return {"spec": spec, "error": proc.stderr[-3000:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def summarize(steps: dict) -> dict:
    """A first call's totals, wall and CPU seconds, the compiled code's own run left out, and its
    phases in CPU seconds (mind's `dynamo` being what no phase covers)."""
    out: dict = {"wall_s": 0.0, "cpu_s": 0.0, "phases": {}}
    phases = out["phases"]
    for step in steps.values():
        own = step.get("phases", {"cpu": {}, "wall": {}})
        for clock in ("wall", "cpu"):
            out[f"{clock}_s"] += step[f"{clock}_s"] - sum(own[clock].get(p, 0) for p in NOT_COMPILE)
        if own["cpu"]:
            phases["dynamo"] = phases.get("dynamo", 0.0) + step["cpu_s"] - sum(own["cpu"].values())
            for name, seconds in own["cpu"].items():
                if name not in NOT_COMPILE:
                    phases[name] = phases.get(name, 0.0) + seconds
    return out


def phase_order(names: set[str]) -> list[str]:
    outside = [p for p in OUTSIDE if p in names]
    passes = sorted(n for n in names if n.startswith("pass:"))
    own = sorted(names - set(outside) - set(passes))
    return outside + own + passes


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def markdown(rows: list[dict], args: argparse.Namespace) -> str:
    done = [r for r in rows if "error" not in r]
    out = [
        f"# Compile time: {'models' if args.models else 'transformer stack'}, {args.device}",
        "",
        (
            f"The models benchmark's models, {args.dtype}{', small' if args.small else ''}"
            if args.models
            else f"width {args.width}, {args.heads} heads, batch {args.batch} x {args.seq} "
            f"tokens, {args.attention} attention"
        )
        + "; `train` is one step, forward and backward. Seconds of the "
        "first call, the compiled code's own run left out (on CPU it runs in Triton's "
        "interpreter), wall and CPU of the compiling process. cold: empty caches; warm: a new "
        "process with the caches the cold run filled. Each process first compiles a throwaway "
        "Linear+GELU (start-up: one-off costs of Dynamo and the backend), then the model"
        + (" (run once eagerly first, as benchmarks.models runs it)." if args.models else "."),
        "",
        "| backend | mode | graph | cold wall s | cold CPU s | CPU s/layer | warm wall s "
        "| warm CPU s | of which GC s | start-up cold / warm s | import torch s "
        "| import backend s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in done:
        if r["run"] != "cold":
            continue
        s, cold = r["spec"], r["summary"]
        warm = median_warm(done, s)
        hot = warm["summary"] if warm else {}
        start = _seconds(r["startup_summary"].get("wall_s")) + " / "
        start += _seconds(warm["startup_summary"]["wall_s"] if warm else None)
        out.append(
            f"| {s['backend']} | {s['mode']} | {_graph(s)} | {cold['wall_s']:.2f} "
            f"| {cold['cpu_s']:.2f} | {cold['cpu_s'] / _layers(s):.3f} "
            f"| {_seconds(hot.get('wall_s'))} | {_seconds(hot.get('cpu_s'))} "
            f"| {_seconds(hot['phases'].get('gc', 0.0) if hot else None)} "
            f"| {start} | {(warm or r)['startup']['import torch']:.2f} "
            f"| {(warm or r)['startup']['import backend']:.2f} |"
        )
    for run in ("cold", "warm"):
        mine = [r for r in done if r["run"] == "cold" and r["spec"]["backend"] == "mind"]
        if run == "warm":
            mine = [w for w in (median_warm(done, r["spec"]) for r in mine) if w is not None]
        if not mine:
            continue
        names = phase_order({n for r in mine for n in r["summary"]["phases"]})
        head = [f"{r['spec']['mode']} {_graph(r['spec'])}" for r in mine]
        out += [
            "",
            f"## mind, {run}: CPU seconds{'' if args.models else ' per layer'} by phase",
            "",
            "dynamo: what no phase covers (Dynamo's tracing and guards; in training also "
            "AOTAutograd's backward bookkeeping). gc: Python's garbage collections while "
            "compiling, taken out of the phase they interrupted. pass:X: the pass itself; "
            "verify: the verifier after each pass; dump: IR printed to keep a reproducer.",
            "",
            "| phase | " + " | ".join(head) + " |",
            "|---|" + "---:|" * len(head),
        ]
        for name in names:
            cells = [r["summary"]["phases"].get(name, 0.0) / _layers(r["spec"]) for r in mine]
            out.append(f"| {name} | " + " | ".join(f"{c:.4f}" for c in cells) + " |")
        totals = [r["summary"]["cpu_s"] / _layers(r["spec"]) for r in mine]
        out.append("| **total** | " + " | ".join(f"**{c:.4f}**" for c in totals) + " |")
    for r in rows:
        if "error" in r:
            out += ["", f"error in {r['spec']}:", "```", r["error"][-1500:], "```"]
    return "\n".join(out) + "\n"


def _graph(spec: dict) -> str:
    """What a row compiled: a model's name, or the stack's layers."""
    return spec.get("model") or f"{spec['layers']} layers"


def _layers(spec: dict) -> int:
    """What a row's seconds are divided by: the stack's layers (1 for a model)."""
    return spec.get("layers", 1)


def specs(args: argparse.Namespace, backend: str, mode: str) -> list[dict]:
    """The rows of one backend and mode: a spec for `benchmarks.compile_phases` each (the
    throwaway it compiles first takes `width` and `batch`)."""
    common = dict(
        backend=backend, mode=mode, device=args.device, width=args.width, heads=args.heads,
        batch=args.batch, seq=args.seq,
    )  # fmt: skip
    if args.models:
        return [dict(common, model=m, dtype=args.dtype, small=args.small) for m in args.models]
    return [dict(common, layers=n, attention=args.attention) for n in args.layers]


def median_warm(rows: list[dict], spec: dict) -> dict | None:
    """Of the warm runs of `spec`, the one of median CPU time (the lower middle of an even
    count)."""
    warm = sorted(
        (r for r in rows if r["run"] == "warm" and r["spec"] == spec),
        key=lambda r: r["summary"]["cpu_s"],
    )
    return warm[(len(warm) - 1) // 2] if warm else None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rows: list[dict] = []
    for backend in args.backends:
        for mode in args.modes:
            for spec in specs(args, backend, mode):
                caches = tempfile.mkdtemp(prefix="mind-ctime-")
                for run in ("cold",) + ("warm",) * (0 if args.no_warm else args.warm_runs):
                    print(f"{backend} {mode} {_graph(spec)}, {run}...", file=sys.stderr)
                    row = run_row(spec, caches)
                    row["run"] = run
                    if "error" not in row:
                        row["summary"] = summarize(row["steps"])
                        row["startup_summary"] = summarize(row["throwaway"])
                    rows.append(row)
                    write_outputs(rows, args, markdown)
    sys.stdout.write(markdown(rows, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
