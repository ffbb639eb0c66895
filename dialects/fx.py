"""The fx dialect: the graph Dynamo hands a backend, with Python-level call targets.

    fx.graph @graph0 {guards = ["TENSOR_MATCH: L['a']"]} {
      %l_a_ = fx.placeholder @L_a_ : f32[4, 128][128, 1]cpu
      %add = fx.call_function @operator.add(%l_a_, %l_b_) : f32[4, 128][128, 1]cpu
      %sum_1 = fx.call_method @sum(%mul) {dim = -1} : f32[4][1]cpu
      fx.output((%sum_1,))
    }

Keyword arguments of a call are the op's attributes.
"""

from __future__ import annotations

import inspect
import keyword

import torch
import torch.fx
from mind.ir.constraints import STR, list_of
from mind.ir.core import Block, Operation, Region, Value
from mind.ir.diagnostics import MindError, located
from mind.ir.opdef import Op, arg, opt_attr, region, result, var_args
from mind.ir.registry import Dialect, VerifyError, register_dialect

from .pyobjects import ALLOWED_ROOTS, from_attr, qualified_name, resolve, to_attr, type_of


def _verify_target(op: Operation) -> None:
    root = op.symbol.split(".", 1)[0]
    if root not in ALLOWED_ROOTS:
        raise VerifyError(f"call target '@{op.symbol}' is outside the allowed modules", op.loc)


class FxGraph(Op):
    """One captured graph; `guards` are Dynamo's, as readable lines"""

    body = region()
    guards = opt_attr(list_of(STR))


class Node(Op):
    """A graph input (placeholder) or a module attribute (get_attr)"""

    result = result()


class FxCall(Op):
    """A call; keyword arguments are attributes"""

    values = var_args()
    result = result()


class FxMethodCall(Op):
    """Call a method on the first argument"""

    receiver = arg()
    values = var_args()
    result = result()


class FxOutput(Op):
    """The graph's result, as a structure of values"""

    value = arg()


FX = register_dialect(Dialect("fx"))
FX.add("graph", FxGraph, symbol=True, terminator="fx.output")
FX.add("placeholder", Node, symbol=True, summary="A graph input")
FX.add("get_attr", Node, symbol=True, summary="A module attribute (parameter, buffer, constant)")
FX.add("call_function", FxCall, symbol=True, open_attrs=True, verify=_verify_target,
       summary="Call a Python callable")  # fmt: skip
FX.add("call_method", FxMethodCall, symbol=True, open_attrs=True)
FX.add("call_module", FxCall, symbol=True, open_attrs=True, summary="Call a submodule")
FX.add("output", FxOutput)


def import_graph(gm: torch.fx.GraphModule, name: str, guards: list[str] | None = None) -> Operation:
    """A Dynamo GraphModule as an `fx.graph` op; types come from each node's example value."""
    block = Block()
    values: dict[torch.fx.Node, Value] = {}
    for node in gm.graph.nodes:
        if node.op == "output":
            block.append(Operation("fx.output", [to_attr(node.args[0], values)]))
            continue
        target = node.target if isinstance(node.target, str) else qualified_name(node.target)
        example = node.meta.get("example_value", node.meta.get("val"))
        op = Operation(
            f"fx.{node.op}",
            list(to_attr(node.args, values)),
            to_attr(dict(node.kwargs), values),
            [type_of(example)],
            [node.name],
            symbol=target,
        )
        values[node] = block.append(op).result
    attrs = {"guards": sorted(guards)} if guards else {}
    return Operation("fx.graph", attrs=attrs, regions=[Region(block)], symbol=name)


def export_graph(
    graph_op: Operation, attributes: dict[str, object] | None = None
) -> torch.fx.GraphModule:
    """Rebuild an executable GraphModule. `attributes` supplies the objects `get_attr` and
    `call_module` name (the text holds their types, not their data)."""
    attributes = dict(attributes or {})
    graph = torch.fx.Graph()
    nodes: dict[Value, torch.fx.Node] = {}
    for op in graph_op.body.ops:
        with located(op.loc):
            _export_op(op, graph, nodes, attributes)
    root = torch.nn.Module()
    for name, obj in attributes.items():
        setattr(root, name, obj)
    return torch.fx.GraphModule(root, graph)


def _export_op(op: Operation, graph: torch.fx.Graph, nodes: dict, attributes: dict) -> None:
    kind = op.name.split(".", 1)[1]
    if kind == "output":
        graph.output(from_attr(op.value, nodes))
        return
    if kind in ("get_attr", "call_module") and op.symbol not in attributes:
        raise MindError(
            f"'{op.name} @{op.symbol}' needs the object it names; pass it in `attributes`", op.loc
        )
    if kind in ("placeholder", "call_method") and not _is_identifier(op.symbol):
        raise MindError(f"'{op.name} @{op.symbol}' needs a Python identifier", op.loc)
    if kind == "placeholder" and op.symbol in {n.target for n in graph.find_nodes(op=kind)}:
        raise MindError(f"a second placeholder named '@{op.symbol}'", op.loc)
    target = resolve(op.symbol) if kind == "call_function" else op.symbol
    args, kwargs = tuple(from_attr(op.args, nodes)), from_attr(dict(op.attrs), nodes)
    if kind == "call_function":
        _check_call(op, target, args, kwargs)
    nodes[op.result] = graph.create_node(kind, target, args, kwargs, op.result.name)


def _check_call(op: Operation, target: object, args: tuple, kwargs: dict) -> None:
    """`target` is callable with these arguments, where Python can tell (`operator.add` takes
    two): fx writes the call as code, which would fail on the whole graph, far from the op."""
    if not callable(target):
        raise MindError(f"'@{op.symbol}' is not callable", op.loc)
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):  # a builtin or an operator overload without one
        return
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise MindError(f"'@{op.symbol}' cannot take these arguments: {exc}", op.loc) from None


def _is_identifier(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


def example_inputs(graph_op: Operation) -> list:
    """The types of the graph's placeholders, in order (what to build example inputs from)."""
    return [op.result.type for op in graph_op.body.ops if op.name == "fx.placeholder"]
