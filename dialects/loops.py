"""The loops dialect: the graph after lowering, where every node says how to compute one element
of its tensor (Inductor's Pointwise / Reduction / views / buffers). See docs/IR.md.

A node whose result type has strides is realized (a buffer with that layout); one without is
recomputed by its consumers. Loads from buffers use flat offsets; loads from unrealized nodes and
views use one index expression per dim.
"""

from __future__ import annotations

import sympy
from mind.ir import dtypes as dt
from mind.ir.constraints import (
    BOOL,
    INDEX,
    INT,
    LAID_OUT,
    NONE,
    NUMBER,
    SCALAR,
    STR,
    TENSOR,
    Constraint,
    dtype_is,
    list_of,
    one_of,
    value,
)
from mind.ir.core import Operation
from mind.ir.opdef import Op, arg, attr, operand, opt_attr, region, result
from mind.ir.registry import Dialect, VerifyError, register_dialect
from mind.ir.types import contiguous_strides

from .collectives import add_collective_ops
from .common import (  # noqa: F401  (is_buffer: re-exported)
    ExternCall,
    Output,
    Reinterpret,
    add_graph_ops,
    add_memory_ops,
    is_buffer,
    is_graph_input,
    verify_aliases,
    verify_overwrite,
    verify_sole_reader,
)
from .index_symbols import verify_loop_vars, verify_size_symbols
from .reductions import REDUCTIONS, SINGLE_KINDS
from .scalar_ops import register_scalar_ops
from .scans import SCAN_KINDS, SCANS, SORT_OUTPUTS
from .store_modes import STORE_MODES

ORIGINS = list_of(STR)
#: the templates a reduction may be computed by (passes/mm_templates.py, codegen/template.py)
TEMPLATES = ("mm",)
#: the body values an index reads through (`i0, i1, ...` in it stand for them)
INDIRECT = list_of(value(SCALAR))
#: the strides a value must have, or none (where any layout will do)
STRIDES = list_of(list_of(INDEX) | NONE)


def is_realized(op: Operation) -> bool:
    """A node whose (first) result is a buffer: a tensor type with strides."""
    return bool(op.results) and LAID_OUT(op.results[0].type)


# -- body ops (shared with the scheduled dialect) ------------------------------------------------
class Load(Op):
    """Read one element: at a flat offset from a buffer, at one index per dim otherwise"""

    source = operand(TENSOR)
    index = arg(INDEX | list_of(INDEX))
    mask = opt_attr(value(dtype_is(dt.b8)))
    other = opt_attr(NUMBER)
    indirect = opt_attr(INDIRECT)
    result = result(SCALAR)


class Constant(Op):
    """A scalar constant"""

    value = arg(NUMBER)
    result = result(SCALAR)


class Index(Op):
    """The value of an index expression"""

    index = arg(INDEX)
    result = result(SCALAR)


class Cast(Op):
    """Convert to the result dtype"""

    x = operand(SCALAR)
    result = result(SCALAR)


#: an i64 scalar: what an index read from a tensor is
I64 = Constraint("i64", lambda t: SCALAR(t) and t.dtype == dt.i64)


class CheckIndex(Op):
    """The index, asserting 0 <= index < bound (a gather's bounds check: a device assert)"""

    index = operand(I64)
    bound = operand(I64)
    result = result(I64)


class Yield(Op):
    """The element's value (or the value to reduce)"""

    value = operand(SCALAR)


def _verify_load(op: Load) -> None:
    src, index = op.source, op.index
    if is_buffer(src):
        if isinstance(index, list):
            raise VerifyError(
                f"'{op.name}' from buffer '%{src.name}' takes a flat offset, not {index!r}", op.loc
            )
    elif not isinstance(index, list) or len(index) != src.type.rank:
        raise VerifyError(
            f"'{op.name}' from unrealized '%{src.name}' needs {src.type.rank} index expressions",
            op.loc,
        )
    if op.result.type.dtype != src.type.dtype:
        raise VerifyError(
            f"type mismatch: '{op.name}' of {src.type.dtype} declared {op.result.type}", op.loc
        )


def _verify_constant(op: Constant) -> None:
    """An integer constant is an integer its dtype holds (Triton refuses to narrow one)."""
    dtype, value = op.result.type.dtype, op.value
    if dtype.is_floating_point or dtype.kind == "b":
        return
    if not isinstance(value, int) or not dt.lowest(dtype) <= value <= dt.highest(dtype):
        raise VerifyError(f"'{op.name}' of {dtype} cannot hold {value!r}", op.loc)


def register_body_ops(dialect: Dialect) -> None:
    """The ops of a loop body, shared with the scheduled dialect."""
    register_scalar_ops(dialect)
    dialect.add("load", Load, verify=_verify_load)
    dialect.add("constant", Constant, verify=_verify_constant)
    dialect.add("index", Index)
    dialect.add("cast", Cast)
    dialect.add("check_index", CheckIndex)
    dialect.add("yield", Yield)


# -- nodes ---------------------------------------------------------------------------------------
class Pointwise(Op):
    """One element per index: the body's yielded value"""

    origins = opt_attr(ORIGINS)
    layout = opt_attr(one_of("flexible"))
    result = result(TENSOR)
    body = region()


class Reduction(Pointwise):
    """Reduce the body's value over the reduction ranges"""

    reduction_ranges = attr(list_of(INDEX))
    reduction_type = attr(one_of(*SINGLE_KINDS))
    template = opt_attr(one_of(*TEMPLATES))


class Scan(Pointwise):
    """Fold the body's values along `axis`, keeping it: element i along it folds elements 0..i"""

    axis = attr(INT)
    scan_type = attr(one_of(*SCAN_KINDS))


class Sort(Pointwise):
    """Sort the body's values along `axis`, stably, NaN largest: the values, or their positions"""

    axis = attr(INT)
    descending = attr(BOOL)
    output = attr(one_of(*SORT_OUTPUTS))


#: nodes whose element depends on a whole row of the body's values: always realized
ROW_NODES = (Reduction, Scan, Sort)


def _check_yield(
    op: Pointwise,
    expected: dt.DType | None,
    index_kind: str | None,
    widened: dt.DType | None = None,
) -> None:
    """The body ends in a yield of `expected` (None: any dtype), or of `widened`, a dtype the
    kernel widens to `expected`; an index kind gives i64."""
    term = op.body.terminator
    if not isinstance(term, Yield):
        raise VerifyError(f"'{op.name}' body must end with a yield", op.loc)
    result = op.result.type.dtype
    if index_kind is not None and result != dt.i64:
        raise VerifyError(
            f"type mismatch: '{op.name}' {index_kind} gives i64, not {result}", op.loc
        )
    got = term.value.type.dtype
    if expected is not None and got not in (expected, widened):
        takes = "" if widened in (None, expected) else f", which takes {expected} or {widened}"
        raise VerifyError(
            f"type mismatch: '{op.name}' yields {got} for a {widened or expected} result{takes}",
            term.loc,
        )


def _verify_body(op: Pointwise) -> None:
    """The body yields the element: of the result dtype, or as the reduction kind says."""
    kind = REDUCTIONS[op.reduction_type] if isinstance(op, Reduction) else None
    result = op.result.type.dtype
    expected = kind.yield_dtype(result) if kind is not None else result
    _check_yield(op, expected, kind.name if kind is not None and kind.is_index else None, result)
    if kind is not None and 0 in op.reduction_ranges and not kind.empty_is_neutral:
        raise VerifyError(f"'{op.name}' {kind.name} over no element has no value", op.loc)
    ranges = op.reduction_ranges if isinstance(op, Reduction) else ()
    verify_loop_vars(op, op.result.type.rank + len(ranges))


def _verify_along_axis(op: Scan | Sort) -> None:
    """`axis` is a dim of the result; the body yields what the scan kind (or the sort's
    output) takes."""
    rank = op.result.type.rank
    if not 0 <= op.axis < rank:
        raise VerifyError(f"'{op.name}' axis {op.axis} is not a dim of {op.result.type}", op.loc)
    verify_loop_vars(op, rank)
    result = op.result.type.dtype
    if isinstance(op, Scan):
        kind = SCANS[op.scan_type]
        _check_yield(op, kind.yield_dtype(result), kind.name if kind.is_index else None)
    else:
        index = op.output == "indices"
        _check_yield(op, None if index else result, "indices" if index else None)


class View(Op):
    """Reindex a tensor without memory: element [p0, ...] is source[index]"""

    source = operand(TENSOR)
    index = arg(list_of(INDEX))
    origins = opt_attr(ORIGINS)
    result = result(TENSOR)


def _verify_view(op: View) -> None:
    if len(op.index) != op.source.type.rank:
        raise VerifyError(
            f"'{op.name}' needs {op.source.type.rank} index expressions for its source", op.loc
        )
    verify_loop_vars(op, op.result.type.rank)


class Scatter(Op):
    """Write the body's value to target[index] per index of the ranges, in place (by the mode)

    Each element overwrites, or is folded in by the store mode (atomic_add: duplicates all
    count); the result is the target's memory after every write."""

    target = operand(TENSOR)
    ranges = attr(list_of(INDEX))
    mode = opt_attr(one_of(*STORE_MODES))
    origins = opt_attr(ORIGINS)
    result = result(TENSOR)
    body = region()


class YieldAt(Op):
    """A scatter's element: its value and where in the target it goes

    The index holds one expression per dim of the target, over the p vars and the symbols
    `i0, i1, ...` of the `indirect` values."""

    value = operand(SCALAR)
    index = arg(list_of(INDEX))
    indirect = opt_attr(INDIRECT)


#: the nodes a scatter may update: a buffer the graph computes, or a graph input it overwrites;
#: never a constant or a view
UPDATABLE = (Pointwise, Scatter)


def _verify_scatter(op: Scatter) -> None:
    """Its result is its target updated: the same type; the target is computed in the graph and
    read by nothing else (the scatter consumes it), nor by its own body; or it is a graph input
    the scatter overwrites (`_verify_overwrite`)."""
    target, t = op.target, op.result.type
    if target.type != t:
        raise VerifyError(
            f"type mismatch: '{op.name}' updates '%{target.name}' ({target.type}) but declares {t}",
            op.loc,
        )
    if is_graph_input(target):
        _verify_overwrite(op)
    elif not isinstance(target.owner, UPDATABLE):
        raise VerifyError(
            f"'{op.name}' updates '%{target.name}', which no node of the graph computes",
            op.loc,
        )
    else:
        verify_sole_reader(op, target)
    term = op.body.terminator
    if not isinstance(term, YieldAt):
        raise VerifyError(f"'{op.name}' body must end with a yield_at", op.loc)
    verify_loop_vars(op, len(op.ranges))
    if len(term.index) != t.rank:
        raise VerifyError(
            f"'{term.name}' needs {t.rank} index expressions for the target", term.loc
        )
    if term.value.type.dtype != t.dtype:
        raise VerifyError(
            f"type mismatch: '{op.name}' yields {term.value.type.dtype} for a {t.dtype} target",
            term.loc,
        )


def _verify_overwrite(op: Scatter) -> None:
    """A scatter into a graph input (AOTAutograd's input mutations, kept in the graph) writes
    each element once, plainly (no mode, no indirect index), and only its own element where
    its body reads the input; its result, the input's new memory, is read by nothing but the
    graph's output (a mutated input the graph returns: `x.mul_(2)`), and the graph's other
    reads of the input come before it."""
    term, target = op.body.terminator, op.target
    if op.mode is not None or not isinstance(term, YieldAt) or term.indirect:
        raise VerifyError(
            f"'{op.name}' overwrites input '%{target.name}' by a mode or an indirect index", op.loc
        )
    if any(not isinstance(user, Output) for user in op.result.users):
        raise VerifyError(
            f"'{op.name}' overwrites input '%{target.name}', but its result is read", op.loc
        )
    strides = target.type.strides or contiguous_strides(target.type.shape)
    written = sum((i * s for i, s in zip(term.index, strides)), start=sympy.Integer(0))
    verify_overwrite(
        op,
        target,
        written,
        lambda other: (
            isinstance(other, View | Reinterpret)
            or isinstance(other, Pointwise)
            and other.result.type.strides is None
        ),  # unrealized: computed where it is read
        lambda other: isinstance(other, Scatter) and other.target is target,
    )


#: the ATen ops that run as `loops.extern` (library calls with kernels of their own: cuBLAS's,
#: cuDNN's), by name: lowered to it (passes/lowerings/extern.py), bound by their public torch
#: function in the generated code (target/bindings.py)
LIBRARY_CALLS = ("mm", "bmm", "addmm", "baddbmm", "convolution")


class LoopsCall(ExternCall):
    """An ATen call on buffers laid out as `input_strides` says (one entry per tensor argument)"""

    input_strides = opt_attr(STRIDES)
    origins = opt_attr(ORIGINS)


class LoopsOutput(Output):
    """The graph's outputs; `strides` are the layouts they must have (none: any)"""

    strides = opt_attr(STRIDES)


LOOPS = register_dialect(Dialect("loops"))
add_graph_ops(LOOPS, LoopsOutput, verify=verify_size_symbols)
LOOPS.add("pointwise", Pointwise, verify=_verify_body)
LOOPS.add("reduction", Reduction, verify=_verify_body)
LOOPS.add("scan", Scan, verify=_verify_along_axis)
LOOPS.add("sort", Sort, verify=_verify_along_axis)
LOOPS.add("view", View, verify=_verify_view)
LOOPS.add("scatter", Scatter, verify=_verify_scatter)
LOOPS.add("yield_at", YieldAt)
LOOPS.add(
    "extern",
    LoopsCall,
    symbol=True,
    open_attrs=True,
    verify=verify_aliases,
    summary="An ATen call with its own kernel (mm, conv)",
)
LOOPS.add(
    "fallback",
    LoopsCall,
    symbol=True,
    open_attrs=True,
    verify=verify_aliases,
    summary="An ATen op without a lowering, run by ATen",
)
add_memory_ops(LOOPS)
add_collective_ops(LOOPS)
register_body_ops(LOOPS)
