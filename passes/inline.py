"""inline: every load from an unrealized node or a view becomes a copy of what it reads.

After `realize` has chosen the buffers, the rest of the graph is recomputed where it is used:
a load from an unrealized pointwise node is replaced by that node's body with its loop variables
bound to the load's index (Inductor calling a producer's inner_fn), views are composed into the
index, and loads that reach a buffer read it at the flat offset its strides give. Masked loads
mask every load of the inlined body and select `other` where the mask is off; indirect loads keep
their index values. Identical ops are merged, dead nodes and views dropped, and body values
renumbered, so the result reads like Inductor's loop bodies.

A bf16 or f16 op computes in f32 and rounds its result to its dtype (`cast` before the yield).
Inlined into a consumer that casts it back to f32, that rounding is dropped, as Inductor's
kernels compute a fused chain in f32 and round where they store (its default; its
`emulate_precision_casts` keeps them): `cast(cast(x, bf16), f32)` becomes `x`. A conversion the
program wrote (a node whose body is a load and a cast: `x.to(torch.bfloat16)`) keeps its
rounding, and so does a value a comparison takes (analysis/rounding.py): a backward's `x == max(x)` of
a recomputed `x` against the saved, rounded max (Inductor drops that rounding too, and its bf16
gradient of a scatter_reduce amax is NaN). On an H200 the rounding cost GPT-2's tanh GELU
(bf16, 2048 x 3072) 16%: 10.0 against 8.6 us.
`emulate-precision-casts=true` keeps every rounding, for results equal to eager's op by op.
A matmul template (mm-templates) keeps them always: its operands are what the matmul multiplies,
and tl.dot multiplies bf16 operands on tensor cores, f32 ones, unrounded, in IEEE f32 without
them (a template whose gradient operand lost its rounding took 20 ms on an H100, not 0.2).
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field

import sympy
from mind.analysis.deps import erase_dead
from mind.analysis.loops import (
    compose_view,
    flat_offset,
    producer,
    pvar,
    simplify_index,
    substitute,
)
from mind.analysis.patterns import conjuncts, same_number
from mind.analysis.rounding import compared, converts, rounds
from mind.dialects.loops import (
    Cast,
    Index,
    Load,
    Pointwise,
    Reduction,
    Scatter,
    View,
    Yield,
    YieldAt,
    is_buffer,
    is_realized,
)
from mind.ir import dtypes as dt
from mind.ir.core import Block, Operation, Value
from mind.ir.diagnostics import MindError
from mind.ir.dtypes import DType
from mind.ir.symbols import IntLike, sym
from mind.ir.types import TensorType

from .lower import BodyBuilder
from .manager import GraphPass, option


@dataclass(frozen=True)
class Inline(GraphPass, name="inline", input="loops"):
    """Replace loads from unrealized nodes and views by the bodies they read."""

    emulate_precision_casts: bool = option(
        False, "keep the rounding of each inlined bf16/f16 op's result (eager's, op by op)"
    )

    def run_graph(self, graph: Operation) -> None:
        inline_graph(graph, self.emulate_precision_casts)


def inline_graph(graph: Operation, emulate_precision_casts: bool = False) -> None:
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
        if isinstance(op, Pointwise | Scatter):
            _inline_node(op, emulate_precision_casts)
    graph.body.erase_ops(dropped)


def _inline_node(node: Pointwise | Scatter, emulate_precision_casts: bool) -> None:
    # a matmul template's operands keep their rounding: tl.dot multiplies them in their dtype
    template = isinstance(node, Reduction) and node.template is not None
    body = _BodyBuilder(node, keep_rounding=emulate_precision_casts or template)
    env = body.run(node.body, {}, None)
    body.b.append(node.body.terminator.clone(env))
    erase_dead(body.block)  # roundings undone, the operands of a `where` found redundant
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
    keep_rounding: bool = False
    block: Block = field(default_factory=Block)
    origins: set[str] = field(default_factory=set)
    indirect: dict[sympy.Symbol, Value] = field(default_factory=dict)
    counter: itertools.count = field(default_factory=itertools.count)
    #: an inlined op's rounded result -> the f32 value it rounds (see the module docstring)
    rounded: dict[Value, Value] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.b = BodyBuilder(self.block, dedupe=True)

    def emit(self, block: Block, subs: dict, mask: Value | None) -> Value:
        """Copy `block` with p vars bound by `subs`, every load also masked by `mask`; returns the
        value the block yields."""
        return self.run(block, subs, mask)[block.terminator.value]

    def run(self, block: Block, subs: dict, mask: Value | None) -> dict[Value, Value]:
        """Copy the ops of `block` up to its terminator (a yield, or a scatter's yield_at); returns
        what each of its values became."""
        env: dict[Value, Value] = {}
        for op in block.ops:
            if isinstance(op, Yield | YieldAt):
                return env
            if isinstance(op, Load):
                env[op.result] = self.load(op, subs, env, mask)
            elif isinstance(op, Index):
                env[op.result] = self.index(op, subs)
            elif (
                isinstance(op, Cast)
                and self.unrounds(env[op.x], op.result.type.dtype)
                and not compared(op.result)
            ):
                env[op.result] = self.rounded[env[op.x]]
            elif getattr(op, "kind", None) == "where" and _redundant(
                *(env[v] for v in op.operands)
            ):
                env[op.result] = env[op.operands[1]]
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
                "reductions and scatters must be realized (run realize first)",
                op.loc,
            )
        self.origins.update(node.origins or [])
        value = self.emit(node.body, {pvar(i): e for i, e in enumerate(index)}, active)
        if not self.keep_rounding and rounds(value) and not converts(node.body.terminator.value):
            self.rounded[value] = value.owner.x
        if own_mask is None or _covers(value, own_mask, other):
            return value
        fallback = self.b.emit("constant", dtype, value=other, loc=op.loc)
        return self.b.emit("where", dtype, [own_mask, value, fallback], loc=op.loc)

    def unrounds(self, value: Value, dtype: DType) -> bool:
        """Whether casting `value` to `dtype` undoes an inlined op's rounding: the value it
        rounded stands for the cast."""
        source = self.rounded.get(value)
        return source is not None and source.type.dtype == dtype

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
        return self.index_value(substitute(op.index, subs), op)

    def index_value(self, expr: IntLike, op: Index) -> Value:
        """The i64 value of an index expression: a `loops.index` of it, unless it holds indirect
        values (an arange read at a gathered position: `_ind0 + 16*p1`), which its sums,
        products, Mods and floors then combine as body ops."""
        symbols = getattr(expr, "free_symbols", set())
        if not symbols & self.indirect.keys():
            return self.b.emit("index", dt.i64, index=expr, loc=op.loc)
        if expr in self.indirect:
            value = self.indirect[expr]
            return value if value.type.dtype == dt.i64 else self.b.emit("cast", dt.i64, x=value)
        if isinstance(expr, sympy.Add | sympy.Mul):
            inner = [a for a in expr.args if a.free_symbols & self.indirect.keys()]
            rest = expr.func(*(a for a in expr.args if a not in inner))
            kind = "add" if isinstance(expr, sympy.Add) else "mul"
            parts = inner if rest == expr.func.identity else [*inner, rest]
            values = [self.index_value(a, op) for a in parts]
            return functools.reduce(lambda a, b: self.b.emit(kind, dt.i64, [a, b]), values)
        if isinstance(expr, sympy.Mod):
            a, m = (self.index_value(e, op) for e in expr.args)
            return self.b.emit("mod", dt.i64, [a, m])
        if isinstance(expr, sympy.floor):
            num, den = (
                self.index_value(e, op) for e in sympy.fraction(sympy.together(expr.args[0]))
            )
            return self.b.emit("floordiv", dt.i64, [num, den])
        raise MindError(
            f"cannot inline 'loops.index({expr})' at an indirect index into "
            f"'%{self.node.result.name}'",
            op.loc,
        )

    def both(self, a: Value | None, b: Value | None) -> Value | None:
        if a is None or b is None:
            return a or b
        return self.b.emit("logical_and", dt.b8, [a, b])


def _redundant(mask: Value, value: Value, other: Value) -> bool:
    """Whether `where(mask, value, other)` is `value`: it is already `where(mask, ..., other)` (a
    masked load of a pad's body, then the pad's own), or a load masked by `mask` (and maybe more)
    whose `other` is the constant `other` (the pad's where over its own masked load)."""
    op = value.owner
    if getattr(op, "kind", None) == "where":
        return op.operands[0] is mask and op.operands[2] is other
    constant = other.owner
    return getattr(constant, "kind", None) == "constant" and _covers(value, mask, constant.value)


def _covers(value: Value, mask: Value, other: bool | int | float) -> bool:
    """Whether `value` is a load masked by `mask` among others whose `other` is `other`: where
    `mask` is false, it yields `other` itself."""
    op = value.owner
    if not isinstance(op, Load) or op.mask is None or mask not in conjuncts(op.mask):
        return False
    return same_number(op.other, other)


def _zero(dtype: DType) -> bool | float | int:
    """The `other` of a load masked only by an enclosing masked load (the select discards it)."""
    return dt.literal(0, dtype)
