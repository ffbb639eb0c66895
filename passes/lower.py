"""lower: aten -> loops. Each ATen op becomes loop nodes through the lowering registry
(`passes/lowerings/`); nodes stay unrealized (the `realize` pass picks buffers), extern, fallback
and constant results are realized with the layouts torch computed.

A lowering reads like Inductor's inner_fn: it gets a `LowerCtx` and the op's arguments (aten
values replaced by loops values), and builds nodes whose bodies a `BodyBuilder` writes:

    ctx.pointwise(dtype, shape, lambda b, idx: b.add(b.load(x, idx), b.load(y, idx)))
"""

from __future__ import annotations

import functools
import heapq
import inspect
from collections.abc import Callable, Container, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import sympy
from mind.analysis.loops import (
    Index,
    base_of,
    broadcast_index,
    copy_node,
    flat_offset,
    is_view,
    pvars,
)
from mind.dialects.collectives import is_collective
from mind.dialects.common import converted_graph, is_graph_input, uses_gpu
from mind.dialects.loops import LIBRARY_CALLS, LoopsCall, LoopsOutput, View, Yield, is_buffer
from mind.dialects.reductions import REDUCTIONS
from mind.dialects.scalar_ops import SCALAR_OPS
from mind.dialects.scans import SCANS
from mind.ir import dtypes as dt
from mind.ir.attributes import op_key
from mind.ir.constraints import TENSOR
from mind.ir.core import Block, Operation, Region, Value, fresh_name, iter_values, map_values
from mind.ir.diagnostics import MindError, located
from mind.ir.dtypes import DType
from mind.ir.registry import op_class
from mind.ir.symbols import IntLike, is_integral, sym
from mind.ir.types import ScalarType, SymType, TensorType, contiguous_strides, size_symbols

from .manager import GraphPass, option


class BodyBuilder:
    """Appends the scalar ops of one node body; results are named `%0, %1, ...`. Every scalar op
    of the loops dialect is a method: `b.add(x, y)`, `b.relu(x)`, `b.where(c, x, y)`. With
    `dedupe`, an op identical to one already added is dropped for that one's result (bodies are
    pure, loads included)."""

    def __init__(self, block: Block, dedupe: bool = False):
        self.block = block
        self.count = 0
        self.seen: dict[Hashable, Value] | None = {} if dedupe else None

    def append(self, op: Operation) -> Value | None:
        key = op_key(op) if self.seen is not None and op.results else None
        if key is not None:
            if key in self.seen:
                op.erase()
                return self.seen[key]
            self.seen[key] = op.result
        self.block.append(op)
        return op.results[0] if op.results else None

    def emit(self, name: str, dtype: DType, args: list | tuple = (), loc=None, **fields) -> Value:
        """Add `loops.<name>` (fields by name, or positional `args`) with a scalar result."""
        cls = op_class(f"loops.{name}")
        types, names = [ScalarType(dtype)], [str(self.count)]
        self.count += 1
        if args:
            op = cls(f"loops.{name}", args, fields, types, names, loc=loc)
        else:
            op = cls.build(f"loops.{name}", results=types, names=names, loc=loc, **fields)
        return self.append(op)

    def __getattr__(self, name: str) -> Callable[..., Value]:
        spec = SCALAR_OPS.get(name)
        if spec is None:
            raise AttributeError(name)

        def scalar_op(*operands: Value) -> Value:
            dtype = spec.result or operands[-1].type.dtype
            return self.emit(name, dtype, operands)

        return scalar_op

    def load(
        self, src: Value, index: Sequence[IntLike | Value], mask: Value | None = None, other=None
    ) -> Value:
        """One element of `src` at an N-d index (broadcast to src's shape). Body values in the
        index become indirect symbols `i0, i1, ...`; buffers are read at their flat offset."""
        exprs, indirect = indirect_index(broadcast_index(src.type.shape, index))
        where: Any = flat_offset(src, exprs) if is_buffer(src) else exprs
        return self.emit(
            "load",
            src.type.dtype,
            source=src,
            index=where,
            mask=mask,
            other=other if mask is not None else None,
            indirect=indirect or None,
        )

    def constant(self, value: Any, dtype: DType) -> Value:
        """A scalar constant; a symbolic value (a SymInt) is computed as an index expression."""
        if isinstance(value, sympy.Expr) and not value.is_number:
            return self.symbolic(value, dtype)
        if isinstance(value, sympy.Expr):
            value = int(value) if value.is_Integer else float(value)
        return self.emit("constant", dtype, value=dt.literal(value, dtype))

    def symbolic(self, expr: sympy.Expr, dtype: DType) -> Value:
        """A symbolic value in `dtype`: integer arithmetic as an index expression, the rest (a
        float correction's `Max(s0 - 1.0, 0)`, `s0/2`) as sums, products, extremes and inverse
        powers of those."""
        if expr.is_number:
            return self.constant(expr, dtype)
        if is_integral(expr):
            return self.cast(self.index(expr), dtype)
        if isinstance(expr, sympy.Add | sympy.Mul | sympy.Max | sympy.Min):
            combine = {sympy.Add: self.add, sympy.Mul: self.mul, sympy.Max: self.maximum}.get(
                type(expr), self.minimum
            )
            parts = [self.symbolic(arg, dtype) for arg in expr.args]
            return functools.reduce(combine, parts)
        if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and expr.exp < 0:
            return self.truediv(self.constant(1, dtype), self.symbolic(1 / expr, dtype))
        raise MindError(f"cannot compute '{expr}' in a kernel")

    def index(self, expr: IntLike) -> Value:
        return self.emit("index", dt.i64, index=expr)

    def cast(self, x: Value, dtype: DType) -> Value:
        return x if x.type.dtype == dtype else self.emit("cast", dtype, x=x)

    def check_index(self, index: Value, bound: Value) -> Value:
        """`index`, asserted to lie in [0, bound) (both i64)."""
        return self.emit("check_index", dt.i64, index=index, bound=bound)


def indirect_index(index: Sequence[IntLike | Value]) -> tuple[Index, list[Value]]:
    """An index whose body values become the symbols `i0, i1, ...`, and those values in order
    (what an op's `indirect` lists)."""
    indirect: list[Value] = []
    exprs: Index = []
    for e in index:
        if isinstance(e, Value):
            exprs.append(sym(f"i{len(indirect)}"))
            indirect.append(e)
        else:
            exprs.append(e)
    return exprs, indirect


BodyFn = Callable[..., Value]


class LowerCtx:
    """Builds the nodes of one `loops.graph`. `out` / `outs` are the result types of the aten op
    being lowered (torch's meta computation), `origin` its short name. `deterministic`: lower
    nothing whose result depends on the order threads run in (torch.use_deterministic_algorithms:
    scatters run as ATen calls). `unroll_max`: a reduction of at most that many elements a row
    is a pointwise node folding them."""

    def __init__(
        self,
        block: Block,
        reserved: set[str],
        deterministic: bool = False,
        unroll_max: int = 0,
        on_gpu: bool = False,
    ):
        self.block = block
        self.deterministic = deterministic
        self.unroll_max = unroll_max
        self.used = set(reserved)
        #: whether the graph has GPU tensors: its CPU ops then run in ATen (`_on_host`)
        self.on_gpu = on_gpu
        self.outs: list[TensorType] = []
        self.op: Operation | None = None
        self.origin = ""
        self.base = ""
        #: the graph inputs the copy_ ops lowered so far overwrite, and the first of those writes
        self.overwritten: set[Value] = set()
        self.first_write: Operation | None = None

    @property
    def out(self) -> TensorType:
        return self.outs[0]

    def fresh(self, base: str) -> str:
        name = fresh_name(base, self.used.__contains__)
        self.used.add(name)
        return name

    def node(self, op: Operation) -> Operation:
        self.block.append(op)
        return op

    def before_writes(self, value: Value) -> Value:
        """`value`'s node, just made, realized (contiguous) before the first copy_ into an input:
        it reads the inputs as they came."""
        node, t = value.owner, value.type
        value.type = TensorType(t.dtype, t.shape, contiguous_strides(t.shape), t.device)
        self.block.remove(node)
        self.block.insert_before(self.first_write, node)
        return value

    def _body_node(
        self, name: str, t: TensorType, fn: BodyFn, args: list, yield_dtype, **fields
    ) -> Value:
        """`loops.<name>` with the body `fn` writes (its value cast to `yield_dtype`)."""
        block = Block()
        b = BodyBuilder(block)
        value = fn(b, *args)
        if yield_dtype is not None:
            value = b.cast(value, yield_dtype)
        block.append(Yield.build("loops.yield", value=value))
        kind = (
            fields.get("reduction_type")
            or fields.get("scan_type")
            or name.replace("pointwise", "pw")
        )
        op = op_class(f"loops.{name}").build(
            f"loops.{name}",
            results=[t],
            names=[self.fresh(f"{self.base}_{kind}")],
            regions=[Region(block)],
            **fields,
            origins=[self.origin],
        )
        return self.node(op).result

    def _type(self, dtype: DType, shape: Sequence[IntLike]) -> TensorType:
        return TensorType(dtype, tuple(shape), None, self.out.device)

    def pointwise(self, dtype: DType, shape: Sequence[IntLike], fn: BodyFn) -> Value:
        """A node whose element at `idx` is `fn(b, idx)` (cast to `dtype` before the yield)."""
        t = self._type(dtype, shape)
        return self._body_node("pointwise", t, fn, [pvars(0, len(shape))], dtype)

    def reduction(
        self,
        dtype: DType,
        shape: Sequence[IntLike],
        ranges: Sequence[IntLike],
        reduction_type: str,
        fn: BodyFn,
    ) -> Value:
        """Reduce `fn(b, idx, ridx)` over `ranges` for each `idx` of `shape`; the body yields
        what the reduction kind takes (see dialects/reductions.py)."""
        args = [pvars(0, len(shape)), pvars(len(shape), len(ranges))]
        t = self._type(dtype, shape)
        yield_dtype = REDUCTIONS[reduction_type].yield_dtype(dtype)
        return self._body_node(
            "reduction",
            t,
            fn,
            args,
            yield_dtype,
            reduction_ranges=list(ranges),
            reduction_type=reduction_type,
        )

    def scan(
        self, dtype: DType, shape: Sequence[IntLike], axis: int, scan_type: str, fn: BodyFn
    ) -> Value:
        """A node whose element at `idx` folds `fn(b, j)` over the indices `j` that equal `idx`
        but along `axis`, where they run from 0 to `idx[axis]` (see dialects/scans.py)."""
        t = self._type(dtype, shape)
        yield_dtype = SCANS[scan_type].yield_dtype(dtype)
        args = [pvars(0, len(shape))]
        return self._body_node("scan", t, fn, args, yield_dtype, axis=axis, scan_type=scan_type)

    def sort(
        self,
        dtype: DType,
        shape: Sequence[IntLike],
        axis: int,
        descending: bool,
        output: str,
        fn: BodyFn,
    ) -> Value:
        """A node holding `fn(b, idx)` sorted along `axis` (stably): the sorted values, or the
        positions along `axis` they come from (`output`)."""
        t = self._type(dtype, shape)
        yield_dtype = dtype if output == "values" else None
        fields = {"axis": axis, "descending": descending, "output": output}
        return self._body_node("sort", t, fn, [pvars(0, len(shape))], yield_dtype, **fields)

    def view(self, src: Value, shape: Sequence[IntLike], index: Index) -> Value:
        """A view of `src`: element `[p0, ...]` of the result (of `shape`) is `src[index]`."""
        t = TensorType(src.type.dtype, tuple(shape), None, self.out.device)
        name = self.fresh(f"{self.base}_view")
        op = View.build(
            "loops.view", source=src, index=list(index), origins=[self.origin], results=[t],
            names=[name],
        )  # fmt: skip
        return self.node(op).result

    def call(
        self, kind: str, symbol: str, args: list, kwargs: dict, aten_args: list | None = None
    ) -> list[Value]:
        """An extern or fallback ATen call on the aten op's arguments (or on `aten_args`, the
        aten values `args` lower, for a call of another op); its results have the layouts torch
        computed from its arguments' layouts, which `input_strides` lists, and `aliases` lists
        those that may be an argument's memory (by the op's schema)."""
        from mind.dialects.aten import aliased_results  # torch's schemas: loaded here

        names = [self.fresh(f"{self.base}_{kind}") for _ in self.outs]
        given = self.op.args if aten_args is None else aten_args
        tensors = [v for v in iter_values(given) if isinstance(v.type, TensorType)]
        strides = [strides_of_value(v) for v in tensors] if tensors else None
        op = LoopsCall.build(
            f"loops.{kind}", values=args, input_strides=strides, attrs=kwargs,
            results=self.outs, names=names, symbol=symbol,
            aliases=aliased_results(self.op) or None,
        )  # fmt: skip
        return self.node(op).results


def short_name(op: Operation) -> str:
    """The op's packet name (`add` for `aten.add.Tensor`), as Inductor lists origins."""
    parts = (op.symbol if op.name == "aten.call" else op.name).split(".")
    return parts[-2] if len(parts) > 2 else parts[-1]


def _exotic(op: Operation) -> bool:
    """Complex and float8 tensors have no scalar ops, and a value made at run time that is
    neither a tensor nor a size (a SymFloat: `scalar_tensor(x.shape[0] * 1.0)`) is no body
    constant: such ops always run in ATen."""
    types = [v.type for v in [*op.operands, *op.results]]
    return any(
        isinstance(t, TensorType)
        and (t.dtype.is_complex or t.dtype.itemsize == 1 and t.dtype.is_floating_point)
        for t in types
    ) or any(not isinstance(v.type, TensorType | SymType) for v in op.operands)


def _on_host(op: Operation) -> bool:
    """Whether `op` makes CPU tensors only, not all 0-d, by a kernel: in a graph that also runs
    on a GPU (an index tensor built from a size, then moved), its kernel could not compile for
    the GPU the graph's kernels compile for, so it runs in ATen, as eager does (Inductor writes
    C++ for it). A 0-d CPU value (an optimizer's step count) stays a node: GPU kernels read it
    by value; a library call (`LIBRARY_CALLS`) has no kernel of mind's."""
    types = [r.type for r in op.results if isinstance(r.type, TensorType)]
    return (
        any(t.rank for t in types)
        and all(t.device is not None and t.device.type == "cpu" for t in types)
        and short_name(op) not in LIBRARY_CALLS
    )


def _takes(fn: Callable, args: list, kwargs: dict) -> bool:
    """Whether `fn(ctx, *args, **kwargs)` binds (a lowering's signature is its contract)."""
    try:
        inspect.signature(fn).bind(None, *args, **kwargs)
    except TypeError:
        return False
    return True


def _self_is_tensor(op: Operation) -> bool:
    """Whether an ATen op's `self`, where its schema has a Tensor there, is a tensor value:
    lowerings read it as one (a number or a size there runs as an ATen call)."""
    from mind.dialects.aten import overload

    target = overload(op.name)
    params = target._schema.arguments if target is not None else []
    if not params or params[0].name != "self" or str(params[0].type) != "Tensor":
        return True
    return bool(op.args) and isinstance(op.args[0], Value) and TENSOR(op.args[0].type)


def _defines(op: Operation) -> bool:
    """Whether `op`'s results hold a size symbol none of its operands holds: a data-dependent
    value (`item()`, Inductor's unbacked symbol) that only running the op gives."""
    known = set().union(*(size_symbols(v.type) for v in op.operands))
    return any(size_symbols(r.type) - known for r in op.results)


def lower_op(ctx: LowerCtx, op: Operation, env: dict[Value, Any]) -> None:
    """Lower one aten op, falling back to an ATen call when no lowering covers it."""
    from .lowerings import NUMBER_SELF, Unsupported, lowering_for  # torch's tables: loaded here

    if op.results and all(isinstance(r.type, SymType) for r in op.results) and not _defines(op):
        env.update({r: r.type.expr for r in op.results})  # SymInt arithmetic: its expression
        return
    if is_collective(op):  # itself, on buffers (realize makes its inputs ones)
        ctx.node(op.clone(env, f"loops.{op.kind}"))
        return
    args, kwargs = (map_values(x, lambda v: env[v]) for x in (op.args, dict(op.attrs)))
    ctx.op, ctx.outs, ctx.origin = op, [r.type for r in op.results], short_name(op)
    ctx.base = op.results[0].name if op.results else ctx.origin
    key = op.symbol if op.name == "aten.call" else op.name
    fn = None if _exotic(op) or ctx.on_gpu and _on_host(op) else lowering_for(key)
    if fn is not None and not (
        _takes(fn, args, kwargs) and (fn in NUMBER_SELF or _self_is_tensor(op))
    ):
        fn = None  # an overload the lowering does not cover (`round.decimals`): an ATen call
    mark = len(ctx.block.ops)
    produced = None
    if fn is not None:
        try:
            produced = fn(ctx, *args, **kwargs)
        except Unsupported:
            for partial in reversed(ctx.block.ops[mark:]):
                partial.erase()
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


def lower_graph(graph: Operation, deterministic: bool = False, unroll_max: int = 0) -> Operation:
    """An `aten.graph` as a `loops.graph` with the same signature and value names."""
    block = Block()
    env: dict[Value, Any] = {}
    for arg in graph.body.args:
        env[arg] = block.add_arg(Value(arg.name, arg.type))
        if isinstance(arg.type, SymType):
            env[arg] = arg.type.expr
    reserved = {v.name for o in graph.walk() for v in o.results} | {a.name for a in block.args}
    ctx = LowerCtx(block, reserved, deterministic, unroll_max, uses_gpu(graph))
    last = graph.body.ops[-1] if graph.body.ops else None
    outputs = set(iter_values(last.values)) if last and last.name == "aten.output" else set()
    for op in input_writes_ordered(graph.body.ops):
        if op.name == "aten.output":
            strides = [strides_of_value(a) for a in op.values]
            values = map_values(op.values, lambda v: env[v])
            block.append(
                LoopsOutput.build("loops.output", values=values, strides=strides, loc=op.loc)
            )
        else:
            mark = len(block.ops)
            with located(op.loc):  # a lowering's error is about the op it lowers
                lower_op(ctx, op, env)
                env.update((r, _own_memory(block, r, env[r])) for r in op.results if r in outputs)
            for made in block.ops[mark:]:  # and so is a later pass's error about what it made
                made.loc = made.loc or op.loc
    return converted_graph(graph, "loops.graph", block)


def _own_memory(block: Block, result: Value, value: Any) -> Any:
    """Output `result`, lowered to `value`, copied where it is made into memory of its own when
    it is a view of a graph input that the aten graph does not alias (a flip along dims of size
    1 reads its input unchanged): AOTAutograd takes such an output for fresh, and it must not
    change when the input is written after (by the graph's own input mutations, which end it,
    or by the caller)."""
    if not isinstance(value, Value) or not is_view(value) or base_of(value) not in block.args:
        return value
    if _aliases_input(result):
        return value  # a view in the aten graph too: AOTAutograd regenerates it from the input
    copy = copy_node(value, f"{value.name}_copy", list(value.owner.origins or []), None)
    block.append(copy)
    return copy.result


def _aliases_input(value: Value) -> bool:
    """Whether aten value `value`'s memory may be a graph input's: an input, or a result that
    its op's schema says aliases an argument (a view's, an in-place op's) that may be one."""
    from mind.dialects.aten import aliased_results  # torch's schemas: loaded here

    op = value.owner
    if is_graph_input(value):
        return True
    if op.results.index(value) not in aliased_results(op):
        return False
    return any(_aliases_input(a) for a in iter_values(op.args) if isinstance(a.type, TensorType))


def input_writes_ordered(ops: list[Operation]) -> list[Operation]:
    """`ops`, the copies into graph inputs that end them (AOTAutograd's input mutations, after
    every other read of the inputs) ordered so that each comes after every copy whose value reads
    the input it overwrites: a copy's value, which lowering leaves unrealized, is computed where
    the copy runs (an SGD step overwrites its momentum buffer, which its parameter's update then
    reads). Copies that read each other's inputs both ways (a Nesterov step's gradient and
    momentum buffer) stay as they are: the copy_ lowering then computes the later one's value
    into a buffer before the copies."""
    end = len(ops) - 1 if ops and ops[-1].name == "aten.output" else len(ops)
    start = end
    while start > 0 and _writes_input(ops[start - 1]):
        start -= 1
    copies = ops[start:end]
    if len(copies) < 2:
        return ops
    writer = {c.args[0]: i for i, c in enumerate(copies)}
    reads = _inputs_read(ops[:start], set(writer))
    waits = [0] * len(copies)  # how many copies must run before each
    unblocks: list[list[int]] = [[] for _ in copies]
    for j, copy in enumerate(copies):
        for i in {writer[x] for x in _read_by(copy.args[1], reads, writer)} - {j}:
            waits[i] += 1
            unblocks[j].append(i)
    ready = [i for i, n in enumerate(waits) if n == 0]
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)  # the first in the graph's order of those ready
        order.append(i)
        for k in unblocks[i]:
            waits[k] -= 1
            if waits[k] == 0:
                heapq.heappush(ready, k)
    if len(order) < len(copies):  # they read each other's inputs in a cycle
        return ops
    return [*ops[:start], *(copies[i] for i in order), *ops[end:]]


def _writes_input(op: Operation) -> bool:
    return op.name == "aten.copy_.default" and is_graph_input(op.args[0])


def _inputs_read(ops: list[Operation], inputs: Container[Value]) -> dict[Value, frozenset[Value]]:
    """Which of `inputs` each result of `ops` is computed from."""
    reads: dict[Value, frozenset[Value]] = {}
    for op in ops:
        used = frozenset().union(*(_read_by(v, reads, inputs) for v in iter_values(op.args)))
        reads.update((r, used) for r in op.results)
    return reads


def _read_by(
    value: Any, reads: dict[Value, frozenset[Value]], inputs: Container[Value]
) -> frozenset[Value]:
    return frozenset((value,)) if value in inputs else reads.get(value, frozenset())


@dataclass(frozen=True)
class Lower(GraphPass, name="lower", input="aten", output="loops"):
    """ATen ops become pointwise / reduction / view / scatter nodes, extern and fallback calls."""

    deterministic: bool = option(
        False, "run scatters as ATen calls (torch.use_deterministic_algorithms, as Inductor)"
    )
    unroll_reductions: int = option(
        8,
        "a reduction of at most this many elements a row (static sizes) is a pointwise node"
        " folding them (Inductor's unroll_reductions_threshold)",
    )

    def run_graph(self, graph: Operation) -> Operation:
        return lower_graph(graph, self.deterministic, self.unroll_reductions)
