"""schedule, fuse and merge-loops: round trips, verification, and numerics.

The scheduled dialect has no evaluator of its own, so this file carries a small one (nodes run
vectorized over their (x, r) grid, reductions reduce the r dims, stores scatter into the
buffers' memory); each pass's output is checked against the loops evaluator on the input graph
and against eager PyTorch for captured programs.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import pytest
import sympy
import torch
import torch.nn.functional as F
from mind.analysis.deps import merge_dims, normalize_dep, reads
from mind.analysis.iteration import Join, join, refine
from mind.dialects.scheduled import Node
from mind.dialects.torch_types import to_torch
from mind.interpreters.loops import evaluate
from mind.interpreters.scheduled import evaluate as run_scheduled
from mind.ir.core import Module, Operation
from mind.ir.printer import print_module
from mind.ir.symbols import Mod, sym
from mind.ir.types import TensorType
from mind.parser import parse
from mind.passes import run_pipeline
from mind.passes.fuse import best_fusion, fuse_pair, legal_fusion, score, toposort
from mind.tools.split import split_input

LIT = Path(__file__).resolve().parent.parent / "lit_tests"
FUSE_INPUTS = ["fuse/fuse.loops", "fuse/refusals.loops", "fuse/reorder.loops", "fuse/scans.loops"]
INPUTS = ["schedule/schedule.loops", *FUSE_INPUTS]
INPUTS += ["merge_loops/merge_loops.loops", "merge_loops/after_fuse.loops"]
INPUTS += ["schedule/scatter.loops", "schedule/scans.loops", "schedule/dead.loops"]


def random_inputs(graph: Operation) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    out = []
    for arg in graph.body.args:
        t = arg.type
        assert isinstance(t, TensorType)
        x = torch.empty_strided(t.shape, t.strides, dtype=to_torch(t.dtype))
        if t.dtype.is_floating_point:
            out.append(x.copy_(torch.randn(t.shape, generator=gen)))
        else:  # small and non-negative: an index into any dim of 4 or more (a scatter's)
            out.append(x.copy_(torch.randint(0, 4, t.shape, generator=gen)))
    return out


def check_round_trip(module) -> str:
    text = print_module(module)
    assert print_module(parse(text)) == text
    return text


# -- every lit input through the three passes ------------------------------------------------
def _chunks() -> list:
    cases = []
    for name in INPUTS:
        for text, _ in split_input((LIT / name).read_text()):
            graph = parse(text).ops[0]
            # size symbols: the evaluators bind none (tests/test_loop_order.py runs them compiled)
            if all(isinstance(a.type, TensorType) for a in graph.body.args):
                cases.append(pytest.param(text, id=f"{name}:{graph.symbol}"))
    return cases


@pytest.mark.parametrize("text", _chunks())
def test_passes_round_trip_and_compute_the_same(text):
    module = parse(text)
    inputs = random_inputs(module.ops[0])
    expected = evaluate(module.ops[0], inputs)
    for step in ("schedule", "fuse", "merge-loops", "online-softmax"):
        module = run_pipeline(module, step)  # verifies after the pass
        check_round_trip(module)
        got = run_scheduled(module.ops[0], inputs)
        for g, e in zip(got, expected, strict=True):
            torch.testing.assert_close(g, e, msg=f"after {step}")


# -- captured programs: one kernel each --------------------------------------------------------
def _rms_norm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def _silu_mul(x):
    a, b = x.chunk(2, -1)
    return F.silu(a) * b


PROGRAMS = {
    "softmax": (lambda x: torch.softmax(x, -1), [(4, 128)]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (128,), w, b), [(4, 128), (128,), (128,)]),
    "rms_norm": (_rms_norm, [(4, 128), (128,)]),
    "gelu": (lambda x: F.gelu(x, approximate="tanh"), [(4, 128)]),
    "silu_mul": (_silu_mul, [(4, 256)]),
    # Dynamo makes y the first input (y.t() runs before the add): keep that order here
    "add_transpose": (lambda y, x: x + y.t(), [(128, 4), (4, 128)]),
    "seed": (lambda a, b, c: ((a + b) * c.relu()).sum(dim=-1), [(4, 128)] * 3),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_captured_program_is_one_kernel(name):
    import mind

    fn, shapes = PROGRAMS[name]
    gen = torch.Generator().manual_seed(1)
    inputs = [torch.randn(s, generator=gen) for s in shapes]
    module = mind.capture(fn, *inputs, stage="aten")
    module = run_pipeline(module, "lower,realize,inline,schedule,fuse,merge-loops")
    check_round_trip(module)
    graph = module.ops[0]
    assert [op.name for op in graph.body.ops].count("scheduled.node") == 1
    (got,) = run_scheduled(graph, [x.contiguous() for x in inputs])
    torch.testing.assert_close(got, fn(*inputs), rtol=1e-4, atol=1e-5)


# -- the pieces --------------------------------------------------------------------------------
def test_refine_and_join():
    assert refine([4, 128], [512]) == [4, 128]
    assert refine([4, 128], [8, 64]) == [4, 2, 64]
    assert refine([6, 4], [4, 6]) is None
    assert refine([4, 128], [256]) is None
    assert refine([0, 33, 2], [2, 0, 33]) is None  # no elements: no cut to divide by (700230)
    p0, p1, p2 = sym("p0"), sym("p1"), sym("p2")
    shared = join(([512], []), ([4], [128]))  # a pointwise of x*r elements into a reduction
    assert shared.sizes == ([4], [128])
    assert shared.first == {p0: 128 * p0 + p1}
    shared = join(([4], [128]), ([4], []))  # a per-row epilogue runs over x only
    assert shared.sizes == ([4], [128]) and shared.second == {p0: p0}
    shared = join(([8], [64]), ([4, 128], []))  # prologue over x*r, refined
    assert shared.sizes == ([4, 2], [64])
    assert shared.first == {p0: 2 * p0 + p1, p1: p2}
    assert shared.second == {p0: p0, p1: 64 * p1 + p2}
    assert join(([4], [128]), ([4, 64], [])) is None
    assert join(([4], [128]), ([4], [64])) is None


def test_normalize_dep_is_inductors():
    d0, d1, c0, c1 = (sym(n) for n in ("d0", "d1", "c0", "c1"))
    assert normalize_dep(("arg0_1", 128 * d0 + d1, {"d0": 4, "d1": 128})) == (
        "arg0_1",
        c0,
        {"c0": 512},
    )
    assert normalize_dep(("buf0", d0, {"d0": 4, "d1": 128})) == ("buf0", c0, {"c0": 4})
    assert normalize_dep(("w", d1, {"d0": 4, "d1": 128})) == ("w", c1, {"c0": 4, "c1": 128})
    assert normalize_dep(("s", 0, {})) == ("s", 0, {})


def test_merge_dims_needs_every_index():
    p0, p1, p2 = sym("p0"), sym("p1"), sym("p2")
    dims = [(p0, 2), (p1, 3), (p2, 4)]
    indexes, merged = merge_dims([12 * p0 + 4 * p1 + p2, p2], dims)
    assert merged == [(p1, 6), (p2, 4)] and indexes == [4 * p1 + p2, p2]
    indexes, merged = merge_dims([sympy.floor(p1 / 2) + 64 * p0], [(p0, 4), (p1, 128)])
    assert merged == [(p1, 512)] and indexes == [sympy.floor(p1 / 2)]


def _floor_by_zero(s0: sympy.Symbol) -> tuple[sympy.Expr, sympy.Expr]:
    """(index, inner size) with a Mod and floor by `floor(s0/16)`, 0 at the sample s0 = 3
    (HF ConvNeXt under dynamic shapes: merge-loops raised ZeroDivisionError)."""
    p1, w = sym("p1"), sympy.floor(s0 / 16)
    return Mod(p1, w) + w * sympy.floor(p1 / w) + 8 * sym("p0"), 2 * w


def _max_of_zoo(s0: sympy.Symbol) -> tuple[sympy.Expr, sympy.Expr]:
    """(index, inner size) with a stride `Max(1, floor(s0/floor(s0/4)))`, zoo inside a Max at the
    sample s0 = 3 (a patch embedding's backward under dynamic shapes, for a square image: sympy
    raised ValueError, "The argument 'zoo' is not comparable")."""
    p1, w = sym("p1"), sympy.floor(s0 / sympy.floor(s0 / 4))
    return Mod(p1, 4) * sympy.Max(1, w) + sympy.floor(p1 / 4) + 8 * sym("p0"), 4 * w


@pytest.mark.parametrize("case", [_floor_by_zero, _max_of_zoo])
def test_a_sample_where_the_index_is_undefined_is_no_counterexample(case):
    """A size sample that makes the index undefined says nothing; the symbolic test decides."""
    p0, p1 = sym("p0"), sym("p1")
    index, size = case(sym("s0"))
    indexes, merged = merge_dims([index], [(p0, 4), (p1, size)])
    assert merged == [(p0, 4), (p1, size)] and indexes == [index]


@pytest.mark.parametrize(
    "index",
    ["12*p0 + 4*p1 + p2", "12*p0 + 3*p1", "s0*p0 + p1", "4*s0*p0 + s0*p1 + 7", "s0*p0 + p1 + s1",
     "4*p0 + p1 + p0*p2", "p0 + p1", "Mod(4*p0 + p1, 8)", "floor(p1/2) + 2*p0", "5",
     "Mod(p1, 2) + 2*p0 + 8*floor(p1/2)", "16*p0 + Mod(p1, 2) + 2*Mod(floor(p1/2), 2)",
     "Mod(p1 + 3, 4) + 4*floor(p1/4) + 4*p0", "Mod(p1, s0) + s0*p0", "p2*floor(p1/4) + p0"],
)  # fmt: skip
def test_linear_indexes_merge_as_the_symbolic_test_says(index):
    """Merging (p0, p1), p1 of size 4 (of size s0 with `s0` in the index): linear indexes are
    decided by their coefficients, the others by a counterexample or by substitution; the same
    answers."""
    from mind.analysis.deps import _M1, _M2, _mergeable, equal

    p0, p1, s0 = sym("p0"), sym("p1"), sym("s0")
    expr = sympy.sympify(index, locals={n: sym(n) for n in ("p0", "p1", "p2", "s0", "s1")})
    size = s0 if s0 in expr.free_symbols else 4
    split = expr.xreplace({p0: _M1, p1: _M2})
    merged = expr.xreplace({p0: sympy.Integer(0), p1: _M1 * size + _M2})
    assert _mergeable(expr, p0, p1, size) == equal(split, merged)


#: indexes of reshapes (a ViT's patches and heads), whose Mod and floor sympy evaluates slowly
RESHAPED = [
    "75264*p0 + p2 + 384*Mod(p1 + 13, 14) + 5376*floor(p1/14 - 1/14)",
    "384*p0 + Mod(p1, 64) + 64*Mod(floor(p1/64), 6) + 2420736*floor(p1/384)",
    "s0*p1 + Mod(p0, s0) + p2**2",
]


@pytest.mark.parametrize("index", RESHAPED)
def test_renaming_index_variables_gives_what_substituting_gives(index):
    """p vars renamed d vars or q vars (both sorted before a size symbol `s0`, as p vars are):
    the expression substituting and simplifying gives, to its structure, built without
    evaluating its Mod and floor again."""
    from mind.analysis.loops import rename, renaming, simplify_index

    p = [sym(f"p{i}") for i in range(3)]
    expr = sympy.sympify(index, locals={n: sym(n) for n in ("p0", "p1", "p2", "s0")})
    for prefix in "dq":
        mapping = dict(zip(p, (sym(f"{prefix}{i}") for i in range(3))))
        names = renaming(expr, mapping)
        assert names is not None
        got = rename(simplify_index(expr), names)
        assert sympy.srepr(got) == sympy.srepr(simplify_index(expr.xreplace(mapping)))


@pytest.mark.parametrize(
    "index, simple",
    [
        ("64*floor(p0/64) + Mod(p0, 64)", "p0"),
        # two reshapes in a row ([.., 3, 6, 64] -> [.., 1152]): a floor of a floor
        ("384*floor(p1/384) + 64*Mod(floor(p1/64), 6) + Mod(p1, 64)", "p1"),
        (
            "226944*floor(p0/197) + 1152*Mod(p0, 197) + 384*floor(p1/384)"
            " + 64*Mod(floor(p1/64), 6) + Mod(p1, 64)",
            "1152*p0 + p1",
        ),
        # no partner: left as it is
        ("64*Mod(floor(p1/64), 6) + Mod(p1, 64)", "64*Mod(floor(p1/64), 6) + Mod(p1, 64)"),
    ],
)
def test_reshapes_fold_back_into_their_index(index, simple):
    """A reshape of a contiguous buffer leaves `c*floor(x/c) + Mod(x, c)`, which is x; so does a
    reshape of a reshape, whose floor of a floor is one floor (the ViT attention backward's
    q, k, v gradients, stacked and viewed as [6304, 1152], are a reinterpret)."""
    from mind.analysis.loops import simplify_index

    names = {n: sym(n) for n in ("p0", "p1")}
    got = simplify_index(sympy.sympify(index, locals=names))
    assert got == sympy.sympify(simple, locals=names)


def test_what_is_not_a_renaming():
    """Where evaluating again could change the form, `renaming` says no: a symbol to an
    expression, two to one, an order changed (among the renamed, or against a symbol left),
    other assumptions."""
    from mind.analysis.loops import renaming

    p0, p1, d0, d1, s0, x0 = (sym(n) for n in ("p0", "p1", "d0", "d1", "s0", "x0"))
    expr = Mod(p0 + 2 * p1, 5) + s0 * p0
    assert renaming(expr, {p0: d0, p1: d1}) == {p0: d0, p1: d1}
    assert renaming(expr, {p0: p1 + 1}) is None
    assert renaming(expr, {p0: d0, p1: d0}) is None
    assert renaming(expr, {p0: d1, p1: d0}) is None
    assert renaming(expr, {p0: x0, p1: sym("x1")}) is None  # s0 sorted after p0, before x0
    assert renaming(expr, {p0: d0, p1: sympy.Symbol("d1")}) is None


def test_greedy_picks_the_most_bytes_first():
    text = (LIT / "fuse/fuse.loops").read_text()
    softmax = next(t for t, _ in split_input(text) if "@softmax" in t)
    module = run_pipeline(parse(softmax), "schedule")
    a, b, _, _ = best_fusion(module.ops[0], max_parts=64)
    assert (a.symbol, b.symbol) == ("op1", "op2")  # buf1 dies with it: more bytes than op0+op1
    module = run_pipeline(module, "fuse{max-fusion-size=1}")
    assert "_op" not in print_module(module)


def rescanning_fuse(graph: Operation, max_parts: int = 64) -> None:
    """The greedy order spelled out: after each fusion, every pair again (best score, then the
    closest, then the earliest), and the whole graph re-sorted. `fuse` must agree with it."""
    block = graph.body
    while True:
        position = {op: i for i, op in enumerate(block.ops)}
        nodes = [op for op in block.ops if isinstance(op, Node)]
        read_sets = {op: set(reads(op)) for op in nodes}
        best, best_key = None, None
        for i, a in enumerate(nodes):
            for b in nodes[i + 1 :]:
                key = (score(a, b, block, read_sets), position[a] - position[b])
                if key[0] <= 0 or (best_key is not None and key <= best_key):
                    continue
                shared = legal_fusion(a, b, block, position, max_parts)
                if isinstance(shared, Join):
                    best, best_key = (a, b, shared), key
        if best is None:
            return
        fuse_pair(*best, block)
        toposort(block, 0, len(block.ops) - 1)


@functools.cache
def transformer_graphs() -> list[str]:
    """The scheduled graphs of a 2-layer transformer, inference and a training step."""
    sys.path.insert(0, str(LIT.parent))  # `benchmarks` is a plain folder at the repository root
    import mind
    from benchmarks.compile_phases import transformer

    texts = []
    for train in (False, True):
        torch.manual_seed(0)
        model = transformer(2, 16, 2, "softmax").train(train)
        x = torch.randn(2, 8, 16, requires_grad=train)
        with torch.set_grad_enabled(train):
            module = mind.capture(model, x, stage="aten")
        module = run_pipeline(module, "lower,realize,inline,schedule")
        texts += [str(Module([graph])) for graph in module.ops]
    return texts


@pytest.mark.parametrize("max_parts", [64, 3])
def test_fuse_takes_the_pairs_in_the_greedy_order(max_parts):
    chunks = [t for name in FUSE_INPUTS for t, _ in split_input((LIT / name).read_text())]
    scheduled = [print_module(run_pipeline(parse(t), "realize,inline,schedule")) for t in chunks]
    for text in scheduled + transformer_graphs():
        expected, got = parse(text), parse(text)
        for graph in expected.ops:
            rescanning_fuse(graph, max_parts)
        assert str(run_pipeline(got, f"fuse{{max-fusion-size={max_parts}}}")) == str(expected)
