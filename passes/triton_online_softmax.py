"""Online softmax: a looped kernel computes a row's max and its sum of exp(v - max) in ONE r-loop
(as Inductor does), so softmax and log_softmax read each row twice instead of three times.

Per lane of the R0 block the loop carries the running max m and the running sum s, rescaled
whenever the max grows:

    m_new = maximum(m, x);  s = where(m_new == -inf, 0, s * exp(m - m_new) + exp(x - m_new))

and after the loop the lanes combine: M = max(m, axis); S = sum(where(m == -inf, 0,
s * exp(m - M)), axis). A lane that has seen only -inf (masked lanes, whose x is -inf, or -inf
inputs) holds s = 0, which keeps exp(-inf - -inf) = nan out of the sum; an all -inf row gets
M = -inf, and the normalizing loop's exp(x - M) gives eager's nan.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mind.dialects.scheduled import Reduction
from mind.dialects.triton import dtype_of
from mind.ir import dtypes as dt
from mind.ir.core import Operation, Value
from mind.ir.dtypes import DType

from .triton_phases import Phases

if TYPE_CHECKING:
    from .triton_kernel import KernelBuilder, Scope


def fuse_online_softmax(phases: Phases) -> dict[Operation, Operation]:
    """Each `sum(exp(v' - max(v)))` whose v' is v recomputed, mapped to its max; the sum moves
    into its max's phase (its r-loop), so the loop that computed it alone disappears."""
    pairs: dict[Operation, Operation] = {}
    for op in phases.ops:
        top = _online_max(phases, op)
        if top is not None and top not in pairs.values():
            pairs[op] = top
            phases.level[op] = phases.level[top]
    return pairs


def _online_max(phases: Phases, op: Operation) -> Operation | None:
    """The max reduction whose result `op`, a sum, reads through exp(v' - max), else None."""
    if not _is_reduction(op, "sum"):
        return None
    exp = phases.defs.get(op.value)
    sub = phases.defs.get(exp.x) if exp is not None and exp.name == "scheduled.exp" else None
    if sub is None or sub.name != "scheduled.sub":
        return None
    value, top = sub.a, phases.defs.get(sub.b)
    if top is None or not _is_reduction(top, "max"):
        return None
    dtypes = {v.type.dtype for v in (top.value, top.result, value, op.result)}
    if len(dtypes) != 1 or not dtypes.pop().is_floating_point:
        return None
    return top if _same(value, top.value, phases.defs) else None


def _is_reduction(op: Operation, kind: str) -> bool:
    return isinstance(op, Reduction) and op.reduction_type == kind


def _same(a, b, defs: dict[Value, Operation]) -> bool:
    """Structural equality of body values (the fused body reloads what it already loaded)."""
    if isinstance(a, Value) or isinstance(b, Value):
        if a is b:
            return True
        x, y = defs.get(a), defs.get(b)
        return (
            x is not None
            and y is not None
            and x.name == y.name
            and x.results.index(a) == y.results.index(b)
            and [r.type for r in x.results] == [r.type for r in y.results]
            and _same(x.args, y.args, defs)
            and _same(dict(x.attrs), dict(y.attrs), defs)
        )
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(u, v, defs) for u, v in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k], defs) for k in a)
    return type(a) is type(b) and a == b


def _constants(b: KernelBuilder, scope: Scope, dtype: DType) -> tuple[Value, Value]:
    ones = (1,) * len(b.layout.full_shape)
    return b.full(scope, float("-inf"), dtype, ones), b.full(scope, 0.0, dtype, ones)


def online_step(b: KernelBuilder, scope: Scope, s: Value, m: Value, x: Value, m_new: Value):
    """The running sum after one block: s * exp(m - m_new) + exp(x - m_new), 0 where the lane
    has seen only -inf."""
    dtype = dtype_of(s)
    ninf, zero = _constants(b, scope, dtype)
    scale = b.emit_op(scope, "exp", [b.emit_op(scope, "sub", [m, m_new], dtype)], dtype)
    term = b.emit_op(scope, "exp", [b.emit_op(scope, "sub", [x, m_new], dtype)], dtype)
    total = b.emit_op(scope, "add", [b.emit_op(scope, "mul", [s, scale], dtype), term], dtype)
    empty = b.emit_op(scope, "eq", [m_new, ninf], dt.b8)
    return b.emit_op(scope, "where", [empty, zero, total], dtype)


def online_combine(b: KernelBuilder, scope: Scope, s: Value, m: Value, row_max: Value) -> Value:
    """The row's sum from the per-lane (m, s): each lane's s rescaled to the row's max."""
    dtype = dtype_of(s)
    ninf, zero = _constants(b, scope, dtype)
    scale = b.emit_op(scope, "exp", [b.emit_op(scope, "sub", [m, row_max], dtype)], dtype)
    empty = b.emit_op(scope, "eq", [m, ninf], dt.b8)
    lanes = b.emit_op(
        scope, "where", [empty, zero, b.emit_op(scope, "mul", [s, scale], dtype)], dtype
    )
    return b.emit(
        scope, "reduce", [lanes, 1], dtype, b.layout.groups[0].shape, {"reduction_type": "sum"}
    )
