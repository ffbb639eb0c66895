"""mind under several code generation settings, side by side with Inductor, on the micro cases:
which heuristics to make the default is measured here, on the GPU.

    python3 -m benchmarks.sweep [--cases NAME,...] [--variants NAME,...] [--json out.json]

Each variant is a pipeline (`MIND_PIPELINE`) run in its own `benchmarks.run` process (fresh
caches); Inductor runs once. The table gives each variant's ms and its ratio to Inductor's.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as `python3 benchmarks/sweep.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.cases import CASE_NAMES
from benchmarks.common import names_arg
from mind.options import PIPELINE


def _to_triton(options: str) -> str:
    return PIPELINE.replace("to-triton", f"to-triton{{{options}}}")


#: name -> pipeline: the heuristics Inductor's configs suggest for the issue's gaps (its looped
#: reductions take 16 warps up to 8192-wide blocks; it keeps rows of 4096 looped, which mind can
#: hold in registers), and what the Welford rewrite and split reductions change
VARIANTS = {
    "default": PIPELINE,
    "max-warps=16": _to_triton("max-warps=16"),
    "max-r-block=4096": _to_triton("max-r-block=4096 max-warps=16"),
    "persistent-max=4096": _to_triton("persistent-max=4096"),
    "persistent-max=4096,max-warps=16": _to_triton("persistent-max=4096 max-warps=16"),
    "no-welford": PIPELINE.replace("welford,", ""),
    "no-split": PIPELINE.replace("split-reductions,", ""),
}
#: the cases of the issue's gaps, and ones a change there could slow down
CASES = [
    "softmax_1024x65536",
    "layer_norm_16384x4096",
    "softmax_16384x4096",
    "rms_norm_bf16_16384x4096",
    "column_sum_8192x8192",
    "seed_16384x4096",
]


def run(backend: str, cases: list[str], pipeline: str | None, extra: list[str]) -> dict:
    """`benchmarks.run` of one backend in a process of its own: case -> ms (None: failed)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        env = dict(os.environ, **({"MIND_PIPELINE": pipeline} if pipeline else {}))
        command = [sys.executable, "-m", "benchmarks.run", "--backends", backend]
        command += ["--cases", ",".join(cases), "--json", str(out), *extra]
        subprocess.run(command, env=env, check=False, stdout=subprocess.DEVNULL)
        rows = json.loads(out.read_text())["cases"] if out.exists() else []
    return {r["name"]: r.get("cells", {}).get(backend, {}).get("ms") for r in rows}


def table(inductor: dict, results: dict[str, dict]) -> str:
    variants = list(results)
    lines = ["| case | inductor ms | " + " | ".join(variants) + " |"]
    lines.append("|---" * (len(variants) + 2) + "|")
    for case, base in inductor.items():
        cells = []
        for v in variants:
            ms = results[v].get(case)
            ratio = f" ({ms / base:.2f})" if ms is not None and base else ""
            cells.append("ERR" if ms is None else f"{ms:.3f}{ratio}")
        lines.append(
            f"| {case} | {'ERR' if base is None else f'{base:.3f}'} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines) + "\n\nmind ms (mind / Inductor); below 1: mind is faster.\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python3 -m benchmarks.sweep", description=__doc__.splitlines()[0]
    )
    p.add_argument("--cases", type=names_arg(CASE_NAMES), default=CASES)
    p.add_argument("--variants", type=names_arg(list(VARIANTS)), default=list(VARIANTS))
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--small", action="store_true", help="tiny shapes (for CPU smoke tests)")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    extra = ["--device", args.device, *(["--small"] if args.small else [])]
    inductor = run("inductor", args.cases, None, extra)
    results = {}
    for name in args.variants:
        results[name] = run("mind", args.cases, VARIANTS[name], extra)
        print(f"{name} done", file=sys.stderr)
    print(table(inductor, results))
    if args.json:
        Path(args.json).write_text(json.dumps({"inductor": inductor, "mind": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
