"""A reference interpreter for the loops dialect: runs a `loops.graph` on real tensors.

It is the ground truth the lowering is checked against, so it favours obviousness over speed:
every node is materialized as a whole tensor by evaluating its body once over broadcastable
index grids (torch vectorizes, there is no Python loop per element). Realized nodes get the
strides their type declares, so flat-offset loads read memory exactly as generated code would.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, ClassVar

import sympy
import torch
from mind.dialects.aten import collective_call, overload
from mind.dialects.collectives import KINDS
from mind.dialects.common import Call, ConstantTensor, Reinterpret, is_graph_input
from mind.dialects.loops import (
    Cast,
    CheckIndex,
    Constant,
    Index,
    Load,
    Reduction,
    Scan,
    Scatter,
    Sort,
    View,
    Yield,
)
from mind.dialects.pyobjects import from_attr
from mind.dialects.reductions import REDUCTIONS
from mind.dialects.scalar_ops import SCALAR_OPS
from mind.dialects.scans import SCANS, fold_dtype
from mind.dialects.store_modes import STORE_MODES
from mind.dialects.torch_types import from_torch, to_torch
from mind.ir import dtypes as dt
from mind.ir.core import Operation, Value, map_values
from mind.ir.diagnostics import MindError
from mind.ir.dtypes import DType
from mind.ir.symbols import sym
from mind.ir.types import TensorType
from torch.utils._sympy.functions import FloorDiv, ModularIndexing

Env = dict[Value, Any]
#: symbol -> its values over the grid (p vars, indirect i vars)
Bindings = dict[sympy.Symbol, Any]

# -- sympy index expressions -> torch ------------------------------------------------------------


def _floordiv(a: Any, b: Any) -> Any:
    return a // b  # floor semantics for Python ints and torch integer tensors alike


def _minmax(pick: Callable, tensor_fn: Callable) -> Callable:
    def apply(*xs: Any) -> Any:
        out = xs[0]
        for x in xs[1:]:
            if isinstance(out, int) and isinstance(x, int):
                out = pick(out, x)
            else:
                out = tensor_fn(torch.as_tensor(out), torch.as_tensor(x))
        return out

    return apply


def _floor(expr: sympy.Expr, env: Bindings) -> Any:
    num, den = sympy.fraction(sympy.together(expr.args[0]))
    return _floordiv(index_value(num, env), index_value(den, env))


def _ceiling(expr: sympy.Expr, env: Bindings) -> Any:
    num, den = sympy.fraction(sympy.together(expr.args[0]))
    return -_floordiv(-index_value(num, env), index_value(den, env))


def _pow(expr: sympy.Expr, env: Bindings) -> Any:
    base, exp = expr.args
    if not exp.is_Integer or exp < 0:
        raise MindError(f"index expression '{expr}' needs a non-negative integer exponent")
    return index_value(base, env) ** int(exp)


def _fold(fn: Callable) -> Callable:
    def apply(expr: sympy.Expr, env: Bindings) -> Any:
        args = [index_value(a, env) for a in expr.args]
        out = args[0]
        for x in args[1:]:
            out = fn(out, x)
        return out

    return apply


def _args(fn: Callable) -> Callable:
    return lambda expr, env: fn(*(index_value(a, env) for a in expr.args))


_INDEX_OPS: dict[type, Callable[[sympy.Expr, Bindings], Any]] = {
    sympy.Add: _fold(lambda a, b: a + b),
    sympy.Mul: _fold(lambda a, b: a * b),
    sympy.Mod: _args(lambda a, b: a % b),
    sympy.floor: _floor,
    sympy.ceiling: _ceiling,
    sympy.Min: _args(_minmax(min, torch.minimum)),
    sympy.Max: _args(_minmax(max, torch.maximum)),
    sympy.Abs: _args(abs),
    sympy.Pow: _pow,
    FloorDiv: _args(_floordiv),
    ModularIndexing: _args(lambda x, d, m: _floordiv(x, d) % m),
}


def index_value(expr: Any, env: Bindings) -> Any:
    """An integer index expression as a Python int or an int64 tensor over the grid."""
    if isinstance(expr, int):
        return expr
    if expr.is_Integer:
        return int(expr)
    if expr.is_Symbol:
        if expr not in env:
            raise MindError(f"index symbol '{expr}' has no value here")
        return env[expr]
    for kind in type(expr).__mro__:
        if kind in _INDEX_OPS:
            return _INDEX_OPS[kind](expr, env)
    raise MindError(f"cannot evaluate index expression '{expr}' ({type(expr).__name__})")


# -- body ops -----------------------------------------------------------------------------------


def _torch_function(name: str) -> Callable:
    """`torch.<path>` (`special.i1`), or for `<path>:<field>` that field of what it returns
    (`frexp:exponent`)."""
    path, _, field = name.partition(":")
    fn = functools.reduce(getattr, path.split("."), torch)
    return (lambda *xs: getattr(fn(*xs), field)) if field else fn


#: scalar op name -> the torch function computing it elementwise (the table's reference)
SCALAR_FUNCTIONS: dict[str, Callable] = {
    name: _torch_function(spec.torch) for name, spec in SCALAR_OPS.items()
}


def grid(sizes: list[int]) -> Bindings:
    """p0, p1, ...: int64 aranges, each along its own dim of a broadcastable grid."""
    n = len(sizes)
    return {
        sym(f"p{i}"): torch.arange(s).view([s if j == i else 1 for j in range(n)])
        for i, s in enumerate(sizes)
    }


def flat_memory(t: torch.Tensor) -> torch.Tensor:
    """The buffer's memory from its first element on, as a 1-d tensor (flat offsets index it)."""
    span = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride())) if t.numel() else 0
    return t.as_strided((span,), (1,), t.storage_offset())


def _gather(src: torch.Tensor, index: Any, mask: Any) -> Any:
    """src at `index` (a flat offset into memory, or one index per dim); masked-off lanes read
    element 0 so that their (possibly out-of-range) indices never reach memory."""
    flat = not isinstance(index, list)
    if flat:
        src, index = flat_memory(src), [index]
    index = [torch.as_tensor(i) for i in index]
    if mask is not None:
        index = [torch.where(mask, i, 0) for i in index]
    index = torch.broadcast_tensors(*index)
    for i, size in zip(index, src.shape):
        if i.numel() and (int(i.min()) < 0 or int(i.max()) >= size):
            raise IndexError(f"index range [{int(i.min())}, {int(i.max())}] outside [0, {size})")
    return src[tuple(index)]


def scatter_into(memory: torch.Tensor, offset: Any, value: Any, mode: str | None) -> None:
    """Write `value` into the 1-d `memory` at the flat `offset`s (both broadcast to one shape):
    overwriting, or folded in by the store mode's reduction (duplicates all count)."""
    offset, value = torch.broadcast_tensors(torch.as_tensor(offset), torch.as_tensor(value))
    offset, value = offset.reshape(-1), value.reshape(-1).to(memory.dtype)
    if offset.numel() and (int(offset.min()) < 0 or int(offset.max()) >= memory.numel()):
        raise IndexError(f"store at [{int(offset.min())}, {int(offset.max())}] outside memory")
    if mode is None:
        memory[offset] = value
    else:
        memory.scatter_reduce_(0, offset, value, STORE_MODES[mode].reduce)


def indirect_bindings(grid: Bindings, op: Operation, values: dict[Value, Any]) -> Bindings:
    """The grid's p vars and the `i0, i1, ...` of an op's indirect index."""
    bindings = dict(grid)
    for i, v in enumerate(op.indirect or []):
        bindings[sym(f"i{i}")] = values[v]
    return bindings


class Body:
    """Evaluates one node's body over a grid; values are tensors broadcastable to the grid."""

    def __init__(self, env: Env, grid: Bindings):
        self.env = env
        self.grid = grid
        self.values: dict[Value, Any] = {}

    #: body op kind -> the method computing it (scalar ops when absent)
    OPS: ClassVar[dict[str, Callable]] = {}

    def run(self, op: Operation) -> torch.Tensor:
        for inner in op.body.ops:
            if isinstance(inner, Yield):
                return self.values[inner.value]
            self.eval(inner)
        raise MindError(f"'{op.name}' body has no yield", op.loc)

    def eval(self, op: Operation) -> None:
        """Compute one body op; its errors name its location."""
        try:
            result = type(self).OPS.get(op.kind, Body.scalar)(self, op)
        except MindError as exc:
            raise (exc if exc.loc else MindError(str(exc), op.loc)) from None
        except (RuntimeError, IndexError, TypeError) as exc:
            raise MindError(f"'{op.name}' failed: {exc}", op.loc) from exc
        if result is not None:  # (a handler may bind several results itself)
            self.values[op.result] = result

    def arg(self, x: Any) -> Any:
        return self.values[x] if isinstance(x, Value) else x

    def scalar(self, op: Operation) -> torch.Tensor:
        fn = SCALAR_FUNCTIONS.get(op.kind)
        if fn is None:
            raise MindError(f"the evaluator does not know '{op.name}'", op.loc)
        return fn(*(self.values[v] for v in op.operands)).to(to_torch(op.result.type.dtype))

    def load(self, op: Load) -> torch.Tensor:
        dtype = to_torch(op.result.type.dtype)
        bindings = indirect_bindings(self.grid, op, self.values)
        index = op.index
        index = (
            [index_value(e, bindings) for e in index]
            if isinstance(index, list)
            else index_value(index, bindings)
        )
        mask = self.arg(op.mask)
        value = _gather(self.env[op.source], index, mask)
        if mask is not None:
            other = op.other
            value = torch.where(
                mask, value, torch.tensor(0 if other is None else other, dtype=dtype)
            )
        return value.to(dtype)

    def constant(self, op: Constant) -> torch.Tensor:
        return torch.tensor(op.value, dtype=to_torch(op.result.type.dtype))

    def index(self, op: Index) -> torch.Tensor:
        return torch.as_tensor(index_value(op.index, self.grid)).to(to_torch(op.result.type.dtype))

    def cast(self, op: Cast) -> torch.Tensor:
        return self.values[op.x].to(to_torch(op.result.type.dtype))

    def check_index(self, op: CheckIndex) -> torch.Tensor:
        """The index, or an error where one is out of bounds (eager's IndexError)."""
        index, bound = self.values[op.index], self.values[op.bound]
        if bool(((index < 0) | (index >= bound)).any()):
            raise IndexError(f"index out of bounds: 0 <= index < {int(bound)}")
        return index


Body.OPS = {
    "load": Body.load,
    "constant": Body.constant,
    "index": Body.index,
    "cast": Body.cast,
    "check_index": Body.check_index,
}

# -- nodes --------------------------------------------------------------------------------------


def static_sizes(t: TensorType, op: Operation) -> list[int]:
    try:
        return [int(s) for s in t.shape]
    except TypeError:
        raise MindError(
            f"'{op.name}' has symbolic sizes {t}; evaluate needs static shapes", op.loc
        ) from None


def _laid_out(value: Value, data: Any) -> Any:
    """Realized results get their declared strides: flat-offset loads depend on them."""
    t = value.type
    if not isinstance(t, TensorType) or t.strides is None or not isinstance(data, torch.Tensor):
        return data
    strides = tuple(int(s) for s in t.strides)
    if data.stride() == strides:  # laid out already (a reinterpret may overlap itself)
        return data
    out = torch.empty_strided(data.shape, strides, dtype=to_torch(t.dtype), device=data.device)
    return out.copy_(data)


def _pointwise(op: Operation, env: Env) -> list[torch.Tensor]:
    t = op.result.type
    sizes = static_sizes(t, op)
    value = Body(env, grid(sizes)).run(op)
    return [torch.broadcast_to(value, sizes).to(to_torch(t.dtype)).contiguous()]


def reduce_last(kind: str, x: torch.Tensor, dtype: DType) -> torch.Tensor:
    """Reduce the last (flattened reduction) dim of `x` into a result of `dtype` by the kind's
    torch reference (dialects/reductions.py); low-precision floats accumulate in f32."""
    row = REDUCTIONS[kind]
    if row.is_logical:
        x = x.bool()
    if row.upcast and dt.upcast(dtype) != dtype:
        x = x.to(to_torch(dt.upcast(dtype)))
    return getattr(x, row.torch)(-1).to(to_torch(dtype))


def _reduction(op: Reduction, env: Env) -> list[torch.Tensor]:
    t = op.result.type
    sizes = static_sizes(t, op)
    ranges = [int(r) for r in op.reduction_ranges]
    value = Body(env, grid(sizes + ranges)).run(op)
    value = torch.broadcast_to(value, sizes + ranges).reshape(*sizes, math.prod(ranges))
    return [reduce_last(op.reduction_type, value, t.dtype)]


def _scatter(op: Scatter, env: Env) -> list[torch.Tensor]:
    """The target's memory (a copy laid out like it; a graph input's own, which the graph
    overwrites), each element of the ranges written at the index its body gives."""
    target = env[op.target]
    out = target
    if not is_graph_input(op.target):
        out = torch.empty_strided(target.shape, target.stride(), dtype=target.dtype).copy_(target)
    body = Body(env, grid([int(n) for n in op.ranges]))
    for inner in op.body.ops[:-1]:
        body.eval(inner)
    term = op.body.terminator
    points = indirect_bindings(body.grid, term, body.values)
    flat = sum(
        (torch.as_tensor(index_value(e, points)) * s for e, s in zip(term.index, out.stride())),
        start=torch.tensor(0),
    )
    scatter_into(flat_memory(out), flat, body.values[term.value], op.mode)
    return [out]


def scan_dim(kind: str, x: torch.Tensor, dim: int, dtype: DType) -> torch.Tensor:
    """Scan `x` along `dim` into a result of `dtype` by the kind's torch reference
    (dialects/scans.py), in the dtype kernels fold in."""
    row = SCANS[kind]
    out = getattr(torch, row.torch)(x.to(to_torch(fold_dtype(from_torch(x.dtype)))), dim)
    if isinstance(out, tuple):  # cummax, cummin: the values, or the indices for index kinds
        out = out.indices if row.is_index else out.values
    return out.to(to_torch(dtype))


def sort_dim(x: torch.Tensor, dim: int, descending: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The values of `x` sorted along `dim` stably (NaN largest), and the positions they come
    from, as torch.sort(stable=True)."""
    return tuple(torch.sort(x, dim=dim, descending=descending, stable=True))


def _along_axis(op: Scan | Sort, env: Env) -> list[torch.Tensor]:
    t = op.result.type
    sizes = static_sizes(t, op)
    value = torch.broadcast_to(Body(env, grid(sizes)).run(op), sizes)
    if isinstance(op, Scan):
        return [scan_dim(op.scan_type, value, op.axis, t.dtype)]
    values, indices = sort_dim(value, op.axis, op.descending)
    return [(indices if op.output == "indices" else values).to(to_torch(t.dtype))]


def _view(op: View, env: Env) -> list[torch.Tensor]:
    sizes = static_sizes(op.result.type, op)
    points = grid(sizes)
    try:
        value = _gather(env[op.source], [index_value(e, points) for e in op.index], None)
    except IndexError as exc:
        raise MindError(f"'{op.name}' reads out of range: {exc}", op.loc) from exc
    return [torch.broadcast_to(value, sizes).contiguous()]


def _aten_call(op: Call, env: Env) -> list[Any]:
    target = overload(op.symbol or "")
    if target is None:
        raise MindError(f"'@{op.symbol}' is not an ATen overload", op.loc)
    names = {a.name for a in target._schema.arguments}
    args = from_attr(op.values, env)
    kwargs = from_attr({k: v for k, v in op.attrs.items() if k in names}, env)
    out = target(*args, **kwargs)
    return list(out) if isinstance(out, tuple | list) else [out]


def _collective(op: Operation, env: Env) -> list[Any]:
    """A start or a wait, run by torch's functional collectives (a process group must exist)."""
    target, args, kwargs = collective_call(op)
    out = target(*from_attr(args, env), **from_attr(kwargs, env))
    return list(out) if isinstance(out, tuple | list) else [out]


def _reinterpret(op: Reinterpret, env: Env) -> list[torch.Tensor]:
    src, t = env[op.buffer], op.result.type
    sizes, strides = static_sizes(t, op), [int(s) for s in t.strides]
    return [src.as_strided(sizes, strides, src.storage_offset() + int(op.offset))]


def _constant_tensor(op: ConstantTensor, env: Env) -> list[torch.Tensor]:
    t = op.result.type
    return [torch.tensor(op.data, dtype=to_torch(t.dtype)).reshape(static_sizes(t, op))]


NodeFn = Callable[[Operation, Env], list[Any]]
#: what runs the same in the loops and scheduled dialects: calls, constants, reinterprets,
#: collectives
MEMORY_OPS: dict[str, NodeFn] = {
    "extern": _aten_call,
    "fallback": _aten_call,
    "constant_tensor": _constant_tensor,
    "reinterpret": _reinterpret,
    **dict.fromkeys(KINDS, _collective),
}
#: node kind -> its result tensors (before realized results are laid out)
NODES: dict[str, NodeFn] = {
    "pointwise": _pointwise,
    "reduction": _reduction,
    "scan": _along_axis,
    "sort": _along_axis,
    "view": _view,
    "scatter": _scatter,
    **MEMORY_OPS,
}


def _bind_inputs(graph_op: Operation, inputs: list[torch.Tensor]) -> Env:
    args = graph_op.body.args
    if len(args) != len(inputs):
        raise MindError(
            f"'@{graph_op.symbol}' takes {len(args)} inputs, got {len(inputs)}", graph_op.loc
        )
    env: Env = {}
    for arg, x in zip(args, inputs):
        t = arg.type
        if isinstance(t, TensorType):
            if (
                not isinstance(x, torch.Tensor)
                or from_torch(x.dtype) != t.dtype
                or x.dim() != t.rank
            ):
                got = f"{from_torch(x.dtype)}{list(x.shape)}" if isinstance(x, torch.Tensor) else x
                raise MindError(f"input %{arg.name} must be {t}, got {got}", graph_op.loc)
            if t.strides is None:
                x = x.contiguous()
            elif tuple(x.stride()) != tuple(int(s) for s in t.strides) and x.numel() > 1:
                raise MindError(
                    f"input %{arg.name} has strides {list(x.stride())}, its type says {t}",
                    graph_op.loc,
                )
        env[arg] = x
    return env


def run_graph(graph_op: Operation, inputs: list[torch.Tensor], nodes: dict[str, NodeFn]) -> list:
    """Run a graph op's body on `inputs`, each op by `nodes` (by kind); the output's values."""
    env = _bind_inputs(graph_op, inputs)
    for op in graph_op.body.ops:
        if op.kind == "output":
            return list(map_values(op.values, lambda v: env[v]))
        if op.kind not in nodes:
            raise MindError(f"the evaluator does not know the node '{op.name}'", op.loc)
        for value, data in zip(op.results, nodes[op.kind](op, env)):
            env[value] = _laid_out(value, data)
    raise MindError(f"'@{graph_op.symbol}' has no output", graph_op.loc)


def evaluate(graph_op: Operation, inputs: list[torch.Tensor]) -> list:
    """Run a `loops.graph` on `inputs`; returns the values of its `loops.output`, in order."""
    if graph_op.name != "loops.graph":
        raise MindError(f"evaluate runs a 'loops.graph', not '{graph_op.name}'", graph_op.loc)
    return run_graph(graph_op, inputs, NODES)
