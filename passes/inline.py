"""inline: every load from an unrealized node or a view becomes a copy of what it reads.

After `realize` has chosen the buffers, the rest of the graph is recomputed where it is used:
a load from an unrealized pointwise node is replaced by that node's body with its loop variables
bound to the load's index (Inductor calling a producer's inner_fn), views are composed into the
index, and loads that reach a buffer read it at the flat offset its strides give. Masked loads
mask every load of the inlined body and select `other` where the mask is off; indirect loads keep
their index values. Identical ops are merged, dead nodes and views dropped, and body values
renumbered, so the result reads like Inductor's loop bodies.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import sympy
from mind.analysis.loops import (
    compose_view,
    flat_offset,
    producer,
    pvar,
    simplify_index,
    substitute,
)
from mind.dialects.loops import Index, Load, Pointwise, View, Yield, is_buffer, is_realized
from mind.ir import dtypes as dt
from mind.ir.core import Block, Operation, Value
from mind.ir.diagnostics import MindError
from mind.ir.dtypes import DType
from mind.ir.symbols import IntLike, sym
from mind.ir.types import TensorType

from .lower import BodyBuilder
from .manager import GraphPass


@dataclass(frozen=True)
class Inline(GraphPass, name="inline", input="loops"):
    """Replace loads from unrealized nodes and views by the bodies they read."""

    def run_graph(self, graph: Operation) -> None:
        inline_graph(graph)


def inline_graph(graph: Operation) -> None:
    dropped = []
    for op in graph.body.ops:
        if isinstance(op, Pointwise | View) and not is_realized(op):
            dropped.append(op)
            continue
        for value in op.operands:
            if isinstance(value.type, TensorType) and not is_buffer(value):
                raise MindError(
                    f"'{op.name}' reads '%{value.name}', which is not a buffer: run realize first",
                    op.loc,
                )
        if isinstance(op, Pointwise):
            _inline_node(op)
    graph.body.erase_ops(dropped)


def _inline_node(node: Pointwise) -> None:
    body = _BodyBuilder(node)
    result = body.emit(node.body, {}, None)
    body.b.append(Yield.build("loops.yield", value=result, loc=node.body.terminator.loc))
    for i, value in enumerate(v for op in body.block.ops for v in op.results):
        value.name = str(i)
    old = node.regions[0].block
    node.regions[0].block = body.block
    old.erase_ops(old.ops)
    if node.origins is not None or body.origins:
        node.origins = sorted(set(node.origins or []) | body.origins)


@dataclass
class _BodyBuilder:
    """Builds one node's new body. Indirect index values are bound to fresh placeholder symbols
    while bodies nest, and renamed `i0, i1, ...` on the load that finally uses them."""

    node: Operation
    block: Block = field(default_factory=Block)
    origins: set[str] = field(default_factory=set)
    indirect: dict[sympy.Symbol, Value] = field(default_factory=dict)
    counter: itertools.count = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        self.b = BodyBuilder(self.block, dedupe=True)

    def emit(self, block: Block, subs: dict, mask: Value | None) -> Value:
        """Copy `block` with p vars bound by `subs`, every load also masked by `mask`; returns the
        value the block yields."""
        env: dict[Value, Value] = {}
        for op in block.ops:
            if isinstance(op, Yield):
                return env[op.value]
            if isinstance(op, Load):
                env[op.result] = self.load(op, subs, env, mask)
            elif isinstance(op, Index):
                env[op.result] = self.index(op, subs)
            else:
                env[op.result] = self.b.append(op.clone(env))
        raise MindError(f"'{self.node.name}' body has no yield", self.node.loc)

    def load(self, op: Load, subs: dict, env: dict, mask: Value | None) -> Value:
        binding = dict(subs)
        for i, value in enumerate(op.indirect or []):
            placeholder = sym(f"_ind{next(self.counter)}")
            self.indirect[placeholder] = env[value]
            binding[sym(f"i{i}")] = placeholder
        dtype = op.result.type.dtype
        own_mask = env[op.mask] if op.mask is not None else None
        other = op.other if op.other is not None else _zero(dtype)
        active = self.both(mask, own_mask)
        src, index = op.source, op.index
        if not isinstance(index, list):  # already a flat offset into a buffer
            return self.buffer_load(src, substitute(index, binding), active, other, op)
        src, index, views = compose_view(src, [substitute(e, binding) for e in index])
        self.origins.update(o for v in views for o in v.origins or [])
        if is_buffer(src):
            return self.buffer_load(src, flat_offset(src, index), active, other, op)
        node = producer(src)
        if node.name != "loops.pointwise":
            raise MindError(
                f"cannot inline '%{src.name}' ({node.name}) into '%{self.node.result.name}': "
                "reductions must be realized (run realize first)",
                op.loc,
            )
        self.origins.update(node.origins or [])
        value = self.emit(node.body, {pvar(i): e for i, e in enumerate(index)}, active)
        if own_mask is None:
            return value
        fallback = self.b.emit("constant", dtype, value=other, loc=op.loc)
        return self.b.emit("where", dtype, [own_mask, value, fallback], loc=op.loc)

    def buffer_load(self, src: Value, offset: IntLike, mask, other, op: Load) -> Value:
        """A load from memory; the indirect values its offset uses become `i0, i1, ...`."""
        symbols = getattr(offset, "free_symbols", set())
        used = [s for s in self.indirect if s in symbols]
        if used:
            offset = simplify_index(offset.xreplace({s: sym(f"i{k}") for k, s in enumerate(used)}))
        return self.b.emit(
            "load",
            op.result.type.dtype,
            source=src,
            index=offset,
            mask=mask,
            other=other if mask is not None else None,
            indirect=[self.indirect[s] for s in used] or None,
            loc=op.loc,
        )

    def index(self, op: Index, subs: dict) -> Value:
        expr: IntLike = substitute(op.index, subs)
        if isinstance(expr, sympy.Symbol) and expr in self.indirect:
            value = self.indirect[expr]
            if value.type.dtype == dt.i64:
                return value
            return self.b.emit("cast", dt.i64, x=value, loc=op.loc)
        if any(s in self.indirect for s in getattr(expr, "free_symbols", ())):
            raise MindError(
                f"cannot inline 'loops.index({expr})' at an indirect index into "
                f"'%{self.node.result.name}'",
                op.loc,
            )
        return self.b.emit("index", dt.i64, index=expr, loc=op.loc)

    def both(self, a: Value | None, b: Value | None) -> Value | None:
        if a is None or b is None:
            return a or b
        return self.b.emit("logical_and", dt.b8, [a, b])


def _zero(dtype: DType) -> bool | float | int:
    """The `other` of a load masked only by an enclosing masked load (the select discards it)."""
    return dt.literal(0, dtype)
