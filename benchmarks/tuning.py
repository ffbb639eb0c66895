"""What autotuning found: the records in mind's tuning cache, as tables, for choosing better
default heuristics (codegen/heuristics.py) from measurements.

    python3 -m benchmarks.tuning [--cache DIR]     # default: $MIND_CACHE_DIR or ~/.cache/mind

Kernels: each tuned launch's heuristic config (its first candidate) against the winner, with the
launch's sizes (numels), fastest gains first. Matmuls: the template against ATen.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as `python3 benchmarks/tuning.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mind.runtime.cache import cache_dir


def records(folder: Path) -> list[dict]:
    found = []
    for path in sorted(folder.glob("*.json")):
        try:
            found.append(json.loads(path.read_text()))
        except ValueError:
            continue
    return [r for r in found if isinstance(r, dict)]


def kernel_table(rows: list[dict]) -> str:
    tuned = [r for r in rows if isinstance(r.get("ms"), list) and r.get("candidates")]
    tuned.sort(key=lambda r: r["ms"][0] / min(r["ms"]), reverse=True)
    lines = ["| sizes | heuristic | ms | winner | ms | gain |", "|---|---|---|---|---|---|"]
    for r in tuned:
        best = r["candidates"].index(r["winner"])
        lines.append(
            f"| {r.get('sizes')} | {r['candidates'][0]} | {r['ms'][0]:.4f} | "
            f"{r['winner']} | {r['ms'][best]:.4f} | {r['ms'][0] / r['ms'][best]:.2f}x |"
        )
    return "\n".join(lines)


def matmul_table(rows: list[dict]) -> str:
    chosen = [r for r in rows if r.get("winner") in ("template", "aten")]
    lines = ["| matmul | template ms | ATen ms | winner |", "|---|---|---|---|"]
    for r in chosen:
        ms = r.get("ms", {})
        lines.append(
            f"| {r.get('problem')} | {ms.get('template', 0):.4f} | {ms.get('aten', 0):.4f} | "
            f"{r['winner']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python3 -m benchmarks.tuning", description=__doc__.splitlines()[0]
    )
    p.add_argument("--cache", type=Path, default=None, help="mind's cache folder")
    args = p.parse_args(argv)
    rows = records((args.cache or cache_dir()) / "tuning")
    print(f"## Kernels\n\n{kernel_table(rows)}\n\n## Matmuls\n\n{matmul_table(rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
