"""lower: aten -> loops. Each ATen op becomes loop nodes through the lowering registry
(`passes/lowerings/`); nodes stay unrealized (the `realize` pass picks buffers), extern, fallback
and constant results are realized with the layouts torch computed.

A lowering reads like Inductor's inner_fn: it gets a `LowerCtx` and the op's arguments (aten
values replaced by loops values), and builds nodes whose bodies a `BodyBuilder` writes:

    ctx.pointwise(dtype, shape, lambda b, idx: b.add(b.load(x, idx), b.load(y, idx)))
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy
import torch
from mind.dialects.loops import is_buffer
from mind.dialects.scalar_ops import SCALAR_OPS
from mind.ir.core import Block, Module, Operation, Region, Value, iter_values, map_values
from mind.ir.symbols import IntLike, sym
from mind.ir.types import ScalarType, SymType, TensorType

from .loops_utils import flat_offset
from .lowerings import Unsupported, lowering_for
from .lowerings.common import Index, broadcast_index, pvars
from .manager import Pass, register_pass


class BodyBuilder:
    """Appends the scalar ops of one node body; results are named `%0, %1, ...`. Every scalar op
    of the loops dialect is a method: `b.add(x, y)`, `b.relu(x)`, `b.where(c, x, y)`."""

    def __init__(self, block: Block):
        self.block = block
        self.count = 0

    def emit(self, name: str, args: list, dtype: torch.dtype | None, **attrs) -> Value:
        types, names = [], []
        if dtype is not None:
            types, names = [ScalarType(dtype)], [str(self.count)]
            self.count += 1
        op = Operation(f"loops.{name}", args, attrs, types, names)
        self.block.append(op)
        return op.results[0] if op.results else None

    def __getattr__(self, name: str) -> Callable[..., Value]:
        spec = SCALAR_OPS.get(name)
        if spec is None:
            raise AttributeError(name)

        def scalar_op(*operands: Value) -> Value:
            dtype = torch.bool if spec.result == "bool" else operands[-1].type.dtype
            return self.emit(name, list(operands), dtype)

        return scalar_op

    def load(
        self, src: Value, index: Sequence[IntLike | Value], mask: Value | None = None, other=None
    ) -> Value:
        """One element of `src` at an N-d index (broadcast to src's shape). Body values in the
        index become indirect symbols `i0, i1, ...`; buffers are read at their flat offset."""
        indirect: list[Value] = []
        exprs: Index = []
        for e in broadcast_index(src.type.shape, index):
            if isinstance(e, Value):
                exprs.append(sym(f"i{len(indirect)}"))
                indirect.append(e)
            else:
                exprs.append(e)
        where: Any = flat_offset(src, exprs) if is_buffer(src) else exprs
        attrs: dict[str, Any] = {}
        if mask is not None:
            attrs.update(mask=mask, other=other)
        if indirect:
            attrs["indirect"] = indirect
        return self.emit("load", [src, where], src.type.dtype, **attrs)

    def constant(self, value: Any, dtype: torch.dtype) -> Value:
        """A scalar constant; a symbolic value (a SymInt) is computed as an index expression."""
        if isinstance(value, sympy.Expr) and not value.is_number:
            return self.cast(self.index(value), dtype)
        if isinstance(value, sympy.Expr):
            value = int(value) if value.is_Integer else float(value)
        if dtype == torch.bool:
            value = bool(value)
        elif dtype.is_floating_point:
            value = float(value)
        else:
            value = int(value)
        return self.emit("constant", [value], dtype)

    def index(self, expr: IntLike) -> Value:
        return self.emit("index", [expr], torch.int64)

    def cast(self, x: Value, dtype: torch.dtype) -> Value:
        return x if x.type.dtype == dtype else self.emit("cast", [x], dtype)


BodyFn = Callable[..., Value]


class LowerCtx:
    """Builds the nodes of one `loops.graph`. `out` / `outs` are the result types of the aten op
    being lowered (torch's meta computation), `origin` its short name."""

    def __init__(self, block: Block, reserved: set[str]):
        self.block = block
        self.used = set(reserved)
        self.outs: list[TensorType] = []
        self.op: Operation | None = None
        self.origin = ""
        self.base = ""

    @property
    def out(self) -> TensorType:
        return self.outs[0]

    def fresh(self, base: str) -> str:
        name, n = base, 0
        while name in self.used:
            n += 1
            name = f"{base}_{n}"
        self.used.add(name)
        return name

    def node(self, op: Operation) -> Operation:
        self.block.append(op)
        return op

    def _body_node(
        self, name: str, attrs: dict, t: TensorType, fn: BodyFn, args: list, yield_dtype
    ) -> Value:
        block = Block()
        b = BodyBuilder(block)
        value = fn(b, *args)
        if yield_dtype is not None:
            value = b.cast(value, yield_dtype)
        b.emit("yield", [value], None)
        attrs = {**attrs, "origins": [self.origin]}
        kind = attrs.get("reduction_type", "pw")
        op = Operation(name, [], attrs, [t], [self.fresh(f"{self.base}_{kind}")], [Region(block)])
        return self.node(op).result

    def _type(self, dtype: torch.dtype, shape: Sequence[IntLike]) -> TensorType:
        return TensorType(dtype, tuple(shape), None, self.out.device)

    def pointwise(self, dtype: torch.dtype, shape: Sequence[IntLike], fn: BodyFn) -> Value:
        """A node whose element at `idx` is `fn(b, idx)` (cast to `dtype` before the yield)."""
        t = self._type(dtype, shape)
        return self._body_node("loops.pointwise", {}, t, fn, [pvars(0, len(shape))], dtype)

    def reduction(
        self,
        dtype: torch.dtype,
        shape: Sequence[IntLike],
        ranges: Sequence[IntLike],
        reduction_type: str,
        fn: BodyFn,
    ) -> Value:
        """Reduce `fn(b, idx, ridx)` over `ranges` for each `idx` of `shape`; argmax/argmin
        yield the value as is, any/all a b8, the others the result dtype."""
        attrs = {"reduction_ranges": list(ranges), "reduction_type": reduction_type}
        args = [pvars(0, len(shape)), pvars(len(shape), len(ranges))]
        yield_dtype = {"any": torch.bool, "all": torch.bool, "argmax": None, "argmin": None}
        t = self._type(dtype, shape)
        return self._body_node(
            "loops.reduction", attrs, t, fn, args, yield_dtype.get(reduction_type, dtype)
        )

    def view(self, src: Value, shape: Sequence[IntLike], index: Index) -> Value:
        """A view of `src`: element `[p0, ...]` of the result (of `shape`) is `src[index]`."""
        t = TensorType(src.type.dtype, tuple(shape), None, self.out.device)
        name = self.fresh(f"{self.base}_view")
        op = Operation("loops.view", [src, list(index)], {"origins": [self.origin]}, [t], [name])
        return self.node(op).result

    def call(self, kind: str, symbol: str, args: list, kwargs: dict) -> list[Value]:
        """An extern or fallback ATen call on the aten op's arguments; its results have the
        layouts torch computed from its arguments' layouts, which `input_strides` lists."""
        names = [self.fresh(f"{self.base}_{kind}") for _ in self.outs]
        tensors = [v for v in iter_values(self.op.args) if isinstance(v.type, TensorType)]
        attrs = dict(kwargs)
        if tensors:
            attrs["input_strides"] = [strides_of_value(v) for v in tensors]
        op = Operation(f"loops.{kind}", args, attrs, list(self.outs), names, symbol=symbol)
        return self.node(op).results


def short_name(op: Operation) -> str:
    """The op's packet name (`add` for `aten.add.Tensor`), as Inductor lists origins."""
    parts = (op.symbol if op.name == "aten.call" else op.name).split(".")
    return parts[-2] if len(parts) > 2 else parts[-1]


def _exotic(op: Operation) -> bool:
    """Complex and float8 tensors have no scalar ops: such ops always run in ATen."""
    types = [v.type for v in [*op.operands, *op.results]]
    return any(
        isinstance(t, TensorType)
        and (t.dtype.is_complex or t.dtype.itemsize == 1 and t.dtype.is_floating_point)
        for t in types
    )


def _takes(fn: Callable, args: list, kwargs: dict) -> bool:
    """Whether `fn(ctx, *args, **kwargs)` binds (a lowering's signature is its contract)."""
    try:
        inspect.signature(fn).bind(None, *args, **kwargs)
    except TypeError:
        return False
    return True


def lower_op(ctx: LowerCtx, op: Operation, env: dict[Value, Any]) -> None:
    """Lower one aten op, falling back to an ATen call when no lowering covers it."""
    if op.results and all(isinstance(r.type, SymType) for r in op.results):
        env.update({r: r.type.expr for r in op.results})  # SymInt arithmetic: its expression
        return
    args, kwargs = (map_values(x, lambda v: env[v]) for x in (op.args, op.attrs))
    ctx.op, ctx.outs, ctx.origin = op, [r.type for r in op.results], short_name(op)
    ctx.base = op.results[0].name if op.results else ctx.origin
    key = op.symbol if op.name == "aten.call" else op.name
    fn = None if _exotic(op) else lowering_for(key)
    if fn is not None and not _takes(fn, args, kwargs):  # an overload the lowering does not
        fn = None  # cover (`round.decimals` under the packet's lowering): an ATen call
    mark = len(ctx.block.ops)
    produced = None
    if fn is not None:
        try:
            produced = fn(ctx, *args, **kwargs)
        except Unsupported:
            del ctx.block.ops[mark:]
    if produced is None:
        produced = ctx.call("fallback", key, args, kwargs)
    produced = list(produced) if isinstance(produced, list | tuple) else [produced]
    new = {r for o in ctx.block.ops[mark:] for r in o.results}
    for result, value in zip(op.results, produced):
        if value in new:
            value.name = result.name
        env[result] = value


def strides_of_value(arg: Any) -> list[IntLike] | None:
    """The strides of an aten value's type, which a graph output must keep (the caller, e.g. a
    backward graph, asserts them) and an ATen call's argument too (its results' layouts follow
    them); None for a non-tensor."""
    t = arg.type if isinstance(arg, Value) else None
    return list(t.strides) if isinstance(t, TensorType) and t.strides is not None else None


def lower_graph(graph: Operation) -> Operation:
    """An `aten.graph` as a `loops.graph` with the same signature and value names."""
    block = Block()
    env: dict[Value, Any] = {}
    for arg in graph.body.args:
        env[arg] = block.add_arg(Value(arg.name, arg.type))
        if isinstance(arg.type, SymType):
            env[arg] = arg.type.expr
    reserved = {v.name for o in graph.walk() for v in o.results} | {a.name for a in block.args}
    ctx = LowerCtx(block, reserved)
    for op in graph.body.ops:
        if op.name == "aten.output":
            args = map_values(op.args, lambda v: env[v])
            attrs = {"strides": [strides_of_value(a) for a in op.args]}
            block.append(Operation("loops.output", args, attrs, loc=op.loc))
        else:
            lower_op(ctx, op, env)
    return Operation("loops.graph", regions=[Region(block)], symbol=graph.symbol, loc=graph.loc)


@register_pass
@dataclass(frozen=True)
class Lower(Pass):
    """aten -> loops: every aten graph becomes a loops graph of unrealized nodes."""

    name = "lower"
    input = "aten"
    output = "loops"
    summary = "ATen ops become pointwise / reduction / view nodes, extern and fallback calls"

    def run(self, module: Module) -> Module:
        return Module([lower_graph(op) for op in module.ops])
