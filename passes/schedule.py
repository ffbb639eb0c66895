"""schedule: loops -> scheduled. Each realized node becomes a scheduler node (Inductor's
SchedulerNode) whose body ends in an explicit `scheduled.reduction` (a `scheduled.scan`, a
`scheduled.sort`) and `scheduled.store`, with its iteration sizes `([x], [r])` and MemoryDeps;
extern and fallback calls become `scheduled.extern`; collectives stay themselves
(`scheduled.all_reduce`). A scan or sort runs its axis as the r loop (its other dims are the x
loops), storing along it. A node whose buffer nothing reads is dropped, as Inductor's scheduler
drops dead nodes. Size-1 loops are dropped (their variable is 0), as Inductor's loop
simplification does, so that nodes over `[4, 1]` and `[4]` iterate alike.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import sympy
from mind.analysis.deps import INDEXED, Dep, buffer_dep, readers, set_node_deps, split_reads
from mind.analysis.loops import flat_offset, pvar, substitute
from mind.analysis.views import alias_of
from mind.dialects.collectives import KINDS
from mind.dialects.common import converted_graph, is_graph_input
from mind.dialects.loops import (
    Constant,
    Load,
    LoopsCall,
    Pointwise,
    Reduction,
    Scan,
    Scatter,
    Sort,
    is_buffer,
    is_realized,
)
from mind.dialects.reductions import REDUCTIONS
from mind.dialects.scans import SCANS
from mind.dialects.scheduled import Node, Store, overwritten_inputs
from mind.dialects.scheduled import Reduction as Reduce
from mind.dialects.scheduled import Scan as ScanOp
from mind.dialects.scheduled import Sort as SortOp
from mind.ir import dtypes as dt
from mind.ir.core import Block, Operation, Region, Value
from mind.ir.diagnostics import MindError
from mind.ir.symbols import IntLike, as_int_like
from mind.ir.types import ScalarType, TensorType

from .manager import GraphPass


def copy_body_op(
    op: Operation, vmap: dict[Value, Value], reindex: Callable[[IntLike], IntLike]
) -> Operation:
    """`op` as a scheduled body op: values through `vmap`, index expressions through `reindex`."""
    new = op.clone(vmap, f"scheduled.{op.kind}")
    if isinstance(new, INDEXED):
        new.index = reindex(new.index)
    return new


def renumber(ops: list[Operation]) -> list[Operation]:
    """Name body values %0, %1, ... in order."""
    values = [r for op in ops for r in op.results]
    for i, value in enumerate(values):
        value.name = str(i)
    return ops


def _check_inlined(op: Pointwise | Scatter) -> None:
    """A node schedule can place: a buffer whose body loads buffers only."""
    if not is_realized(op):
        raise MindError(
            f"schedule needs realized loops: '%{op.result.name}' is not a buffer "
            "(run realize,inline first)",
            op.loc,
        )
    for body_op in op.body.ops:
        if isinstance(body_op, Load) and not is_buffer(body_op.source):
            raise MindError(
                f"schedule needs realized, inlined loops: '{op.result.name}' loads "
                f"'%{body_op.source.name}', which is not a buffer (run realize,inline first)",
                body_op.loc,
            )


def _node(op: Pointwise, vmap: dict[Value, Value], number: int) -> Node:
    """A pointwise, reduction, scan or sort node: its body stores the element (the reduced
    value; the scanned or sorted value at its place along the r loop)."""
    _check_inlined(op)
    t = op.result.type
    xs, rs, order = _iteration(op)
    trivial = _trivial(op, ScalarType(t.dtype)) if rs else None
    if trivial is not None:  # over no element, or an index kind over one: no loop to run
        xs, rs, order = list(t.shape), [], list(range(t.rank))
    template = getattr(op, "template", None)
    node, drop = _start_node(op, vmap, number, xs, rs, order, template=template)
    if isinstance(trivial, Operation):
        ops, value = [trivial], trivial.result
    else:
        ops, value = _body(op, vmap, drop)
        if rs and math.prod(rs) != 1:  # (over one element, the body's value is the result)
            along = ALONG_R[type(op)](op, value, ScalarType(t.dtype))
            ops.append(along)
            value = along.results[_result_of(op)]
    index = sum((pvar(k) * s for k, s in enumerate(t.strides)), start=sympy.Integer(0))
    store_index = substitute(as_int_like(index), drop)
    ops.append(Store.build("scheduled.store", buffer=node.result, index=store_index, value=value))
    return _finish_node(node, ops)


def _scatter_node(op: Scatter, vmap: dict[Value, Value], number: int) -> Node:
    """A scatter: a node over its ranges that updates its target's buffer in place, its store at
    the (indirect) flat offset the target's strides give, with the scatter's mode. A scatter
    into a graph input is a node that stores into the input itself, producing no buffer."""
    _check_inlined(op)
    target = vmap[op.target]
    if is_graph_input(op.target):
        node, drop = _start_node(op, vmap, number, *_iteration(op), results=False)
        vmap[op.result] = target
    else:
        node, drop = _start_node(op, vmap, number, *_iteration(op), updates=target)
        target = node.result
    ops, value = _body(op, vmap, drop)
    term = op.body.terminator
    index = substitute(flat_offset(op.result, term.index), drop)
    indirect = [vmap[v] for v in term.indirect or []] or None
    ops.append(
        Store.build(
            "scheduled.store",
            buffer=target,
            index=index,
            value=value,
            indirect=indirect,
            mode=op.mode,
            loc=term.loc,
        )
    )
    return _finish_node(node, ops)


def _start_node(
    op: Pointwise | Scatter,
    vmap: dict[Value, Value],
    number: int,
    xs: list,
    rs: list,
    order: list[int],
    results: bool = True,
    **fields,
) -> tuple[Node, dict]:
    """The empty node `@op<number>` for `op`, over its x then r loops less those of size 1, and
    the substitution that drops them (their variable is 0, the others renumbered). `order[k]`
    is the body variable of `op` that the node's loop k runs. Its result is `op`'s buffer,
    unless `results` is off (it stores into a graph input)."""
    dims = xs + rs
    kept = [k for k, s in enumerate(dims) if s != 1]
    drop = {pvar(order[k]): (pvar(kept.index(k)) if k in kept else 0) for k in range(len(dims))}
    t = op.result.type
    node = Node.build(
        "scheduled.node",
        sizes=([s for s in xs if s != 1], [s for s in rs if s != 1]),
        device=t.device,
        origins=list(op.origins or []),
        results=[t] if results else [],
        names=[op.result.name] if results else [],
        regions=[Region()],
        symbol=f"op{number}",
        loc=op.loc,
        **fields,
    )
    if results:
        vmap[op.result] = node.result
    return node, drop


def _finish_node(node: Node, ops: list[Operation]) -> Node:
    """`node` with its body ops (numbered %0, %1, ...) and the MemoryDeps they give."""
    for body_op in renumber(ops):
        node.body.append(body_op)
    set_node_deps(node)
    return node


def _body(op: Pointwise, vmap: dict[Value, Value], drop: dict) -> tuple[list[Operation], Value]:
    """The node body's ops, copied with size-1 loop variables dropped, and the value it yields."""
    ops = [copy_body_op(b, vmap, lambda e: substitute(e, drop)) for b in op.body.ops[:-1]]
    for load in ops:  # a load from a reinterpret reads its buffer
        alias = alias_of(load.source) if isinstance(load, Load) else None
        if alias is not None:
            base, offset = alias
            load.source = base
            load.index = substitute(offset + sympy.sympify(load.index), {})
    return ops, vmap[op.body.terminator.value]


def _iteration(op: Pointwise | Scatter) -> tuple[list[IntLike], list[IntLike], list[int]]:
    """The node's x and r sizes, and for each of its loops (x then r) the body variable of the
    loops node it runs: a scan or a sort runs its axis as the r loop, a scatter its ranges, a
    pointwise node its dims in memory order."""
    if isinstance(op, Scatter):
        ranges = list(op.ranges)
        return ranges, [], list(range(len(ranges)))
    shape = list(op.result.type.shape)
    if isinstance(op, Reduction):
        rs = list(op.reduction_ranges)
        return shape, rs, list(range(len(shape) + len(rs)))
    if isinstance(op, Scan | Sort):
        order = [d for d in range(len(shape)) if d != op.axis] + [op.axis]
        return [shape[d] for d in order[:-1]], [shape[op.axis]], order
    order = memory_order(op.result.type)
    return [shape[d] for d in order], [], order


def memory_order(t: TensorType) -> list[int]:
    """The dims of a buffer from the one with the largest stride to the smallest (the order its
    elements lie in memory; ties and symbolic strides keep their places): a pointwise node runs
    its loops so, storing contiguously, as Inductor orders a node's loops by its memory accesses
    (a channels-last result runs N, H, W, C)."""
    dims = list(range(t.rank))
    if not all(isinstance(s, int) for s in t.strides):
        return dims
    return sorted(dims, key=lambda d: -t.strides[d])


def _trivial(op: Pointwise, t: ScalarType) -> Operation | bool | None:
    """What a node over no element or one along its r loop gives, where that needs no loop: the
    neutral value (a sum of nothing is 0), a position 0 (an index kind, a sort's indices), or
    True where the body's value is the element (a scan or sort of one element, or of none: an
    empty result); None where the ranges are not that small (or a reduction's single element
    is the body's value)."""
    if isinstance(op, Scan | Sort):
        size = op.result.type.shape[op.axis]
        if not isinstance(size, int) or size > 1:
            return None
        index = op.output == "indices" if isinstance(op, Sort) else SCANS[op.scan_type].is_index
        return Constant.build("scheduled.constant", value=0, results=[t]) if index else True
    kind, count = REDUCTIONS[op.reduction_type], math.prod(op.reduction_ranges)
    if count == 0 and kind.empty_is_neutral:
        return Constant.build("scheduled.constant", value=kind.neutral(t.dtype), results=[t])
    if count == 1 and kind.is_index:
        return Constant.build("scheduled.constant", value=0, results=[t])
    return None


def _result_of(op: Pointwise) -> int:
    """Which result of its closing op (ALONG_R) a node stores: a sort's values or indices."""
    return int(isinstance(op, Sort) and op.output == "indices")


#: what ends a node's body with r loops, by loops node: the op that takes the row
ALONG_R: dict[type, Callable[[Operation, Value, ScalarType], Operation]] = {
    Reduction: lambda op, value, t: Reduce.build(
        "scheduled.reduction", value=value, reduction_type=op.reduction_type, results=[t]
    ),
    Scan: lambda op, value, t: ScanOp.build(
        "scheduled.scan", value=value, scan_type=op.scan_type, results=[t]
    ),
    Sort: lambda op, value, t: SortOp.build(
        "scheduled.sort",
        value=value,
        descending=op.descending,
        results=[value.type, ScalarType(dt.i64)],
    ),
}


def _extern(op: LoopsCall, vmap: dict[Value, Value]) -> Operation:
    """An extern or fallback call: it reads and writes whole buffers."""
    new = _copy(op, vmap, "scheduled.extern", ("layout", "input_strides"))
    tensors = [v for v in new.operands if isinstance(v.type, TensorType)]
    met, unmet = split_reads([_read_dep(v) for v in tensors])
    new.writes = [buffer_dep(r) for r in new.results if isinstance(r.type, TensorType)]
    new.unmet, new.met = unmet, met
    return new


def _read_dep(value: Value) -> tuple[Value, Dep]:
    """The buffer a call reads for `value` and the dep: a reinterpret reads its buffer's memory
    at its offset and strides."""
    alias = alias_of(value)
    if alias is None:
        return value, buffer_dep(value)
    base, offset = alias
    _, index, ranges = buffer_dep(value)
    return base, (base, substitute(offset + sympy.sympify(index), {}), ranges)


def _copy(op: Operation, vmap: dict[Value, Value], name: str, drop: tuple[str, ...] = ()):
    """`op` as the scheduled op `name`, without the attributes in `drop`."""
    new = op.clone(vmap, name)
    for key in drop:
        new.del_attr(key)
    return new


#: how each top-level loops op becomes scheduled IR (pointwise and reduction are numbered)
AS_SCHEDULED: dict[str, Callable[[Operation, dict[Value, Value]], Operation]] = {
    "loops.extern": _extern,
    "loops.fallback": _extern,
    "loops.constant_tensor": lambda op, vmap: _copy(op, vmap, "scheduled.constant_tensor"),
    # an alias, not a kernel: its operand keeps the buffer ordered before its readers
    "loops.reinterpret": lambda op, vmap: _copy(op, vmap, "scheduled.reinterpret"),
    # the outputs' strides are in their buffers' types by now
    "loops.output": lambda op, vmap: _copy(op, vmap, "scheduled.output", ("strides",)),
    # collectives stay themselves: their operands order them after their inputs' producers
    **{f"loops.{kind}": lambda op, vmap: _copy(op, vmap, f"scheduled.{op.kind}") for kind in KINDS},
}


def schedule_graph(graph: Operation) -> Operation:
    """One loops.graph as a scheduled.graph."""
    args = [Value(a.name, a.type) for a in graph.body.args]
    vmap = dict(zip(graph.body.args, args))
    block = Block(args)
    count = 0
    for op in graph.body.ops:
        if isinstance(op, Pointwise | Scatter):
            new = (_scatter_node if isinstance(op, Scatter) else _node)(op, vmap, count)
            count += 1
        elif op.name in AS_SCHEDULED:
            new = AS_SCHEDULED[op.name](op, vmap)
        else:
            raise MindError(
                f"schedule cannot place '{op.name}' (run realize,inline first: views and "
                "unrealized nodes must be gone)",
                op.loc,
            )
        block.append(new)
    _drop_dead_nodes(block)
    return converted_graph(graph, "scheduled.graph", block)


def _drop_dead_nodes(block: Block) -> None:
    """Nodes whose buffers nothing reads go (the positions of a max whose values alone are
    used, the values of an argsort), as Inductor's dead_node_elimination; ATen calls stay, and
    so do nodes that overwrite graph inputs."""
    for op in reversed(list(block.ops)):
        if isinstance(op, Node) and not any(readers(r, block) for r in op.results):
            if not overwritten_inputs(op):
                op.erase()


@dataclass(frozen=True)
class Schedule(GraphPass, name="schedule", input="loops", output="scheduled"):
    """One scheduler node per buffer, with sizes and MemoryDeps."""

    def run_graph(self, graph: Operation) -> Operation:
        return schedule_graph(graph)
