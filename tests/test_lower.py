"""The lower pass: every program lowers without error, its output verifies and prints back
identically after a parse, ops without a lowering become fallback calls, and the lowerings
that the shared numerics suite does not reach compute what eager PyTorch computes."""

from __future__ import annotations

import glob
import os
from functools import cache

import pytest
import sympy
import torch
import torch.nn.functional as F
from mind.interpreters.loops import evaluate
from mind.ir.core import Module
from mind.ir.printer import print_module
from mind.ir.symbols import Mod, sym, symbol_hints
from mind.passes import run_pipeline
from mind.passes.lowerings import lowering_for
from mind.passes.lowerings.common import broadcast_index
from mind.passes.lowerings.views import reshape_index
from programs import PROGRAMS
from torch.testing import assert_close

import mind

LIT_INPUTS = sorted(
    p
    for p in glob.glob(os.path.join(os.path.dirname(__file__), "../lit_tests/lower/*.aten"))
    if not os.path.basename(p).startswith("invalid")  # inputs lowering rejects
)
p0, p1, p2 = sym("p0"), sym("p1"), sym("p2")


@cache
def lowered(name: str) -> Module:
    fn, make_inputs = PROGRAMS[name]
    torch.manual_seed(0)
    return run_pipeline(mind.capture(fn, *make_inputs(), stage="aten"), "lower")


def fallbacks(module: Module) -> list[str]:
    return [op.symbol for op in module.walk() if op.name == "loops.fallback"]


def assert_round_trip(module: Module) -> None:
    text = print_module(module)
    assert print_module(mind.parse(text)) == text


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_program_lowers_and_round_trips(name):
    module = lowered(name)
    assert module.dialect == "loops"
    assert_round_trip(module)
    assert fallbacks(module) == []  # every op of these programs has a lowering


@pytest.mark.parametrize("path", LIT_INPUTS, ids=os.path.basename)
def test_lit_inputs_round_trip(path):
    for chunk in open(path).read().split("// -----"):
        assert_round_trip(run_pipeline(mind.parse(chunk), "lower"))


def test_seed_nodes():
    """The seed fact: three pointwise nodes (add, relu, mul) and one reduction (sum), unrealized."""
    nodes = lowered("seed").ops[0].body.ops
    assert [(op.name, op.attrs["origins"]) for op in nodes[:-1]] == [
        ("loops.pointwise", ["add"]),
        ("loops.pointwise", ["relu"]),
        ("loops.pointwise", ["mul"]),
        ("loops.reduction", ["sum"]),
    ]
    assert all(op.result.type.strides is None for op in nodes[:-1])


def test_unknown_and_unsupported_ops_fall_back():
    text = """aten.graph @g(%arg0_1: f32[4, 3][3, 1]cpu, %arg1_1: b8[4][1]cpu) {
  %index = aten.index.Tensor(%arg0_1, [%arg1_1]) : f32[2, 3][3, 1]cpu
  %topk, %topk_1 = aten.topk.default(%arg0_1, 2) : f32[4, 2][2, 1]cpu, i64[4, 2][2, 1]cpu
  aten.output(%index, %topk)
}
"""
    module = run_pipeline(mind.parse(text), "lower")
    assert fallbacks(module) == ["aten.index.Tensor", "aten.topk.default"]
    ops = module.ops[0].body.ops
    assert [op.results[0].type.strides for op in ops[:2]] == [(3, 1), (2, 1)]
    assert_round_trip(module)


def test_registry_finds_overloads_and_packets():
    assert lowering_for("aten.add.Tensor") is lowering_for("aten.add.Scalar")
    assert lowering_for("aten.view.default") is not None
    assert lowering_for("aten.view.dtype") is None  # a bitcast, not a reindexing
    assert lowering_for("aten.topk.default") is None


def test_broadcast_index():
    assert broadcast_index((4, 1), [p0, p1]) == [p0, 0]
    assert broadcast_index((8,), [p0, p1]) == [p1]
    assert broadcast_index((), [p0]) == []


def test_broadcast_index_reads_element_0_of_a_dim_that_was_1_where_traced():
    """`clamp(x, min=x[: max(1, s0 // 2)])` traced at s0 = 3: the slice's rows, Max(1,
    floor(s0/2)), were 1, and Dynamo guards that; it read row p0 of the slice (found by the
    fuzzer: wrong values, no error). Without a hint for s0 nothing is assumed."""
    rows = sympy.Max(1, sympy.floor(sym("s0") / 2))
    with symbol_hints({"s0": 3}):
        assert broadcast_index((rows, 8), [p0, p1]) == [0, p1]
        assert broadcast_index((sym("s0"), 8), [p0, p1]) == [p0, p1]
    assert broadcast_index((rows, 8), [p0, p1]) == [p0, p1]


def test_reshape_index():
    assert reshape_index((2, 12), (2, 3, 4), [p0, p1, p2]) == [p0, 4 * p1 + p2]
    assert reshape_index((2, 3, 4), (2, 12), [p0, p1]) == [
        p0,
        sympy.floor(p1 / 4),
        Mod(p1, 4),
    ]
    assert reshape_index((4, 1, 8), (4, 8), [p0, p1]) == [p0, 0, p1]


def _f(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(len(shape)))


#: lowerings the numerics suite (tests/test_loops_numerics.py) does not reach; inputs are used in
#: argument order so that graph inputs line up with them
NUMERICS = {
    "as_strided": (lambda x: torch.as_strided(x @ x, (3, 2), (1, 4), 1) * 2, (_f(4, 4),)),
    "trunc_div": (
        lambda x, y: torch.div(x, y, rounding_mode="trunc"),
        (torch.arange(-10, 10).view(4, 5), torch.tensor([3, -2, 4, 1, -7])),
    ),
    "index_scattered": (
        lambda x, a, c: x[a, :, c] + 1,
        (_f(4, 5, 6), torch.tensor([0, -1]), torch.tensor([[1], [5]])),
    ),
    "max_dim_unbind": (lambda x: (*x.max(1), *x.unbind(0)), (_f(3, 4),)),
    "unfold": (lambda x: (x.unfold(1, 3, 2) * 2, x.unfold(-1, 2, 3).sum(-1)), (_f(4, 7, 5),)),
    "pad_crop": (lambda x: F.pad(x, (-1, 2, 1, -1), value=3.0), (_f(4, 5),)),
    "masked_fill_shift": (lambda x: (x.masked_fill(x > 0, -1.0), (x > 0).int() << 2), (_f(3, 4),)),
    "index_select_split": (
        lambda x, i: (x.index_select(1, i), *x.split([2, 3], 1)),
        (_f(3, 5), torch.tensor([4, 0, 4])),
    ),
}


@pytest.mark.parametrize("name", list(NUMERICS))
def test_numerics(name):
    fn, inputs = NUMERICS[name]
    module = run_pipeline(mind.capture(fn, *inputs, stage="aten"), "lower")
    assert fallbacks(module) == []
    got = evaluate(module.ops[0], list(inputs))
    expected = fn(*inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for g, e in zip(got, expected, strict=True):
        assert_close(g, e, check_stride=False)


def test_an_addmm_split_into_mm_and_bias_computes_what_addmm_does():
    """lit_tests/lower/addmm.aten's @scaled lowers to an ATen mm and a pointwise
    `beta * bias + alpha * mm` (its types say cuda; the evaluator runs it on the CPU)."""
    with open(os.path.join(os.path.dirname(__file__), "../lit_tests/lower/addmm.aten")) as f:
        chunk = f.read().split("// -----")[1]
    module = run_pipeline(mind.parse(chunk), "lower")
    assert [op.symbol for op in module.walk() if op.name == "loops.extern"] == ["aten.mm.default"]
    gen = torch.Generator().manual_seed(0)
    bias, a, b = (torch.randn(*s, generator=gen) for s in ((1, 32), (8, 16), (16, 32)))
    (out,) = evaluate(module.ops[0], [bias, a, b])
    assert_close(out, torch.addmm(bias, a, b, beta=0.5, alpha=2.0).relu())


def test_rounding_an_integer_is_the_integer():
    """floor, ceil, round and trunc of an integer are no op (Triton has them for floats only:
    the verifier refuses them on an i64)."""
    from programs import compile_strictly

    fn = lambda i: (i.floor(), i.ceil() * 2, i.round(), i.to(torch.int8).trunc())  # noqa: E731
    i = torch.randint(-10, 10, (6, 5))
    ops = {op.name for op in run_pipeline(mind.capture(fn, i, stage="aten"), "lower").walk()}
    assert not ops & {"loops.floor", "loops.ceil", "loops.round", "loops.trunc"}
    for got, want in zip(compile_strictly(fn, i), fn(i)):
        assert got.dtype == want.dtype and torch.equal(got, want)
