"""fx and aten text captured from varied programs prints, parses and prints back identically, and a
rebuilt ATen GraphModule computes what the original function computes."""

from __future__ import annotations

import inspect

import pytest
import torch
from mind.dialects import aten, fx
from mind.ir.types import SymType
from programs import PROGRAMS

import mind


def _flat(out):
    return list(out) if isinstance(out, tuple | list) else [out]


@pytest.mark.parametrize("name", PROGRAMS)
@pytest.mark.parametrize("stage", ["fx", "aten"])
def test_round_trip(name, stage):
    fn, make = PROGRAMS[name]
    text = str(mind.capture(fn, *make(), stage=stage))
    assert f"{stage}.graph" in text
    assert str(mind.parse(text, f"{name}.{stage}")) == text


@pytest.mark.parametrize("stage", ["fx", "aten"])
def test_round_trip_symbolic_sizes(stage):
    fn, make = PROGRAMS["seed"]
    text = str(mind.capture(fn, *make(), stage=stage, dynamic=True))
    assert "sym(s" in text and "f32[s" in text
    assert str(mind.parse(text)) == text


def graph_inputs(fn, inputs: tuple) -> list:
    """The inputs in the order Dynamo gave its placeholders (first use, not the signature's)."""
    by_name = dict(zip(inspect.signature(fn).parameters, inputs))
    (graph,) = mind.capture(fn, *inputs).ops
    return [by_name[op.symbol[2:-1]] for op in graph.body.ops if op.name == "fx.placeholder"]


@pytest.mark.parametrize("name", PROGRAMS)
def test_rebuilt_aten_graph_computes_the_function(name):
    fn, make = PROGRAMS[name]
    inputs = make()
    module = mind.parse(str(mind.capture(fn, *inputs, stage="aten")))
    (graph,) = module.ops
    got = aten.export_graph(graph)(*graph_inputs(fn, inputs))
    torch.testing.assert_close(_flat(got), _flat(fn(*inputs)))


def test_rebuilt_symbolic_aten_graph_takes_sizes():
    fn, make = PROGRAMS["seed"]
    inputs = make()
    (graph,) = mind.parse(str(mind.capture(fn, *inputs, stage="aten", dynamic=True))).ops
    sizes = {str(s): n for s, n in zip(graph.body.args[-1].type.shape, inputs[0].shape)}
    args = [
        sizes[str(a.type.expr)] if isinstance(a.type, SymType) else None for a in graph.body.args
    ]
    tensors = iter(inputs)
    args = [next(tensors) if a is None else a for a in args]
    torch.testing.assert_close(aten.export_graph(graph)(*args)[0], fn(*inputs))


def test_capture_keeps_every_graph_of_a_graph_break():
    def fn(x):
        y = x.sin()
        torch._dynamo.graph_break()
        return y.cos()

    module = mind.capture(fn, torch.randn(3))
    assert [op.symbol for op in module.ops] == ["graph0", "graph1"]


@pytest.mark.parametrize("name", ["seed", "views", "multiple_outputs", "cat_where"])
def test_rebuilt_fx_graph_computes_the_function(name):
    fn, make = PROGRAMS[name]
    inputs = make()
    (graph,) = mind.parse(str(mind.capture(fn, *inputs))).ops
    got = fx.export_graph(graph)(*graph_inputs(fn, inputs))
    torch.testing.assert_close(_flat(got), _flat(fn(*inputs)))


def test_fx_targets_resolve_only_inside_the_allow_list():
    text = """fx.graph @g {
  %l_x_ = fx.placeholder @L_x_ : f32[2][1]cpu
  %r = fx.call_function @os.system(%l_x_) : f32[2][1]cpu
  fx.output((%r,))
}
"""
    with pytest.raises(mind.MindError, match="outside the allowed modules") as info:
        mind.parse(text, "evil.fx")
    assert info.value.loc.line == 3
