"""A differential fuzzer over torch programs: a random small program compiled by mind must give
eager's results, without falling back to eager.

    python3 -m mind.tools.program_fuzz [--seed 0] [--count 200] [--dynamic] [--train]
                                       [--device cuda] [--json out.json]

A program is data (`Program`): its inputs' shapes (some dims 1, so that they broadcast, now and
then one long or empty; now and then the first input laid out otherwise than dense: transposed
in memory, every other element of a larger tensor, or broadcast along a dim) and dtype (f32,
bf16, f16, i32 or i64), and two to seven steps, each an op of `OPS` (tools/program_ops.py) on
earlier values with its parameters (a dim, keepdim, ...). Generating runs each step eagerly and
keeps only steps eager accepts, forward on the CPU (a program eager refuses elsewhere is
`invalid`, below). `run` interprets a program with nothing random left, which Dynamo traces as
straight-line code; the program returns its last value and its first step's, two outputs of
the one graph. With `--train` the float inputs' gradients of a loss over both outputs are
compared too (a backward graph). Each program lands in one class:

    ok        the same shapes, dtypes and values as eager: within 1e-3 (two roundings of a
              narrower dtype, or of one a step rounds to inside: `to_bf16`), or within twice
              what eager's own values move when its inputs move by about a rounding of their
              dtype, or about as close as eager's to the program run in f64; a size that
              depends on values (nonzero's) may be the nudged eager's or the f64 program's,
              its values then judged against that one
    mismatch  a shape, dtype or value differs          fallback  mind ran a graph eagerly
    error     compiling or running raised
    untraced  Dynamo's own trace refused what eager ran, before any backend: a meta function
              checks what eager skips on an empty tensor (a matmul of int32 and f32 with no
              elements); or mind fell back where `aot_eager` fails too, AOTAutograd's trace
              (an empty input's mse_loss backward, whose meta divides by its numel, 0); or
              mind's results differ from eager's as `aot_eager`'s do (torch 2.14's AOTAutograd
              lays the gradient of an unfold's overlapping windows out as the windows are, and
              loses all but one of each element's terms). Not mind's to answer, and not
              counted against it
    invalid   eager itself refuses the program where it is checked: generating ran the steps
              forward only, on the CPU (adaptive_avg_pool2d's backward of an empty channel dim;
              CUDA's aminmax, which has no derivative); not counted either

mind-opt reruns a fallback's failing pass on the reproducer its warning names. On CPU the
kernels run in Triton's interpreter; tests/test_program_fuzz.py runs a fixed-seed slice.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import random
import sys
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from .program_ops import LAYOUTS, OPS

#: the classes that count nothing against mind (the docstring's)
NOT_AGAINST = ("ok", "untraced", "invalid")
#: sizes a dim takes: 1 (broadcasts, and views of it read one element), powers of two, odd ones;
#: now and then a long one (LONG: reductions over it loop, and scans run in several blocks), or
#: an empty one (a kernel of no elements, a reduction over none): `_size`
SIZES = (1, 2, 3, 5, 8, 16, 17, 33)
LONG, MAX_NUMEL = 1031, 1 << 16
#: the inputs' dtypes, f32 the most often; integer inputs take values from about -8 to 8
DTYPES = ("float32",) * 4 + ("bfloat16", "float16", "int32", "int64")


@dataclass(frozen=True)
class Program:
    """Inputs' shapes (the first laid out as `layout` says, a key of LAYOUTS) and
    steps: (op name, indexes of the values it takes, its parameters); value i < len(shapes) is
    input i. The inputs are of `dtype` (torch's name). With `mutates`, the program ends by
    writing its last input in place, as a model updates a buffer: outputs that are views of it
    show the new values, the others were computed from the old ones."""

    shapes: tuple[tuple[int, ...], ...]
    layout: str
    steps: tuple[tuple[str, tuple[int, ...], tuple], ...]
    dtype: str = "float32"
    mutates: bool = False

    def inputs(self, seed: int, device: str = "cpu") -> list[torch.Tensor]:
        """Drawn on the CPU (a seed names one program on any device), then laid out on `device`."""
        gen = torch.Generator().manual_seed(seed)
        dtype = getattr(torch, self.dtype)
        scale = 1 if dtype.is_floating_point else 4
        xs = [(scale * torch.randn(s, generator=gen)).to(dtype).to(device) for s in self.shapes]
        xs[0] = LAYOUTS[self.layout](xs[0])
        return xs


def run(program: Program, *inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The program's last value and its first step's."""
    values = list(inputs)
    for name, operands, params in program.steps:
        values.append(OPS[name].apply(params, *(values[i] for i in operands)))
    if program.mutates and not inputs[-1].requires_grad:  # (a leaf that needs grad can't be)
        inputs[-1].mul_(-2).add_(1)
    return values[-1], values[len(inputs)]


def _size(r: random.Random) -> int:
    draw = r.random()
    return r.choice(SIZES) if draw < 0.9 else LONG if draw < 0.98 else 0


def generate(seed: int) -> Program:
    """A random valid program: each step drawn until eager runs it (on the values so far)."""
    r = random.Random(seed)
    base = [_size(r) for _ in range(r.randint(1, 4))]
    while math.prod(base) > MAX_NUMEL:  # (the interpreter runs a large input slowly on CPU)
        base[base.index(max(base))] //= 2
    shapes = tuple(
        tuple(1 if r.random() < 0.25 else n for n in base) for _ in range(r.randint(1, 3))
    )
    dtype, mutates = r.choice(DTYPES), r.random() < 0.2
    views = [n for n in LAYOUTS if n != "dense"]
    if mutates and len(shapes) == 1:  # (eager writes no memory its elements share)
        views.remove("expanded")
    layout = r.choice(views) if r.random() < 0.3 else "dense"
    program = Program(shapes, layout, (), dtype, mutates)
    values = program.inputs(seed)
    steps: list = []
    names, length = sorted(OPS), r.randint(2, 7)
    while len(steps) < length:
        name = r.choice(names)
        op = OPS[name]
        operands = tuple(r.randrange(len(values)) for _ in range(op.arity))
        xs = [values[i] for i in operands]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                params = op.params(r, *xs)
                out = op.apply(params, *xs)
        except (RuntimeError, IndexError, ValueError):
            continue
        if not isinstance(out, torch.Tensor) or out.numel() > MAX_NUMEL:
            continue  # (a sum of no tensors is the number 0)
        values.append(out)
        steps.append((name, operands, params))
    return dataclasses.replace(program, steps=tuple(steps))


def check(
    seed: int, dynamic: bool = False, train: bool = False, device: str = "cpu"
) -> tuple[str, str]:
    """(class, detail) of program `seed` compiled by mind against eager, both on `device`; with
    `train`, also the inputs' gradients of a loss over the outputs (the backward graph compiled
    too). The program and its inputs are drawn on the CPU, so a seed names one program on any
    device."""
    from mind.fallback import MindFallbackWarning

    program = generate(seed)
    inputs = program.inputs(seed, device)
    try:
        want = _results(run, program, inputs, train, quiet=True)
    except RuntimeError as exc:  # generating ran the steps forward only, on the CPU
        return "invalid", f"eager refuses it: {str(exc).splitlines()[0]}"
    torch._dynamo.reset()
    compiled = torch.compile(run, backend="mind", dynamic=dynamic)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", MindFallbackWarning)
        try:
            got = _results(compiled, program, inputs, train)
        except torch._dynamo.exc.TorchRuntimeError as exc:
            return "untraced", str(exc).splitlines()[0]
        except Exception as exc:
            return "error", f"{type(exc).__name__}: {exc}"
    fallbacks = [str(w.message) for w in caught if issubclass(w.category, MindFallbackWarning)]
    # eager again, nudged and in f64: only where a result differs, and once for all of them
    moved = functools.cache(lambda: _results(run, program, _nudged(inputs), train, quiet=True))
    exact = functools.cache(lambda: _in_f64(program, inputs, train))
    difference = _difference(want, got, moved, exact, _coarsest_rounding(program))
    if difference is None and not fallbacks:
        return "ok", ""
    traced = _traced(program, inputs, train, dynamic)
    if difference is not None:
        if traced is not None and _same(traced, got):
            return "untraced", f"aot_eager's results are mind's: {difference}"
        return "mismatch", difference
    if traced is None:
        return "untraced", f"aot_eager fails too: {fallbacks[0]}"
    return "fallback", fallbacks[0]


def _difference(
    want: Results, got: Results, moved: Callable, exact: Callable, rounding: float = 0.0
) -> str | None:
    """What differs between eager's results and the compiled ones, past what rounding explains
    (`moved`: eager's on nudged inputs; `exact`: the f64 program's; `rounding`: the coarsest
    rounding the program's values went through, `_coarsest_rounding`); None where nothing
    does."""
    for i, ((what, a), (_, b)) in enumerate(zip(want, got)):
        if a.shape != b.shape and a.dtype == b.dtype:
            references = [moved()[i][1]] + ([exact()[i][1]] if exact() else [])
            if any(_is_about(b, r, rounding) for r in references):
                continue
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"{what}: {b.dtype}{list(b.shape)}, eager {a.dtype}{list(a.shape)}"
        if not _is_about(b, a, rounding):
            err, noise = _error(a, b), _error(a, moved()[i][1])
            if err <= 2 * noise or _closer_to_exact(exact(), i, a, b):
                continue
            apart = not torch.equal(a.isnan(), b.isnan())
            off = "NaN where eager's is not, or not where it is" if apart else f"off by {err:.3g}"
            return f"{what}: {off} (eager's inputs nudged: {noise:.3g})"
    return None


def _traced(program: Program, inputs: list, train: bool, dynamic: bool) -> Results | None:
    """The program's results compiled by `aot_eager` (Dynamo's and AOTAutograd's traces, no
    compiler); None where that fails."""
    torch._dynamo.reset()
    compiled = torch.compile(run, backend="aot_eager", dynamic=dynamic)
    try:
        return _results(compiled, program, inputs, train, quiet=True)
    except torch._dynamo.exc.BackendCompilerFailed:
        return None


def _same(a: Results, b: Results) -> bool:
    """Whether two runs' results agree (shapes, dtypes, values within two roundings)."""
    return all(_is_about(y, x) and x.dtype == y.dtype for (_, x), (_, y) in zip(a, b))


Results = list[tuple[str, torch.Tensor]]


def _results(fn: Callable, program: Program, inputs: list, train: bool, quiet=False) -> Results:
    """`fn(program, *inputs)`'s outputs and then its inputs, named (on copies: a program may
    write an input); with `train`, then the inputs' gradients of sum(output * W) over the
    outputs, W fixed random weights. `quiet`: without eager's own warnings (std of one
    element)."""
    xs = [_copy(x).requires_grad_(train and x.is_floating_point()) for x in inputs]
    with warnings.catch_warnings():
        if quiet:
            warnings.simplefilter("ignore", UserWarning)
        outs = fn(program, *xs)
        named = [(f"output {i}", out.detach()) for i, out in enumerate(outs)]
        named += [(f"input {j} after the call", x.detach()) for j, x in enumerate(xs)]
        if not train:
            return named
        terms = [(out.double() * _weights(out)).sum() for out in outs if out.requires_grad]
        if terms:
            sum(terms).backward()
    grads = [x.grad if x.grad is not None else torch.zeros_like(x) for x in xs]
    return named + [(f"gradient of input {j}", g) for j, g in enumerate(grads)]


def _copy(x: torch.Tensor) -> torch.Tensor:
    """A copy of `x` laid out as `x` is, storage offset and shared elements too (`clone` makes a
    tensor that is not dense contiguous)."""
    storage = x.detach().untyped_storage().clone()
    return x.new_empty(0).set_(storage, x.storage_offset(), x.shape, x.stride())


def _weights(out: torch.Tensor) -> torch.Tensor:
    gen = torch.Generator().manual_seed(1)
    return torch.randn(out.shape, generator=gen, dtype=torch.float64).to(out.device)


def _error(a: torch.Tensor, b: torch.Tensor) -> float:
    """The largest difference of the values; inf where one holds NaN and the other not (its
    finite values may agree: 0 ** 0 gave NaN where eager gave 1)."""
    if not torch.equal(a.isnan(), b.isnan()):
        return math.inf
    return (a.double() - b.double()).abs().nan_to_num(0).max().item()


def _coarsest_rounding(program: Program) -> float:
    """The largest `_eps` of the program's dtype and of the roundings its ops make inside. A
    result computed through a rounding to bf16 is only known to a bf16 unit: an f32 difference
    of one unit before it (a compiled cumsum adds in another order) may decide a tie. Nudging
    the inputs shows that only for float inputs; program 621195 rounds the cumsum of
    `atan2(x, x)` over int64 `x` to bf16: 113 pi in f32, one f32 unit from -355, a bf16 tie."""
    dtypes = [getattr(torch, program.dtype)] + [OPS[name].rounds_to for name, _, _ in program.steps]
    return max(_eps(d) for d in dtypes if d is not None)


def _nudged(inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """The inputs moved by about a rounding of their dtype (one part in 1e7 for f32). How far
    eager's results then move is the program's own sensitivity: one that casts to f16 and then
    takes a remainder (or floors, or compares) turns one rounding of an exp into a step of its
    output, and a compiled program rounds its exp otherwise than eager. A difference within
    that is the program's, not mind's."""
    gen = torch.Generator().manual_seed(0)
    return [
        (x.double() * (1 + _eps(x.dtype) * torch.randn(x.shape, generator=gen).to(x.device))).to(
            x.dtype
        )
        for x in inputs
    ]


def _in_f64(program: Program, inputs: list, train: bool) -> Results | None:
    """The program's results run in f64; None where f64 does not run."""
    try:
        return _results(run, program, [x.double() for x in inputs], train, quiet=True)
    except (RuntimeError, IndexError):
        return None


def _closer_to_exact(exact: Results | None, i: int, eager: torch.Tensor, got: torch.Tensor) -> bool:
    """Whether result `i` is about as close as eager's to `exact`, the program run in f64 (within
    twice eager's error and two roundings): in f16 or bf16 eager rounds each op's result, a
    compiled program keeps f32 between the ops it fuses, and is the closer."""
    if exact is None:
        return False
    reference = exact[i][1]
    tol = 2 * _eps(eager.dtype) * _largest(reference)
    return _error(got, reference) <= 2 * _error(eager, reference) + tol


def _is_about(got: torch.Tensor, reference: torch.Tensor, rounding: float = 0.0) -> bool:
    """Whether `got` is `reference` (eager's result, a nudged eager's, or the f64 program's)
    within 1e-3 or two roundings of its dtype or of `rounding`, size included. A size that
    depends on values (nonzero's, of `lgamma(|x| + 0.5) > 0` in f16) differs from eager's where
    a compiled program keeps f32 between the ops it fuses: |x| + 0.5 unrounded is 2.0005, and
    its lgamma is above 0."""
    if got.shape != reference.shape:
        return False
    tol = max(1e-3, 2 * _eps(got.dtype), 2 * rounding)  # (f32: 1e-3; bf16: two roundings)
    return torch.allclose(got.double(), reference.double(), rtol=tol, atol=tol, equal_nan=True)


def _largest(t: torch.Tensor) -> float:
    """The largest finite magnitude in `t` (0 for none): NaN and inf among the values, which
    the program may make, say nothing of the scale of its roundings."""
    finite = t.double().abs().nan_to_num(0.0, posinf=0.0, neginf=0.0)
    return finite.max().item() if finite.numel() else 0.0


def _eps(dtype: torch.dtype) -> float:
    """About one rounding of `dtype` (1e-7 for f32, 8e-3 for bf16), 0 for integers."""
    return torch.finfo(dtype).eps if dtype.is_floating_point else 0.0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python3 -m mind.tools.program_fuzz", description=__doc__.split("\n")[0]
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--count", type=int, default=200)
    p.add_argument("--dynamic", action="store_true", help="compile with sizes symbolic")
    p.add_argument("--train", action="store_true", help="also compare the inputs' gradients")
    p.add_argument("--json", type=Path, default=None, help="write every program's class as JSON")
    p.add_argument("--device", default="cpu", help="where eager and mind run (cpu, cuda)")
    args = p.parse_args(argv)
    results: dict[int, tuple[str, str]] = {}
    for s in range(args.seed, args.seed + args.count):
        results[s] = kind, detail = check(s, args.dynamic, args.train, args.device)
        if kind != "ok":
            print(f"program {s}: {kind}: {detail}\n  {generate(s)}", flush=True)
    counts = Counter(kind for kind, _ in results.values())
    print(", ".join(f"{k} {n}" for k, n in sorted(counts.items())))
    if args.json:
        args.json.write_text(json.dumps({str(s): list(r) for s, r in results.items()}, indent=1))
    return 0 if sum(counts[kind] for kind in NOT_AGAINST) == args.count else 1


if __name__ == "__main__":
    sys.exit(main())
