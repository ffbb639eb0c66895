"""OpInfo conformance sweep: torch's own operator database, one sample per op, compiled by mind
(and optionally Inductor) and compared with eager.

    python3 -m benchmarks.opinfo [--device cpu] [--ops abs,sum,...] [--inductor] [--timeout 120]
                                 [--dtype bfloat16] [--sample 2] [--grad] [--dynamic]
                                 [--out benchmarks/results/opinfo_cpu]

By default each op's first sample, in the first dtype of DTYPE_PREFERENCE the op supports;
`--dtype` and `--sample` draw another (inputs the default sweep never shows mind: an op without
that dtype or that many samples is skipped, as where eager fails). `--grad` compares the inputs'
gradients too, through the backward graph the backend compiles (ops without autograd skipped).
`--dynamic` compiles with `dynamic=True`: every size, and the sample's int arguments, a symbol.

Per op it records: pass / mismatch / error against eager (eager failing on the sample: skip),
whether Dynamo handed mind a graph at all, the kernels mind generated (the `@triton.jit`
functions of the emitted code, and their launch sites), whether the graphs ran ATen calls only,
and each fallback's reason. Ops run one after another in a worker process, so a hang (per-op
timeout) or a crash costs that op only: the parent kills and restarts the worker. The Markdown
table and the JSON are rewritten after every op, so an interrupted sweep keeps its rows; with
`--ops`, the rows of those ops are replaced in the results there, the others kept.

Lives in benchmarks/ with the other side-by-side runs against eager and Inductor: it measures
coverage, it is not a test (a fast subset of it is, in tests/test_opinfo_subset.py).
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import math
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as `python3 benchmarks/opinfo.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402
from torch.utils._pytree import tree_leaves, tree_map  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
#: rtol = atol by the sample's dtype; reduction order differs, a bug does not hide under these
TOLERANCE = {"float16": 1e-2, "bfloat16": 2e-2, "float32": 1e-3, "complex64": 1e-3}
#: the dtype a sample is drawn in: the first one the op supports
DTYPE_PREFERENCE = ("float32", "int64", "bool", "complex64", "float64", "int32", "uint8")


@dataclass
class Cell:
    """One backend's outcome on one op."""

    status: str  # pass | mismatch | error
    message: str = ""
    graphs: int = 0  # graphs Dynamo handed the backend
    kernels: int = 0  # generated kernels (mind: @triton.jit functions; inductor: its counter)
    launches: int = 0  # launch sites in the emitted code (mind)
    fallbacks: list[str] = field(default_factory=list)  # why a graph ran eagerly (mind)


@dataclass
class Row:
    op: str
    dtype: str = ""
    eager: str = "ok"  # ok | error: <why> (the op is skipped) | random (outputs compared by shape)
    cells: dict[str, Cell] = field(default_factory=dict)


def op_names() -> list[str]:
    return [full_name(op) for op in _op_db()]


def full_name(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def _op_db():
    from torch.testing._internal.common_methods_invocations import op_db  # needs expecttest

    return op_db


@dataclass(frozen=True)
class Draw:
    """Which sample of each op a sweep checks: the dtype (None: DTYPE_PREFERENCE's first the op
    supports) and the index among the op's samples."""

    dtype: str | None = None
    sample: int = 0
    #: also the gradients of the inputs, through the backward graph the backend compiles
    grad: bool = False
    #: compiled with `dynamic=True`: every size symbolic (but 0 and 1), as a graph that must
    #: serve inputs of any size is
    dynamic: bool = False

    def __str__(self) -> str:
        drawn = "one sample per op"
        if (self.dtype, self.sample) != (None, 0):
            dtype = f"in {self.dtype}" if self.dtype else "in the first dtype it supports"
            drawn = f"sample {self.sample} of each op, {dtype}"
        drawn += ", with gradients" if self.grad else ""
        return drawn + (", sizes dynamic" if self.dynamic else "")

    def run(self, fn, args, like=None):
        """What is compared: `fn`'s outputs, and with `grad` the inputs' gradients too (for
        cotangents rounded as `like`'s outputs, where given: `_with_grads`)."""
        return _with_grads(fn, args, like) if self.grad else fn(*args)

    def compile(self, fn, backend: str):
        return torch.compile(fn, backend=backend, dynamic=True if self.dynamic else None)

    def flags(self) -> list[str]:
        """The command line that draws this (a worker's)."""
        flags = ["--sample", str(self.sample)] + (["--dtype", self.dtype] if self.dtype else [])
        return flags + ["--grad"] * self.grad + ["--dynamic"] * self.dynamic


# -- one op, in the worker ------------------------------------------------------------------
def check_op(name: str, device: str, backends: tuple[str, ...], draw: Draw = Draw()) -> Row:
    """Run one op's drawn sample under eager and each backend; never raises."""
    op = next(o for o in _op_db() if full_name(o) == name)
    dtype = _sample_dtype(op, device, draw.dtype)
    row = Row(name, str(dtype).removeprefix("torch."))
    if dtype is None:
        row.eager = f"error: no supported dtype{f' {draw.dtype}' if draw.dtype else ''}"
        return row
    if draw.grad and not (op.supports_autograd and (dtype.is_floating_point or dtype.is_complex)):
        row.eager = "error: no gradients"
        return row
    try:
        samples = op.sample_inputs(device, dtype, requires_grad=draw.grad)
        sample = next(itertools.islice(samples, draw.sample, None), None)
        if sample is None:
            row.eager = f"error: fewer than {draw.sample + 1} samples"
            return row
        args = (sample.input, *sample.args)

        def fn(*a):
            return op.op(*a, **sample.kwargs)

        want = _run_eager(fn, args, draw, seed=0)
        random = _unchecked(op) or not _same(want, _run_eager(fn, args, draw, seed=1), 0.0)
    except Exception as exc:
        row.eager = f"error: {type(exc).__name__}: {_first_line(exc)}"
        return row
    row.eager = "random" if random else "ok"
    tol = TOLERANCE.get(str(dtype).removeprefix("torch."), 1e-5)
    for backend in backends:
        row.cells[backend] = _check_backend(backend, fn, args, want, tol, random, draw)
    return row


def _unchecked(op) -> bool:
    """Ops whose values OpInfo itself does not compare (uninitialized memory: `empty`)."""
    flags = ("skip_correctness_check_compile_vs_eager", "has_nondeterministic_output")
    return any(getattr(op, f, False) for f in flags)


def _sample_dtype(op, device: str, wanted: str | None = None):
    supported = op.supported_dtypes(device)
    if wanted is not None:
        return getattr(torch, wanted) if getattr(torch, wanted) in supported else None
    for name in DTYPE_PREFERENCE:
        if getattr(torch, name) in supported:
            return getattr(torch, name)
    return next(iter(sorted(supported, key=str)), None)


def _clone(args):
    """Fresh leaves, each requiring grad as its original does."""

    def fresh(t):
        if not isinstance(t, torch.Tensor):
            return t
        return t.detach().clone().requires_grad_(t.requires_grad)

    return tree_map(fresh, args)


def _run_eager(fn, args, draw: Draw, seed: int):
    torch.manual_seed(seed)
    return draw.run(fn, _clone(args))


def _with_grads(fn, args, like=None) -> tuple:
    """`fn`'s outputs and the gradients of the inputs that require them, for a fixed random
    cotangent of each differentiable output (a sum's ones would hide a softmax's gradient),
    rounded to the dtype of `like`'s output in its place: the float64 reference of a bf16 run
    takes the bf16 run's cotangents (unrounded, kron's bf16 gradient, a sum of 200 products
    that cancel to -0.81, was -0.69 in float64: mind's -0.81 looked farther than eager's
    -0.65)."""
    outputs = fn(*args)
    inputs = [a for a in tree_leaves(args) if isinstance(a, torch.Tensor) and a.requires_grad]
    leaves = tree_leaves(outputs)
    wrt = [
        (o, m)
        for o, m in zip(leaves, tree_leaves(like) if like is not None else leaves)
        if isinstance(o, torch.Tensor) and o.requires_grad
    ]
    if not inputs or not wrt:
        return outputs, ()
    gen = torch.Generator().manual_seed(0)
    cotangents = [
        torch.randn(o.shape, generator=gen).to(o.device, m.dtype).to(o.dtype) for o, m in wrt
    ]
    return outputs, torch.autograd.grad([o for o, _ in wrt], inputs, cotangents, allow_unused=True)


def _same(got, want, tol: float, shapes_only: bool = False) -> bool:
    try:
        _assert_same(got, want, tol, shapes_only)
    except AssertionError:
        return False
    return True


def _assert_same(got, want, tol: float, shapes_only: bool = False) -> None:

    if shapes_only:
        meta = [
            (type(x), tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else type(x)
            for x in (tree_leaves(got), tree_leaves(want))
        ]
        if meta[0] != meta[1]:
            raise AssertionError(f"got {meta[0]}, eager has {meta[1]}")
        return
    got, want = tree_map(_comparable, got), tree_map(_comparable, want)
    torch.testing.assert_close(got, want, rtol=tol, atol=tol, equal_nan=True)


def closer_to_float64(fn, args, got, want, draw: Draw = Draw(), tol: float = 0.0) -> str:
    """Where a low-precision result differs from eager's: whether each output either agrees with
    eager's (within `tol`) or is a floating tensor closer to the op run in float64 than eager's
    is (eager's CPU grid sampler in bfloat16 is 0.16 off on values of 1.6, mind's 0.004), and by
    how much; "" where not, or where float64 can't tell (a tie, a NaN of mind's). Eager's NaN
    where float64 is finite counts as infinitely far (a float16 soft margin loss whose exp
    overflows: eager's gradient NaN, mind's within 1e-4). Where the float64 result is not finite
    (atanh's gradient at 1), both must be as eager's."""
    lowp = (torch.float16, torch.bfloat16, torch.float32)

    def wide(x):
        if not isinstance(x, torch.Tensor) or x.dtype not in lowp:
            return x
        return x.detach().double().requires_grad_(x.requires_grad)

    try:
        like = want[0] if draw.grad else None  # (outputs, gradients)
        reference = tree_leaves(draw.run(fn, tree_map(wide, _clone(args)), like))
    except Exception:
        return ""
    got, want = tree_leaves(got), tree_leaves(want)
    if not len(got) == len(want) == len(reference):
        return ""
    errors = []
    for g, w, r in zip(got, want, reference):
        if _same(g, w, tol):
            continue
        if not isinstance(g, torch.Tensor) or g.dtype not in lowp or g.shape != r.shape:
            return ""
        finite = torch.isfinite(r)
        if not finite.any() or not _same(g[~finite], w[~finite], 0.0):
            return ""
        mine, eager = ((x.double() - r)[finite].abs().max().item() for x in (g, w))
        if not mine < (math.inf if math.isnan(eager) else eager):  # (mind's NaN: can't tell)
            return ""
        errors.append((mine, eager))
    if not errors:
        return ""
    mine, eager = max(errors)
    return f"differs from eager, but is closer to float64: {mine:.2g} off, eager {eager:.2g}"


def _comparable(x):
    """float8 as float32: assert_close compares float8 only bit for bit."""
    if isinstance(x, torch.Tensor) and x.dtype.is_floating_point and x.element_size() == 1:
        return x.float()
    return x


def _check_backend(
    backend: str, fn, args, want, tol: float, random: bool, draw: Draw = Draw()
) -> Cell:

    torch._dynamo.reset()
    counters.clear()
    dump = Path(tempfile.mkdtemp(prefix=f"opinfo-{backend}-"))
    os.environ["MIND_DUMP_DIR"] = str(dump)
    metrics = _inductor_metrics() if backend == "inductor" else None
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.manual_seed(0)
            got = draw.run(draw.compile(fn, backend), _clone(args))
    except Exception as exc:
        cell = Cell("error", f"{type(exc).__name__}: {_first_line(exc)}")
    else:
        try:
            _assert_same(got, want, tol, shapes_only=random)
            cell = Cell("pass")
        except AssertionError as exc:
            closer = not random and closer_to_float64(fn, args, got, want, draw, tol)
            cell = Cell("pass", closer) if closer else Cell("mismatch", _first_line(exc))
        cell.fallbacks = [
            _first_line(w.message)
            for w in caught
            if type(w.message).__name__ == "MindFallbackWarning"
        ]
    finally:
        os.environ.pop("MIND_DUMP_DIR", None)
    cell.graphs = counters["stats"]["unique_graphs"]
    if backend == "mind":
        cell.kernels, cell.launches = generated_kernels(dump)
    elif metrics is not None:
        cell.kernels = metrics.generated_kernel_count
    shutil.rmtree(dump, ignore_errors=True)
    return cell


def _inductor_metrics():
    from torch._inductor import metrics

    metrics.reset()
    return metrics


def generated_kernels(dump: Path) -> tuple[int, int]:
    """(kernels, launch sites) over every emitted Python file in a dump directory."""
    from mind.runtime.errors import kernel_sources, launch_lines

    kernels = launches = 0
    for path in dump.glob("*.py"):
        source = path.read_text()
        tree = ast.parse(source)
        found = kernel_sources(tree, source.splitlines())
        kernels += len(found)
        launches += len(set(launch_lines(tree, set(found)).values()))
    return kernels, launches


def _first_line(exc: object) -> str:
    text = str(exc).strip()
    return (text.splitlines() or [""])[0][:300]


def worker(device: str, backends: tuple[str, ...], draw: Draw) -> None:
    """Read op names from stdin, write one JSON row per line to stdout."""
    out = sys.stdout
    sys.stdout = sys.stderr  # whatever the ops print stays off the result channel
    for line in sys.stdin:
        row = check_op(line.strip(), device, backends, draw)
        out.write(json.dumps(asdict(row)) + "\n")
        out.flush()


# -- the sweep, in the parent ----------------------------------------------------------------
class Worker:
    """A worker process; restarted after a timeout or a crash."""

    def __init__(self, device: str, backends: tuple[str, ...], draw: Draw = Draw()):
        self.argv = [sys.executable, "-m", "benchmarks.opinfo", "--worker", "--device", device]
        self.argv += ["--backends", ",".join(backends), *draw.flags()]
        self.backends = backends
        self.proc: subprocess.Popen | None = None

    def run(self, name: str, timeout: float) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                cwd=Path(__file__).resolve().parent.parent,
            )
        self.proc.stdin.write(name + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if line:
            return json.loads(line)
        why = f"timeout after {timeout:g} s" if not ready else f"crash (exit {self.proc.wait()})"
        self.close()
        return asdict(Row(name, cells={b: Cell("error", why) for b in self.backends}))

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def category(cell: dict) -> str:
    """The one bucket a mind cell counts in."""
    if cell["status"] != "pass":
        return cell["status"]
    if cell["fallbacks"]:
        return "fallback"
    if not cell["graphs"]:
        return "no graph"
    return "own kernels" if cell["kernels"] else "ATen only"


def summary(rows: list[dict], backend: str) -> Counter:
    return Counter(category(r["cells"][backend]) for r in rows if backend in r["cells"])


def markdown(rows: list[dict], backends: tuple[str, ...], device: str, draw: Draw = Draw()) -> str:
    lines = [f"# OpInfo sweep on {device}: {draw}, compared with eager", ""]
    for backend in backends:
        counts = summary(rows, backend)
        lines.append(
            f"- {backend}: "
            + ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))
        )
    skipped = sum(1 for r in rows if r["eager"].startswith("error"))
    lines += [f"- skipped (eager fails on the sample, or the op has none): {skipped}", ""]
    head = ["op", "dtype"] + [f"{b} {c}" for b in backends for c in ("result", "kernels")]
    lines += ["| " + " | ".join(head + ["why"]) + " |", "|" + "---|" * (len(head) + 1)]
    for r in rows:
        if r["eager"].startswith("error"):
            continue
        cells = [r["cells"].get(b) for b in backends]
        shown = []
        for c in cells:
            shown += ["-", "-"] if c is None else [category(c), str(c["kernels"])]
        why = next((c["message"] or "; ".join(c["fallbacks"]) for c in cells if c), "")
        lines.append("| " + " | ".join([r["op"], r["dtype"], *shown, why.replace("|", "/")]) + " |")
    return "\n".join(lines) + "\n"


def merged(earlier: list[dict], rows: list[dict]) -> list[dict]:
    """`earlier` rows with those of the ops in `rows` replaced in place (new ops after them): a
    sweep of a few ops updates a whole sweep's table."""
    fresh = {r["op"]: r for r in rows}
    return [fresh.pop(r["op"], r) for r in earlier] + list(fresh.values())


def saved_rows(out: Path) -> list[dict]:
    path = out.with_suffix(".json")
    return json.loads(path.read_text())["rows"] if path.exists() else []


def sweep(
    names: list[str],
    device: str,
    backends: tuple[str, ...],
    timeout: float,
    out: Path,
    earlier: list[dict] = (),
    draw: Draw = Draw(),
):
    """Run each op, writing the results (`earlier` rows updated with them) after every op."""
    rows: list[dict] = []
    worker_ = Worker(device, backends, draw)
    try:
        for i, name in enumerate(names, 1):
            start = time.time()
            rows.append(worker_.run(name, timeout))
            cell = rows[-1]["cells"].get("mind")
            status = category(cell) if cell else rows[-1]["eager"]
            print(
                f"[{i}/{len(names)}] {name}: {status} ({time.time() - start:.1f} s)",
                file=sys.stderr,
            )
            table = merged(list(earlier), rows)
            out.with_suffix(".json").write_text(
                json.dumps({"device": device, "rows": table}, indent=1)
            )
            out.with_suffix(".md").write_text(markdown(table, backends, device, draw))
    finally:
        worker_.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python3 -m benchmarks.opinfo", description=__doc__.split("\n")[0]
    )
    p.add_argument("--device", default="cpu")
    p.add_argument("--ops", default=None, help="comma-separated op names (default: every op)")
    p.add_argument("--inductor", action="store_true", help="also run TorchInductor")
    p.add_argument("--backends", default=None, help=argparse.SUPPRESS)
    p.add_argument("--timeout", type=float, default=120.0, help="seconds per op")
    p.add_argument(
        "--dtype", default=None, help="draw samples in this dtype (bfloat16, int32, ...)"
    )
    p.add_argument("--sample", type=int, default=0, help="which of each op's samples (default 0)")
    p.add_argument("--grad", action="store_true", help="compare the inputs' gradients too")
    p.add_argument("--dynamic", action="store_true", help="compile with dynamic=True")
    p.add_argument("--out", type=Path, default=None, help="results path without suffix")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    backends = tuple(args.backends.split(",")) if args.backends else ("mind",)
    if args.inductor and "inductor" not in backends:
        backends += ("inductor",)
    if args.dtype is not None and not isinstance(getattr(torch, args.dtype, None), torch.dtype):
        p.error(f"--dtype {args.dtype}: not a torch dtype")
    draw = Draw(args.dtype, args.sample, args.grad, args.dynamic)
    if args.worker:
        worker(args.device, backends, draw)
        return 0
    names = op_names()
    if args.ops:
        wanted = args.ops.split(",")
        unknown = sorted(set(wanted) - set(names))
        if unknown:
            p.error(f"unknown op(s): {', '.join(unknown)}")
        names = [n for n in names if n in wanted]
    parts = (args.dtype, args.sample and f"s{args.sample}", args.grad and "grad")
    parts += (args.dynamic and "dynamic",)
    suffix = "".join(f"_{part}" for part in parts if part)
    out = args.out or RESULTS / f"opinfo_{args.device.split(':')[0]}{suffix}"
    out.parent.mkdir(parents=True, exist_ok=True)
    earlier = saved_rows(out) if args.ops else []  # --ops updates those rows of the table
    rows = sweep(names, args.device, backends, args.timeout, out, earlier, draw)
    sys.stdout.write(markdown(rows, backends, args.device, draw).split("\n| op")[0] + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
