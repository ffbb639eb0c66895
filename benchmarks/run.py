"""Run every case under eager, Inductor and mind in one process; print a table, write JSON.

    python3 -m benchmarks.run [--cases NAME,...] [--json out.json] [--png out.png] [--device cuda]
    python3 -m benchmarks.run --mode max-autotune     # both compilers autotune
    python3 -m benchmarks.run --device cpu --small --backends eager,mind   # smoke test

Each (case, backend) cell is isolated: whatever it raises is recorded for that cell and the run
goes on, since the backends under test are unfinished.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import traceback
from pathlib import Path

if __package__ in (None, ""):  # run as `python3 benchmarks/run.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
import triton
from torch.utils._pytree import tree_leaves

from benchmarks.cases import CASE_NAMES, TOLERANCE, Case, make_inputs, select
from benchmarks.common import catch_fallbacks, describe, fresh_caches, names_arg
from benchmarks.measure import (
    check_kernel_counter,
    compare,
    copy_gbps,
    kernel_count,
    loop_ms,
    median_ms,
    nbytes,
    sync,
)
from benchmarks.plot import Bar, Chart, save_or_say
from benchmarks.report import markdown, write_json

BACKENDS = ("eager", "inductor", "mind")
TIMING = {
    "cuda": "triton.testing.do_bench median, L2 flushed before each call, CUDA events per call",
    "cpu": "wall-clock median of up to 10 calls after one warm-up",
}
COPY_BYTES = {False: 1 << 30, True: 1 << 24}  # by --small


def _compiled(backend: str, fn, mode: str | None = None):
    return fn if backend == "eager" else torch.compile(fn, backend=backend, mode=mode)


def _free(device: str) -> None:
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()


def first_call(
    backend: str, case: Case, args: tuple, device: str, mode: str | None = None
) -> tuple:
    """(callable, output, seconds, fallback messages) of the first call, compile included."""
    torch._dynamo.reset()
    start = time.perf_counter()
    fallbacks: list[str] = []
    with catch_fallbacks(fallbacks):
        fn = _compiled(backend, case.fn, mode)
        out = fn(*args)
        sync(device)
    seconds = time.perf_counter() - start
    return fn, out, seconds, fallbacks


def run_cell(
    backend: str, case: Case, args: tuple, want: object, device: str, roof: float, mode=None
) -> dict:
    """Time, check and count one backend on one case; an exception ends the cell, not the run."""
    cell: dict[str, object] = {}
    moved = nbytes(args) + nbytes(want)
    tol = case.tol or TOLERANCE[tree_leaves(want)[0].dtype]
    try:
        fn, out, seconds, fallbacks = first_call(backend, case, args, device, mode)
        if fallbacks:
            cell["fallback"] = fallbacks
        if backend != "eager":
            cell["compile_s"] = seconds
            cell["ok"], cell["max_abs_err"], cell["why"] = compare(out, want, tol)
        del out
        ms = median_ms(lambda: fn(*args), device)
        cell.update(ms=ms, gbps=moved / (ms * 1e6), copy_frac=moved / (ms * 1e6) / roof)
        if case.flops:
            cell["tflops"] = case.flops(args) / (ms * 1e9)
        cell["loop_ms"] = loop_ms(lambda: fn(*args), device)
        try:  # a profiler failure costs the count only
            cell["kernels"] = kernel_count(lambda: fn(*args), device)
        except Exception as e:
            cell["kernels_error"] = describe(e)
    except Exception as e:  # the cell's result is the failure; keep going
        cell["error"] = describe(e)
        cell["traceback"] = traceback.format_exc()[-4000:]
    finally:
        fn = None
        torch._dynamo.reset()
        _free(device)
    return cell


def run_case(
    case: Case, backends: list[str], device: str, small: bool, roof: float, mode=None
) -> dict:
    row: dict[str, object] = {"name": case.name, "dtype": "-", "bytes": 0}
    try:
        args = make_inputs(case, device, small)
        want = case.fn(*args)
        sync(device)
    except Exception as e:  # no inputs or no reference: every cell of the row is this failure
        row["cells"] = {b: {"error": f"inputs or eager reference: {describe(e)}"} for b in backends}
        _free(device)
        return row
    row.update(
        shapes=[list(a.shape) for a in args],
        dtype=str(args[0].dtype).removeprefix("torch."),
        bytes=nbytes(args) + nbytes(want),
        cells={b: run_cell(b, case, args, want, device, roof, mode) for b in backends},
    )
    mind, ind = row["cells"].get("mind", {}).get("ms"), row["cells"].get("inductor", {}).get("ms")
    row["mind_over_inductor"] = mind / ind if mind is not None and ind is not None else None
    del args, want
    _free(device)
    return row


def warm_up(backends: list[str], device: str) -> dict[str, object]:
    """Compile a throwaway program once per backend, so the first case's compile time excludes
    one-off start-up (imports, Inductor's compile workers)."""
    x = (torch.ones(8, device=device),)
    throwaway = Case("warm_up", lambda t: t * 2 + 1, ())
    spent: dict[str, object] = {}
    for b in backends:
        if b == "eager":
            continue
        try:
            _, _, seconds, fallbacks = first_call(b, throwaway, x, device)
            spent[b] = {"seconds": seconds, "fallback": fallbacks}
        except Exception as e:
            spent[b] = {"error": describe(e)}
    torch._dynamo.reset()
    return spent


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python3 -m benchmarks.run", description=__doc__.splitlines()[0]
    )
    p.add_argument(
        "--cases", type=names_arg(CASE_NAMES), help="comma-separated case names (default: all)"
    )
    p.add_argument("--backends", type=names_arg(BACKENDS), default=list(BACKENDS))
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    p.add_argument("--small", action="store_true", help="tiny shapes (for CPU smoke tests)")
    p.add_argument("--mode", help="torch.compile's mode for both compilers (max-autotune, ...)")
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--png", help="plot each backend's speedup over eager here (needs matplotlib)")
    args = p.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA device here (use --device cpu --small)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    meta: dict[str, object] = {
        "device_name": torch.cuda.get_device_name() if args.device == "cuda" else "cpu",
        "torch": torch.__version__,
        "triton": triton.__version__,
        "backends": args.backends,
        "mode": args.mode,
        "small": args.small,
        "timing": TIMING[args.device],
        "cache_dir": fresh_caches(),
    }
    meta["copy_gbps"] = copy_gbps(args.device, COPY_BYTES[args.small])
    meta["kernel_counter_check"] = check_kernel_counter(args.device)
    meta["startup_s"] = warm_up(args.backends, args.device)
    rows: list[dict] = []
    for case in select(args.cases):
        rows.append(
            run_case(case, args.backends, args.device, args.small, meta["copy_gbps"], args.mode)
        )
        print(f"[{time.perf_counter() - started:6.1f}s] {case.name} done", file=sys.stderr)
        if args.json:  # after every case, so a crash still leaves the finished rows
            write_json(args.json, rows, meta)
    meta["total_s"] = time.perf_counter() - started
    print(markdown(rows, args.backends, meta))
    if args.json:
        write_json(args.json, rows, meta)
    save_or_say(args.png, chart(rows, args.backends, meta))
    return 0


def chart(rows: list[dict], backends: list[str], meta: dict[str, object]) -> Chart:
    """Per case, each compiled backend's speedup over eager (ERR where it has no time, hatched
    where its check failed or a graph ran eagerly)."""

    def bar(row: dict, backend: str) -> Bar:
        cell, eager = row["cells"].get(backend, {}), row["cells"].get("eager", {}).get("ms")
        speedup = eager / cell["ms"] if eager and cell.get("ms") else None
        return Bar(
            speedup, "xx" if cell.get("ok") is False else "//" if cell.get("fallback") else ""
        )

    compiled = [b for b in backends if b != "eager"]
    return Chart(
        title=f"Speedup over eager on {meta['device_name']} (hatched: xx check failed, // fell back)",
        ylabel="speedup over eager",
        groups=[r["name"] for r in rows],
        series={b: [bar(r, b) for r in rows] for b in compiled},
    )


if __name__ == "__main__":
    sys.exit(main())
