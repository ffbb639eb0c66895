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
from mind.dialects.loops import is_buffer, is_realized
from mind.ir import dtypes as dt
from mind.ir.attributes import format_attr
from mind.ir.core import Block, Module, Operation, Value, iter_values, map_values
from mind.ir.diagnostics import MindError
from mind.ir.dtypes import DType
from mind.ir.symbols import IntLike, sym
from mind.ir.types import ScalarType, TensorType

from .loops_utils import compose_view, flat_offset, producer, pvar, simplify_index, substitute
from .manager import Pass, register_pass


@register_pass
@dataclass(frozen=True)
class Inline(Pass):
    name = "inline"
    input = "loops"
    output = "loops"
    summary = "replace loads from unrealized nodes and views by the bodies they read"

    def run(self, module: Module) -> Module:
        for graph in module.ops:
            if graph.name == "loops.graph":
                inline_graph(graph)
        return module


def inline_graph(graph: Operation) -> None:
    kept = []
    for op in graph.body.ops:
        if op.name in ("loops.view", "loops.pointwise", "loops.reduction") and not is_realized(op):
            continue
        for value in iter_values(op.args):
            if isinstance(value.type, TensorType) and not is_buffer(value):
                raise MindError(
                    f"'{op.name}' reads '%{value.name}', which is not a buffer: run realize first",
                    op.loc,
                )
        if op.regions and op.name != "loops.graph":
            _inline_node(op)
        kept.append(op)
    graph.body.ops[:] = kept


def _inline_node(node: Operation) -> None:
    body = _BodyBuilder(node)
    result = body.emit(node.body, {}, None)
    body.append(Operation("loops.yield", [result], loc=node.body.terminator.loc))
    block = Block(ops=body.ops)
    for i, value in enumerate(v for op in block.ops for v in op.results):
        value.name = str(i)
    node.regions[0].block = block
    block.parent = node.regions[0]
    if "origins" in node.attrs or body.origins:
        node.attrs["origins"] = sorted(set(node.attrs.get("origins", [])) | body.origins)


@dataclass
class _BodyBuilder:
    """Builds one node's new body. Indirect index values are bound to fresh placeholder symbols
    while bodies nest, and renamed `i0, i1, ...` on the load that finally uses them."""

    node: Operation
    ops: list[Operation] = field(default_factory=list)
    origins: set[str] = field(default_factory=set)
    indirect: dict[sympy.Symbol, Value] = field(default_factory=dict)
    seen: dict[str, Value] = field(default_factory=dict)
    counter: itertools.count = field(default_factory=itertools.count)

    def append(self, op: Operation) -> Value | None:
        """Add an op, or reuse the result of an identical one (loads included: bodies are pure)."""
        key = format_attr([op.name, op.args, op.attrs, [str(r.type) for r in op.results]], _vid)
        if op.results and key in self.seen:
            return self.seen[key]
        self.ops.append(op)
        if op.results:
            self.seen[key] = op.result
            return op.result
        return None

    def make(self, name: str, args: list, dtype: DType, attrs: dict | None = None, loc=None):
        op = Operation(f"loops.{name}", args, attrs, [ScalarType(dtype)], ["v"], loc=loc)
        return self.append(op)

    def emit(self, block: Block, subs: dict, mask: Value | None) -> Value:
        """Copy `block` with p vars bound by `subs`, every load also masked by `mask`; returns the
        value the block yields."""
        env: dict[Value, Value] = {}
        for op in block.ops:
            if op.name == "loops.yield":
                return env[op.args[0]]
            if op.name == "loops.load":
                env[op.result] = self.load(op, subs, env, mask)
            elif op.name == "loops.index":
                env[op.result] = self.index(op, subs)
            else:
                args = map_values(op.args, env.__getitem__)
                attrs = map_values(op.attrs, env.__getitem__)
                env[op.result] = self.make(
                    op.name.split(".", 1)[1], args, op.result.type.dtype, attrs, op.loc
                )
        raise MindError(f"'{self.node.name}' body has no yield", self.node.loc)

    def load(self, op: Operation, subs: dict, env: dict, mask: Value | None) -> Value:
        src, index = op.args
        binding = dict(subs)
        for i, value in enumerate(op.attrs.get("indirect", [])):
            placeholder = sym(f"_ind{next(self.counter)}")
            self.indirect[placeholder] = env[value]
            binding[sym(f"i{i}")] = placeholder
        dtype = op.result.type.dtype
        own_mask = env[op.attrs["mask"]] if "mask" in op.attrs else None
        other = op.attrs.get("other", _zero(dtype))
        active = self.both(mask, own_mask)
        if not isinstance(index, list):  # already a flat offset into a buffer
            return self.buffer_load(src, substitute(index, binding), active, other, op)
        src, index, views = compose_view(src, [substitute(e, binding) for e in index])
        self.origins.update(o for v in views for o in v.attrs.get("origins", []))
        if is_buffer(src):
            return self.buffer_load(src, flat_offset(src, index), active, other, op)
        node = producer(src)
        if node.name != "loops.pointwise":
            raise MindError(
                f"cannot inline '%{src.name}' ({node.name}) into '%{self.node.result.name}': "
                "reductions must be realized (run realize first)",
                op.loc,
            )
        self.origins.update(node.attrs.get("origins", []))
        value = self.emit(node.body, {pvar(i): e for i, e in enumerate(index)}, active)
        if own_mask is None:
            return value
        fallback = self.make("constant", [other], dtype, loc=op.loc)
        return self.make("where", [own_mask, value, fallback], dtype, loc=op.loc)

    def buffer_load(self, src: Value, offset: IntLike, mask, other, op: Operation) -> Value:
        """A load from memory; the indirect values its offset uses become `i0, i1, ...`."""
        symbols = getattr(offset, "free_symbols", set())
        used = [s for s in self.indirect if s in symbols]
        if used:
            offset = simplify_index(offset.xreplace({s: sym(f"i{k}") for k, s in enumerate(used)}))
        attrs: dict = {}
        if mask is not None:
            attrs.update(mask=mask, other=other)
        if used:
            attrs["indirect"] = [self.indirect[s] for s in used]
        return self.make("load", [src, offset], op.result.type.dtype, attrs, op.loc)

    def index(self, op: Operation, subs: dict) -> Value:
        expr: IntLike = substitute(op.args[0], subs)
        if isinstance(expr, sympy.Symbol) and expr in self.indirect:
            value = self.indirect[expr]
            if value.type.dtype == dt.i64:
                return value
            return self.make("cast", [value], dt.i64, loc=op.loc)
        if any(s in self.indirect for s in getattr(expr, "free_symbols", ())):
            raise MindError(
                f"cannot inline 'loops.index({expr})' at an indirect index into "
                f"'%{self.node.result.name}'",
                op.loc,
            )
        return self.make("index", [expr], dt.i64, loc=op.loc)

    def both(self, a: Value | None, b: Value | None) -> Value | None:
        if a is None or b is None:
            return a or b
        return self.make("logical_and", [a, b], dt.b8)


def _zero(dtype: DType) -> bool | float | int:
    """The `other` of a load masked only by an enclosing masked load (the select discards it)."""
    return False if dtype == dt.b8 else 0.0 if dtype.is_floating_point else 0


def _vid(value: Value) -> str:
    return f"v{id(value)}"
