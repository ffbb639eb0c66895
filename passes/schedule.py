"""schedule: loops -> scheduled. Each realized node becomes a scheduler node (Inductor's
SchedulerNode) whose body ends in an explicit `scheduled.reduction` and `scheduled.store`, with
its iteration sizes `([x], [r])` and MemoryDeps; extern and fallback calls become
`scheduled.extern`. Size-1 loops are dropped (their variable is 0), as Inductor's loop
simplification does, so that nodes over `[4, 1]` and `[4]` iterate alike.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import sympy
from mind.dialects.loops import is_buffer, is_realized
from mind.ir.core import Block, Module, Operation, Region, Value, map_values
from mind.ir.diagnostics import MindError
from mind.ir.symbols import IntLike, as_int_like
from mind.ir.types import ScalarType, TensorType

from .deps import INDEX_ARGS, Dep, buffer_dep, kind, set_node_deps, split_reads
from .loops_utils import pvar, substitute
from .manager import Pass, register_pass
from .reinterpret import alias_of


def copy_body_op(
    op: Operation, vmap: dict[Value, Value], reindex: Callable[[IntLike], IntLike]
) -> Operation:
    """`op` as a scheduled body op: values through `vmap`, index expressions through `reindex`."""
    args = map_values(op.args, lambda v: vmap.get(v, v))
    if kind(op) in INDEX_ARGS:
        args[INDEX_ARGS[kind(op)]] = reindex(args[INDEX_ARGS[kind(op)]])
    new = Operation(
        f"scheduled.{kind(op)}",
        args,
        map_values(op.attrs, lambda v: vmap.get(v, v)),
        [r.type for r in op.results],
        [r.name for r in op.results],
        loc=op.loc,
    )
    vmap.update(zip(op.results, new.results))
    return new


def renumber(ops: list[Operation]) -> list[Operation]:
    """Name body values %0, %1, ... in order."""
    values = [r for op in ops for r in op.results]
    for i, value in enumerate(values):
        value.name = str(i)
    return ops


def _check_loads(op: Operation) -> None:
    for body_op in op.body.ops:
        if kind(body_op) == "load" and not is_buffer(body_op.args[0]):
            raise MindError(
                f"schedule needs realized, inlined loops: '{op.result.name}' loads "
                f"'%{body_op.args[0].name}', which is not a buffer (run realize,inline first)",
                body_op.loc,
            )


def _node(op: Operation, vmap: dict[Value, Value], number: int) -> Operation:
    """A pointwise or reduction node: its body stores the element (or the reduced value)."""
    if not is_realized(op):
        raise MindError(
            f"schedule needs realized loops: '%{op.result.name}' is not a buffer "
            "(run realize,inline first)",
            op.loc,
        )
    _check_loads(op)
    t = op.result.type
    assert isinstance(t, TensorType)
    xs, rs = list(t.shape), list(op.attrs.get("reduction_ranges", []))
    dims = xs + rs
    kept = [k for k, s in enumerate(dims) if s != 1]
    drop = {pvar(k): (pvar(kept.index(k)) if k in kept else 0) for k in range(len(dims))}
    body_map: dict[Value, Value] = dict(vmap)
    ops = [copy_body_op(b, body_map, lambda e: substitute(e, drop)) for b in op.body.ops[:-1]]
    for load in ops:  # a load from a reinterpret reads its buffer
        alias = alias_of(load.args[0]) if kind(load) == "load" else None
        if alias is not None:
            base, offset = alias
            load.args[:2] = [base, substitute(offset + sympy.sympify(load.args[1]), {})]
    value = body_map[op.body.terminator.args[0]]
    if rs:
        red = Operation(
            "scheduled.reduction",
            [value],
            {"reduction_type": op.attrs["reduction_type"]},
            [ScalarType(t.dtype)],
        )
        ops.append(red)
        value = red.result
    index = sum((pvar(k) * s for k, s in enumerate(t.strides)), start=sympy.Integer(0))
    store_index = substitute(as_int_like(index), drop)
    ops.append(Operation("scheduled.store", [op.result.name, store_index, value]))
    sizes = ([s for s in xs if s != 1], [s for s in rs if s != 1])
    attrs = {"sizes": sizes, "device": t.device, "origins": list(op.attrs.get("origins", []))}
    node = Operation(
        "scheduled.node",
        attrs=attrs,
        result_types=[t],
        result_names=[op.result.name],
        regions=[Region(Block(ops=renumber(ops)))],
        symbol=f"op{number}",
        loc=op.loc,
    )
    set_node_deps(node)
    return node


def _extern(op: Operation, vmap: dict[Value, Value]) -> Operation:
    """An extern or fallback call: it reads and writes whole buffers."""
    args = map_values(op.args, lambda v: vmap.get(v, v))
    attrs = {k: map_values(v, lambda x: vmap.get(x, x)) for k, v in op.attrs.items()}
    attrs.pop("layout", None)
    attrs.pop("input_strides", None)  # the argument buffers' types hold the layouts by now
    new = Operation(
        "scheduled.extern",
        args,
        attrs,
        [r.type for r in op.results],
        [r.name for r in op.results],
        symbol=op.symbol,
        loc=op.loc,
    )
    tensors = [v for v in new.operands if isinstance(v.type, TensorType)]
    met, unmet = split_reads([_read_dep(v) for v in tensors])
    new.attrs["writes"] = [buffer_dep(r) for r in new.results if isinstance(r.type, TensorType)]
    new.attrs["unmet"], new.attrs["met"] = unmet, met
    return new


def _read_dep(value: Value) -> tuple[Value, Dep]:
    """The buffer a call reads for `value` and the dep: a reinterpret reads its buffer's memory
    at its offset and strides."""
    alias = alias_of(value)
    if alias is None:
        return value, buffer_dep(value)
    base, offset = alias
    name, index, ranges = buffer_dep(value)
    return base, (base.name, substitute(offset + sympy.sympify(index), {}), ranges)


def _copy(name: str, drop: tuple[str, ...] = ()) -> Callable[[Operation, dict], Operation]:
    """Convert an op as is, without the attributes in `drop`."""

    def convert(op: Operation, vmap: dict[Value, Value]) -> Operation:
        return Operation(
            name,
            map_values(op.args, lambda v: vmap.get(v, v)),
            {k: v for k, v in op.attrs.items() if k not in drop},
            [r.type for r in op.results],
            [r.name for r in op.results],
            symbol=op.symbol,
            loc=op.loc,
        )

    return convert


#: how each top-level loops op becomes scheduled IR (pointwise and reduction are numbered)
CONVERSIONS: dict[str, Callable[[Operation, dict[Value, Value]], Operation]] = {
    "loops.extern": _extern,
    "loops.fallback": _extern,
    "loops.constant_tensor": _copy("scheduled.constant_tensor"),
    # an alias, not a kernel: its operand keeps the buffer ordered before its readers
    "loops.reinterpret": _copy("scheduled.reinterpret"),
    # the outputs' strides are in their buffers' types by now
    "loops.output": _copy("scheduled.output", drop=("strides",)),
}


def schedule_graph(graph: Operation) -> Operation:
    """One loops.graph as a scheduled.graph."""
    args = [Value(a.name, a.type) for a in graph.body.args]
    vmap = dict(zip(graph.body.args, args))
    block = Block(args)
    count = 0
    for op in graph.body.ops:
        if op.name in ("loops.pointwise", "loops.reduction"):
            new = _node(op, vmap, count)
            count += 1
        elif op.name in CONVERSIONS:
            new = CONVERSIONS[op.name](op, vmap)
        else:
            raise MindError(
                f"schedule cannot place '{op.name}' (run realize,inline first: views and "
                "unrealized nodes must be gone)",
                op.loc,
            )
        vmap.update(zip(op.results, new.results))
        block.append(new)
    return Operation(
        "scheduled.graph",
        attrs=dict(graph.attrs),
        regions=[Region(block)],
        symbol=graph.symbol,
        loc=graph.loc,
    )


@register_pass
@dataclass(frozen=True)
class Schedule(Pass):
    name = "schedule"
    input = "loops"
    output = "scheduled"
    summary = "one scheduler node per buffer, with sizes and MemoryDeps"

    def run(self, module: Module) -> Module:
        return Module([schedule_graph(g) for g in module.ops])
