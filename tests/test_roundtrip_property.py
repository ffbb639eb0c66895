"""Property tests: generated IR prints and parses back to the same text (custom and generic
forms), and no mangled text makes the parser raise anything but a located MindError."""

from __future__ import annotations

import math

import sympy
from hypothesis import given, settings
from hypothesis import strategies as st
from mind.ir import Block, Module, Operation, Region, TensorType, Value, print_module, sym
from mind.ir.attributes import PyRef
from mind.ir.dtypes import DTYPES, Device
from mind.ir.symbols import Mod
from mind.ir.types import ScalarType, SymType

import mind

names = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)
symbols = st.sampled_from(["p0", "p1", "s0", "d0", "x"]).map(sym)
exprs = st.recursive(
    st.integers(-50, 50).map(sympy.Integer) | symbols,
    lambda inner: (
        st.tuples(inner, inner).map(lambda ab: ab[0] + ab[1])
        | st.tuples(st.integers(-9, 9), inner).map(lambda ab: ab[0] * ab[1])
        | st.tuples(inner, st.integers(1, 9)).map(lambda ab: sympy.floor(ab[0] / ab[1]))
        | st.tuples(inner, st.integers(1, 9)).map(lambda ab: Mod(ab[0], ab[1]))
    ),
    max_leaves=6,
).map(lambda e: int(e) if e.is_Integer else e)
floats = st.floats(allow_nan=True, allow_infinity=True)
scalars = (
    st.integers(-(2**40), 2**40)
    | floats
    | st.booleans()
    | st.none()
    | st.text(max_size=8)
    | st.sampled_from(list(DTYPES.values()))
    | st.sampled_from([Device("cpu"), Device("cuda", 0)])
    | st.sampled_from([PyRef("torch.strided"), PyRef("operator.add")])
    | exprs
)
attrs = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(names, inner, max_size=3)
    ),
    max_leaves=8,
)
sizes = st.lists(st.integers(0, 64) | symbols, max_size=3).map(tuple)
dtypes = st.sampled_from(list(DTYPES.values()))


@st.composite
def types(draw):
    shape = draw(sizes)
    strides = draw(st.none() | st.just(tuple(range(len(shape)))))
    device = draw(st.none() | st.sampled_from([Device("cpu"), Device("cuda", 0)]))
    return draw(
        st.sampled_from(
            [
                TensorType(draw(dtypes), shape, strides, device),
                ScalarType(draw(dtypes)),
                SymType(draw(exprs)),
            ]
        )
    )


@st.composite
def graphs(draw):
    """An aten.graph of aten.call ops with random attributes, arguments and types."""
    block = Block([Value(f"arg{i}", draw(types())) for i in range(draw(st.integers(0, 3)))])
    visible = list(block.args)
    for i in range(draw(st.integers(0, 5))):
        args = draw(st.lists(attrs | (st.sampled_from(visible) if visible else attrs), max_size=4))
        op = Operation(
            "aten.call",
            args,
            draw(st.dictionaries(names, attrs, max_size=3)),
            [draw(types())],
            [f"v{i}"],
            symbol="operator.add",
        )
        visible.append(block.append(op).result)
    block.append(
        Operation(
            "aten.output", draw(st.lists(st.sampled_from(visible), max_size=2)) if visible else []
        )
    )
    return Module([Operation("aten.graph", regions=[Region(block)], symbol=draw(names))])


def _same(a, b) -> bool:
    """Equality that sees NaN as NaN and looks inside containers."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, list | tuple) and type(a) is type(b):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b if not isinstance(a, sympy.Expr) else a == b


@settings(max_examples=150, deadline=None)
@given(graphs())
def test_generated_ir_round_trips(module):
    text = print_module(module)
    assert print_module(mind.parse(text)) == text
    generic = print_module(module, generic=True)
    assert print_module(mind.parse(generic), generic=True) == generic
    assert print_module(mind.parse(generic)) == text


@settings(max_examples=200, deadline=None)
@given(attrs)
def test_attribute_values_survive_the_text(value):
    op = Operation("aten.call", [value], symbol="operator.add")
    graph = Operation(
        "aten.graph", regions=[Region(Block(ops=[op, Operation("aten.output")]))], symbol="f"
    )
    parsed = mind.parse(print_module(Module([graph]))).ops[0].body.ops[0].args[0]
    assert _same(parsed, value), (parsed, value)


SEED = """aten.graph @f(%a: f32[4, 128][128, 1]cpu, %b: f32[4, 128][128, 1]cpu) {
  %add = aten.add.Tensor(%a, %b) : f32[4, 128][128, 1]cpu
  %sum_1 = aten.sum.dim_IntList(%add, [-1]) : f32[4][1]cpu
  aten.output(%sum_1)
}
"""


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, len(SEED) - 1),
    st.integers(0, 8),
    st.text(alphabet='%@{}()[],:=!"^ a1.-\n', max_size=3),
)
def test_mangled_text_gives_located_errors(pos, cut, insert):
    text = SEED[:pos] + insert + SEED[pos + cut :]
    try:
        mind.parse(text, "fuzz.aten")
    except mind.MindError as exc:
        assert exc.loc is None or exc.loc.file == "fuzz.aten"
        assert exc.render()
