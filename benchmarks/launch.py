"""What one launch and one compiled call cost on the host, in microseconds.

    python3 -m benchmarks.launch [--kernels 1,8,32] [--json out.json] [--md out.md] [--png out.png]

Launches: a one-element kernel launched through Triton's JIT (`kernel[grid](...)`, which
specializes its arguments and looks up its cache on every launch), through the compiled kernel's
launcher (`CompiledKernel.run`, Triton's own launcher below the JIT), and through mind's bound
launcher (torch's C++ launcher where it takes the kernel, as Inductor launches: see
runtime/static_launch.py).

Graphs: a chain of N softmaxes over a 16x16 matrix, along rows and columns in turn (one kernel
each under both compilers: a softmax needs whole lines of what the previous one wrote, across its
lines), under eager, Inductor, mind, and both compilers with CUDA graphs
(`mode="reduce-overhead"`). Per row: µs per call, the kernels one call launches (profiler), and
µs per kernel.

Every time is wall time of back-to-back calls with one synchronization at the end: the GPU work
is a few µs per kernel, so the host is what is measured.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as `python3 benchmarks/launch.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
import triton
import triton.language as tl

from benchmarks.measure import kernel_count
from benchmarks.plot import Bar, Chart, save_or_say

GRAPH_BACKENDS = {
    "eager": None,
    "inductor": {"backend": "inductor"},
    "inductor reduce-overhead": {"backend": "inductor", "mode": "reduce-overhead"},
    "mind": {"backend": "mind"},
    "mind reduce-overhead": {"backend": "mind", "mode": "reduce-overhead"},
}


@triton.jit
def add_one(ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(ptr + offsets, tl.load(ptr + offsets, mask=mask) + 1, mask=mask)


def us_per_call(fn: Callable[[], object], seconds: float = 0.5) -> float:
    """Wall µs per call of back-to-back calls, after warm-up."""
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    calls, start = 0, time.perf_counter()
    while calls < 100 or time.perf_counter() - start < seconds:
        fn()
        calls += 1
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1e6 / calls


def launch_rows() -> list[dict]:
    from mind.runtime.launch import bind, get_raw_stream

    x = torch.zeros(1, device="cuda")
    compiled = add_one.warmup(torch.float32, 1, grid=(1,), BLOCK=16)
    run, function, metadata = compiled.run, compiled.function, compiled.packed_metadata
    bound = bind(add_one, x.device, (torch.float32, 1), num_warps=4, num_stages=3, BLOCK=16)

    def raw():
        stream = get_raw_stream(0)
        run(1, 1, 1, stream, function, metadata, None, None, None, x, 1, 16)

    def mind():
        bound(1, 1, 1, get_raw_stream(0), x, 1)

    def jit():
        add_one[(1,)](x, 1, BLOCK=16)

    rows = []
    for name, fn in (("Triton JIT kernel[grid]", jit), ("CompiledKernel.run", raw),
                     ("mind bound launcher", mind)):  # fmt: skip
        us = us_per_call(fn)
        rows.append({"what": name, "kernels": 1, "us_per_call": us, "us_per_kernel": us})
    return rows


def softmax_chain(n: int) -> Callable[[torch.Tensor], torch.Tensor]:
    def chain(x: torch.Tensor) -> torch.Tensor:
        for i in range(n):
            x = torch.softmax(x * 2.0, dim=i % 2)
        return x

    return chain


def graph_rows(kernels: list[int]) -> list[dict]:
    rows = []
    x = torch.randn(16, 16, device="cuda")
    for n in kernels:
        fn = softmax_chain(n)
        want = fn(x)
        for name, kwargs in GRAPH_BACKENDS.items():
            torch._dynamo.reset()
            row = {"what": f"{name}, {n} softmax", "backend": name, "graph_kernels": n}
            try:
                compiled = fn if kwargs is None else torch.compile(fn, **kwargs)
                for _ in range(3):  # compile, warm up, record
                    got = compiled(x)
                torch.testing.assert_close(got, want)
                row["kernels"] = kernel_count(lambda c=compiled: c(x), "cuda")
                row["us_per_call"] = us_per_call(lambda c=compiled: c(x))
                row["us_per_kernel"] = row["us_per_call"] / max(1, row["kernels"] or n)
            except Exception as exc:  # a backend that fails is a row, not the end of the run
                row["error"] = f"{type(exc).__name__}: {exc}"[:300]
            print(row, file=sys.stderr)
            rows.append(row)
    return rows


def markdown(rows: list[dict]) -> str:
    lines = ["| what | kernels | µs per call | µs per kernel |", "|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['what']} | – | error: {r['error'][:80]} | – |")
            continue
        kernels = "–" if r.get("kernels") is None else r["kernels"]
        lines.append(
            f"| {r['what']} | {kernels} | {r['us_per_call']:.1f} | {r['us_per_kernel']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", default="1,8,32", help="softmaxes per graph, comma-separated")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--md", type=Path)
    parser.add_argument("--png", help="plot each backend's speedup over eager per call here")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        sys.exit("benchmarks.launch measures CUDA launches: no CUDA device here")
    import mind.backend  # noqa: F401  (registers backend="mind" where no entry point is installed)

    rows = launch_rows() + graph_rows([int(k) for k in args.kernels.split(",")])
    table = markdown(rows)
    meta = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "timing": "wall µs per call, back-to-back calls, one sync at the end",
    }
    print(table)
    if args.md:
        args.md.write_text(f"# Launch costs ({meta['device']})\n\n{table}")
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    save_or_say(args.png, chart(rows, meta["device"]))


def chart(rows: list[dict], device: str) -> Chart:
    """Per chain length, each compiled backend's speedup over eager in µs per call."""
    graphs = [r for r in rows if "graph_kernels" in r]
    lengths = list(dict.fromkeys(r["graph_kernels"] for r in graphs))
    cell = {(r["graph_kernels"], r["backend"]): r.get("us_per_call") for r in graphs}

    def bar(n: int, backend: str) -> Bar:
        eager, own = cell.get((n, "eager")), cell.get((n, backend))
        return Bar(eager / own if eager and own else None)

    compiled = [b for b in GRAPH_BACKENDS if b != "eager"]
    return Chart(
        title=f"Host cost of a compiled call on {device}: speedup over eager",
        ylabel="eager µs per call / backend's",
        groups=[f"{n} softmax" for n in lengths],
        series={b: [bar(n, b) for n in lengths] for b in compiled},
    )


if __name__ == "__main__":
    main()
