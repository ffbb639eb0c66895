"""The triton dialect: Triton kernels and the host wrapper that launches them. See docs/IR.md.

A kernel's values are blocks typed like tensors whose sizes name the kernel's block sizes
(`f32[XBLOCK, R0_BLOCK]`); pointers are `!ptr<f32>`. The ops mirror triton.language one to one
(program_id, arange, load, store, reductions, a `for` over reduction blocks) so that emission to
Python is a line per op. Index math is one op, `triton.index`, holding a sympy expression over
named values: it reads like the source Inductor writes (`r0_1 + 128*x0`).
"""

from __future__ import annotations

import re

import sympy
from mind.ir import dtypes as dt
from mind.ir.constraints import (
    BOOL,
    INDEX,
    INT,
    LAID_OUT,
    NUMBER,
    SCALAR,
    STR,
    TENSOR,
    Constraint,
    dict_of,
    dtype_is,
    list_of,
    one_of,
    tuple_of,
    value,
)
from mind.ir.core import Operation, Value
from mind.ir.dtypes import DTYPES, DType
from mind.ir.opdef import Op, arg, attr, operand, opt_attr, region, result, var_args, var_results
from mind.ir.registry import Dialect, VerifyError, register_dialect
from mind.ir.symbols import sym
from mind.ir.types import OpaqueType, ScalarType, TensorType, Type

from .collectives import add_collective_ops
from .common import ExternCall, add_graph_ops, add_memory_ops, verify_aliases
from .loops import ORIGINS
from .reductions import INDEX_KINDS, REDUCE_KINDS
from .scalar_ops import op_classes, register_scalar_ops, result_dtype
from .scans import SCAN_KINDS, SCANS
from .store_modes import STORE_MODES

_PTR = re.compile(r"ptr<([a-z0-9]+)>$")


def ptr_type(dtype: DType) -> OpaqueType:
    return OpaqueType(f"ptr<{dtype.name}>")


def ptr_dtype(type_: Type) -> DType | None:
    """The element dtype of a `!ptr<dt>` type, None for any other type."""
    match = _PTR.match(type_.name) if isinstance(type_, OpaqueType) else None
    return DTYPES.get(match.group(1)) if match else None


def block_dim(name: str) -> sympy.Symbol:
    """A block-size symbol (`XBLOCK`): a kernel constexpr used as a block dimension."""
    return sym(name)


def broadcast_shapes(shapes: list[tuple], op: Operation | None = None) -> tuple:
    """Triton's broadcasting: align right, a 1 stretches to the other size."""
    rank = max((len(s) for s in shapes), default=0)
    out: list = [1] * rank
    for shape in shapes:
        for i, size in enumerate((1,) * (rank - len(shape)) + tuple(shape)):
            if size != 1 and out[i] not in (1, size):
                raise VerifyError(
                    f"'{op.name if op else 'triton'}' cannot broadcast {out[i]} with {size}",
                    op.loc if op else None,
                )
            out[i] = size if size != 1 else out[i]
    return tuple(out)


def shape_of(value: Value) -> tuple:
    return value.type.shape if isinstance(value.type, TensorType) else ()


def dtype_of(value: Value) -> DType:
    """The element dtype of a block or scalar value."""
    return value.type.dtype


def _check_shape(op: Operation, values: list[Value], result: TensorType) -> None:
    expected = broadcast_shapes([shape_of(v) for v in values] + [result.shape], op)
    if tuple(expected) != tuple(result.shape):
        raise VerifyError(
            f"'{op.name}' result shape {list(result.shape)} does not cover its operands", op.loc
        )


#: a pointer kernel argument, `!ptr<f32>`
POINTER = Constraint("!ptr<dtype>", lambda t: ptr_dtype(t) is not None)
#: a kernel value: a block (`f32[XBLOCK, 1]`, `i32[]`) or a scalar argument (`%xnumel: i32`)
BLOCK = TENSOR | SCALAR
MASK = value(dtype_is(dt.b8))
#: a kernel's numel: its scalar argument (`%r0_numel: i32`), or the 0-d constant a static one is
NUMEL = value(SCALAR | Constraint("block[]", lambda t: isinstance(t, TensorType) and not t.shape))
#: a bound a loop or a launch computes with: an index expression, a kernel argument or a 0-d
#: block (a program id)
BOUND = INDEX | NUMEL


def _verify_elementwise(op: Operation) -> None:
    """Scalar ops on blocks: the scalar dtype rule, plus broadcasting shapes."""
    values = list(op.operands)
    expected = result_dtype(op, [dtype_of(v) for v in values])
    result = op.result.type
    if not isinstance(result, TensorType) or result.dtype != expected:
        raise VerifyError(f"type mismatch: '{op.name}' gives {expected}, declared {result}", op.loc)
    _check_shape(op, values, result)


# -- kernels -------------------------------------------------------------------------------------
class Kernel(Op):
    """A @triton.jit kernel; `kind` names the strategy that made it, `constexprs` are the block
    sizes, passed at launch"""

    kind = attr(STR)
    constexprs = attr(dict_of(STR, INT))
    num_warps = attr(INT)
    num_stages = attr(INT)
    origins = opt_attr(ORIGINS)
    #: a cooperative kernel's f32 partials per program and row: its last three arguments (the
    #: partials' workspace, the groups' semaphores, the group count) come from its launcher
    cooperative = opt_attr(INT)
    body = region()


#: the arguments a cooperative kernel's launcher adds (runtime/cooperative.py, `Cooperation`)
COOPERATIVE_ARGS = ("ws_ptr", "sem_ptr", "xgroups")


def _verify_kernel(op: Kernel) -> None:
    if op.cooperative is None:
        return
    args = op.body.args
    names = tuple(a.name for a in args[-len(COOPERATIVE_ARGS) :])
    types = [ptr_dtype(a.type) for a in args[-len(COOPERATIVE_ARGS) :]]
    if names != COOPERATIVE_ARGS or types[:2] != [dt.f32, dt.i32] or op.cooperative < 1:
        raise VerifyError(
            f"'{op.name}' cooperative kernel must end with arguments %ws_ptr: !ptr<f32>, "
            "%sem_ptr: !ptr<i32>, %xgroups, and keep at least 1 partial",
            op.loc,
        )


class ProgramId(Op):
    """tl.program_id(axis)"""

    axis = arg(one_of(0, 1, 2))
    result = result(TENSOR)


class Arange(Op):
    """tl.arange(start, end)"""

    start = arg(INT)
    end = arg(INDEX)
    result = result(TENSOR)


class ExpandDims(Op):
    """A new axis of size 1 (value[:, None])"""

    value = operand(TENSOR)
    axis = arg(INT)
    result = result(TENSOR)


def _verify_axis(op: ExpandDims | Reduce | ReduceIndex | Last) -> None:
    """An axis of the operand (expand_dims may also add one after the last)."""
    _check_axis(op, op.value, 1 if isinstance(op, ExpandDims) else 0)


def _check_axis(op: Operation, operand: Value, extra: int = 0) -> None:
    rank = len(shape_of(operand)) + extra
    if not 0 <= op.axis < rank:
        raise VerifyError(f"'{op.name}' axis {op.axis} is not in [0, {rank})", op.loc)


class IndexOp(Op):
    """Index math: a sympy expression whose symbols are the values `names` binds"""

    expr = arg(INDEX)
    names = arg(dict_of(STR, value(BLOCK)))
    result = result(TENSOR)


def _verify_index(op: IndexOp) -> None:
    result = op.result.type
    if result.dtype not in (dt.i32, dt.i64):
        raise VerifyError("'triton.index' produces i32 or i64", op.loc)
    _check_shape(op, list(op.names.values()), result)


class Load(Op):
    """tl.load(ptr + offset, mask, other, eviction_policy)"""

    ptr = operand(POINTER)
    offset = operand(BLOCK)
    mask = opt_attr(MASK)
    other = opt_attr(NUMBER)
    eviction_policy = opt_attr(one_of("evict_first", "evict_last"))
    #: ".cg": past L1, as a value other programs wrote must be read (L1 is not coherent)
    cache_modifier = opt_attr(one_of(".cg"))
    result = result(TENSOR)


def _verify_load(op: Load) -> None:
    dtype = ptr_dtype(op.ptr.type)
    if op.result.type.dtype != dtype:
        raise VerifyError(f"type mismatch: load of {dtype} declared {op.result.type.dtype}", op.loc)
    _check_shape(op, [v for v in (op.offset, op.mask) if v is not None], op.result.type)


class Store(Op):
    """tl.store(ptr + offset, value, mask); with a mode, its atomic (tl.atomic_add(...))"""

    ptr = operand(POINTER)
    offset = operand(BLOCK)
    value = operand(BLOCK)
    mask = opt_attr(MASK)
    mode = opt_attr(one_of(*STORE_MODES))


def _verify_store(op: Store) -> None:
    dtype = ptr_dtype(op.ptr.type)
    if dtype_of(op.value) != dtype:
        raise VerifyError(
            f"type mismatch: store of {dtype_of(op.value)} to a {dtype} pointer", op.loc
        )
    mode = STORE_MODES.get(op.mode)
    if mode is not None and dtype not in mode.dtypes:
        takes = " ".join(sorted(d.name for d in mode.dtypes))
        raise VerifyError(f"'{op.name}' {mode.name} of {dtype}: Triton takes {takes}", op.loc)


class Barrier(Op):
    """Wait until `count` programs have come to the semaphore `sem + offset` (the programs of one
    cooperative group), their stores before it visible to the loads after it"""

    sem = operand(POINTER)
    offset = operand(BLOCK)
    count = attr(INT)


def _verify_barrier(op: Barrier) -> None:
    if ptr_dtype(op.sem.type) != dt.i32 or shape_of(op.offset) or op.count < 1:
        raise VerifyError(
            f"'{op.name}' needs an i32 semaphore at a scalar offset and a count of at least 1",
            op.loc,
        )


class DeviceAssert(Op):
    """tl.device_assert(ok, msg, mask): the kernel compiles with debug=True"""

    ok = operand(dtype_is(dt.b8))
    msg = attr(STR)
    mask = opt_attr(MASK)


class Full(Op):
    """A constant block, tl.full"""

    value = arg(NUMBER)
    result = result(TENSOR)


class Convert(Op):
    """value.to(dtype) (cast), or tl.broadcast_to the result shape (broadcast_to)"""

    value = operand(BLOCK)
    result = result(TENSOR)


class Reduce(Op):
    """Reduce along an axis, keeping it with size 1"""

    value = operand(TENSOR)
    axis = arg(INT)
    reduction_type = attr(one_of(*REDUCE_KINDS))
    result = result(TENSOR)


class ReduceIndex(Op):
    """argmax/argmin: the index of the best value along an axis (first on ties)"""

    value = operand(TENSOR)
    index = operand(TENSOR)
    axis = arg(INT)
    reduction_type = attr(one_of(*INDEX_KINDS))
    result = result(TENSOR)


class CombineIndex(Op):
    """Elementwise best of (acc, value) with their indices: a looped argmax's step"""

    acc = operand(TENSOR)
    acc_index = operand(TENSOR)
    value = operand(TENSOR)
    index = operand(TENSOR)
    reduction_type = attr(one_of(*INDEX_KINDS))
    best = result(TENSOR)
    best_index = result(TENSOR)


class ScanBlocks(Op):
    """tl.associative_scan along an axis with the kind's combine: a block per value it folds"""

    values = var_args(value(TENSOR))
    axis = attr(INT)
    scan_type = attr(one_of(*SCAN_KINDS))
    scanned = var_results(TENSOR)


def _verify_scan(op: ScanBlocks) -> None:
    kind = SCANS[op.scan_type]
    if len(op.values) != kind.arity or len(op.results) != kind.arity:
        raise VerifyError(
            f"'{op.name}' {kind.name} folds {kind.arity} blocks into as many, not "
            f"{len(op.values)} into {len(op.results)}",
            op.loc,
        )
    for v, r in zip(op.values, op.results):
        if v.type != r.type:
            raise VerifyError(f"type mismatch: '{op.name}' of {v.type} declared {r.type}", op.loc)
    _check_axis(op, op.values[0])


class Combine(Op):
    """The scan kind's combine of earlier blocks (first) and later ones: a looped scan's step"""

    values = var_args(value(TENSOR))
    scan_type = attr(one_of(*SCAN_KINDS))
    combined = var_results(TENSOR)


def _verify_combine(op: Combine) -> None:
    kind = SCANS[op.scan_type]
    n = kind.arity
    if len(op.values) != 2 * n or len(op.results) != n:
        raise VerifyError(
            f"'{op.name}' {kind.name} combines 2 x {n} blocks into {n}, not "
            f"{len(op.values)} into {len(op.results)}",
            op.loc,
        )
    for earlier, later, out in zip(op.values[:n], op.values[n:], op.results):
        if not dtype_of(earlier) == dtype_of(later) == out.type.dtype:
            raise VerifyError(
                f"type mismatch: '{op.name}' of {dtype_of(earlier)} and {dtype_of(later)} "
                f"declared {out.type.dtype}",
                op.loc,
            )
        _check_shape(op, [earlier, later], out.type)


class Last(Op):
    """The last element along an axis, kept with size 1: a scan's running value at block end"""

    value = operand(TENSOR)
    axis = arg(INT)
    result = result(TENSOR)


def _verify_last(op: Last) -> None:
    _verify_axis(op)
    shape = list(shape_of(op.value))
    shape[op.axis] = 1
    expected = TensorType(dtype_of(op.value), tuple(shape))
    if op.result.type != expected:
        raise VerifyError(
            f"type mismatch: '{op.name}' gives {expected}, declared {op.result.type}", op.loc
        )


class SortBlocks(Op):
    """Sort along the last axis, stably, NaN largest, indices >= numel last; indices follow"""

    value = operand(TENSOR)
    index = operand(TENSOR)
    descending = attr(BOOL)
    numel = opt_attr(NUMEL)
    values = result(TENSOR)
    indices = result(TENSOR)


def _verify_sort(op: SortBlocks) -> None:
    if shape_of(op.value) != shape_of(op.index):
        raise VerifyError(
            f"'{op.name}' sorts {list(shape_of(op.value))} values by {list(shape_of(op.index))} "
            "indices",
            op.loc,
        )
    for operand_, out in ((op.value, op.values), (op.index, op.indices)):
        if operand_.type != out.type:
            raise VerifyError(
                f"type mismatch: '{op.name}' of {operand_.type} declared {out.type}", op.loc
            )


class Dot(Op):
    """tl.dot(a, b): the product of an [M, K] block by a [K, N] block, accumulated in f32"""

    a = operand(TENSOR)
    b = operand(TENSOR)
    input_precision = opt_attr(one_of("ieee", "tf32"))
    result = result(TENSOR)


def _verify_dot(op: Dot) -> None:
    a, b, out = shape_of(op.a), shape_of(op.b), op.result.type
    if len(a) != 2 or len(b) != 2 or a[1] != b[0]:
        raise VerifyError(
            f"'triton.dot' needs [M, K] and [K, N] blocks, got {list(a)} and {list(b)}", op.loc
        )
    if dtype_of(op.a) != dtype_of(op.b):
        raise VerifyError(f"'triton.dot' multiplies {dtype_of(op.a)} by {dtype_of(op.b)}", op.loc)
    if out.dtype != dt.f32 or tuple(out.shape) != (a[0], b[1]):
        raise VerifyError(f"'triton.dot' gives f32[{a[0]}, {b[1]}], declared {out}", op.loc)


class For(Op):
    """for iv in range(start, stop, step), with loop-carried values"""

    range = attr(tuple_of(BOUND, BOUND, BOUND))
    init = attr(list_of(value(BLOCK)))
    carried = var_results(BLOCK)
    body = region()


def _verify_for(op: For) -> None:
    args, init = op.body.args, op.init
    if not args or len(args) - 1 != len(init) or len(init) != len(op.results):
        raise VerifyError(
            "'triton.for' needs an induction variable, then one carried value per init and result",
            op.loc,
        )
    term = op.body.terminator
    if not isinstance(term, Yield) or len(term.values) != len(init):
        raise VerifyError("'triton.for' body must end with a yield of its carried values", op.loc)
    for carried, start, out in zip(args[1:], init, op.results):
        if not (carried.type == out.type == start.type):
            raise VerifyError(f"'triton.for' carried value '%{carried.name}' changes type", op.loc)


class Yield(Op):
    """The carried values of the next iteration"""

    values = var_args(value(BLOCK))


class ProgramRange(Op):
    """A combo kernel's part: its body runs on the programs `start` to `stop - 1` of grid axis 0
    (`pid`), and its argument is the program's index among them, from 0"""

    pid = attr(value(TENSOR))
    start = attr(INT)
    stop = attr(INT)
    body = region()


def _verify_program_range(op: ProgramRange) -> None:
    args = op.body.args
    if len(args) != 1 or args[0].type != op.pid.type:
        raise VerifyError(
            f"'triton.program_range' takes one argument of its program's type {op.pid.type}", op.loc
        )
    if not 0 <= op.start < op.stop:
        raise VerifyError(
            f"'triton.program_range' runs no program: {op.start} to {op.stop - 1}", op.loc
        )


# -- the wrapper ---------------------------------------------------------------------------------
SIZES = tuple_of(INDEX, ...)


class AssertSizeStride(Op):
    """The input check: assert_size_stride(tensor, sizes, strides)"""

    tensor = operand(TENSOR)
    sizes = arg(SIZES)
    strides = arg(SIZES)


class EmptyStrided(Op):
    """Allocate a buffer (laid out as the result type says) on the inputs' device"""

    sizes = arg(SIZES)
    strides = arg(SIZES)
    result = result(LAID_OUT)


class Reuse(Op):
    """Take over a dead buffer of the same storage size, dtype and device"""

    buffer = operand(LAID_OUT)
    result = result(LAID_OUT)


class Free(Op):
    """del buffers no later op uses (Inductor's): freed once no output, view or reuse holds them"""

    buffers = var_args()


GRID = tuple_of(INDEX, INDEX, INDEX)
#: an autotuning candidate: (kernel, {constexprs..., num_warps, num_stages}, grid)
CANDIDATE = tuple_of(STR, dict_of(STR, INT), GRID)


class Launch(Op):
    """kernel[grid](args, XBLOCK=..., num_warps=..., num_stages=...); with `candidates`, the
    autotuner launches the fastest of the kernel as configured and of each candidate"""

    values = var_args()
    grid = attr(GRID)
    candidates = opt_attr(list_of(CANDIDATE))


def _sibling_kernel(op: Operation, name: str) -> Operation | None:
    """The kernel `@name` among the top-level ops around the wrapper that holds `op`."""
    while op.parent_op is not None:
        op = op.parent_op
    ops = op.parent.ops if op.parent is not None else []
    return next((k for k in ops if isinstance(k, Kernel) and k.symbol == name), None)


def launcher_args(kernel: Operation) -> tuple[str, ...]:
    """The arguments of `kernel` its launcher passes, not the wrapper's launch."""
    return COOPERATIVE_ARGS if kernel.cooperative is not None else ()


def _call_params(kernel: Operation) -> int:
    """How many of `kernel`'s arguments a launch passes."""
    return len(kernel.body.args) - len(launcher_args(kernel))


def _verify_launch(op: Launch) -> None:
    kernel = _sibling_kernel(op, op.symbol)
    if kernel is None:
        raise VerifyError(f"'triton.launch' of unknown kernel '@{op.symbol}'", op.loc)
    params = kernel.body.args[: _call_params(kernel)]
    if len(op.args) != len(params):
        added = len(launcher_args(kernel))
        note = f" (its launcher adds {added})" if added else ""
        raise VerifyError(
            f"'@{op.symbol}' takes {len(params)} arguments{note}, launched with {len(op.args)}",
            op.loc,
        )
    for param, given in zip(params, op.args):
        if isinstance(param.type, ScalarType) and isinstance(given, Value):
            if isinstance(given.type, TensorType) and given.type.shape:
                raise VerifyError(
                    f"'@{op.symbol}' takes '%{param.name}' by value: launched with {given.type},"
                    " not a 0-d tensor",
                    op.loc,
                )
    for name, config, _ in op.candidates or []:
        other = _sibling_kernel(op, name)
        if other is None or _call_params(other) != len(params):
            raise VerifyError(
                f"candidate '@{name}' takes other arguments than '@{op.symbol}'", op.loc
            )
        if set(config) != {*other.constexprs, "num_warps", "num_stages"}:
            raise VerifyError(
                f"candidate '@{name}' sets {sorted(config)}, not its constexprs, num_warps and num_stages",
                op.loc,
            )


TRITON = register_dialect(Dialect("triton"))
TRITON.add("kernel", Kernel, symbol=True, signature=True, verify=_verify_kernel)
TRITON.add("program_id", ProgramId)
TRITON.add("arange", Arange)
TRITON.add("expand_dims", ExpandDims, verify=_verify_axis)
TRITON.add("index", IndexOp, verify=_verify_index)
TRITON.add("load", Load, verify=_verify_load)
TRITON.add("store", Store, verify=_verify_store)
TRITON.add("barrier", Barrier, verify=_verify_barrier)
TRITON.add("device_assert", DeviceAssert)
TRITON.add("full", Full)
TRITON.add("cast", Convert, summary="value.to(dtype)")
TRITON.add("broadcast_to", Convert, summary="tl.broadcast_to the result shape")
register_scalar_ops(
    TRITON,
    op_classes(BLOCK, TENSOR),
    _verify_elementwise,
    "A scalar op on blocks: the scalar dtype rule, shapes broadcast",
)
TRITON.add("reduce", Reduce, verify=_verify_axis)
TRITON.add("reduce_index", ReduceIndex, verify=_verify_axis)
TRITON.add("combine_index", CombineIndex)
TRITON.add("scan", ScanBlocks, verify=_verify_scan)
TRITON.add("combine", Combine, verify=_verify_combine)
TRITON.add("last", Last, verify=_verify_last)
TRITON.add("sort", SortBlocks, verify=_verify_sort)
TRITON.add("dot", Dot, verify=_verify_dot)
TRITON.add("for", For, signature=True, verify=_verify_for)
TRITON.add("yield", Yield)
TRITON.add("program_range", ProgramRange, signature=True, verify=_verify_program_range)
add_graph_ops(TRITON, name="wrapper", summary="The host function `call(args)`")
TRITON.add("assert_size_stride", AssertSizeStride)
TRITON.add("empty_strided", EmptyStrided)
TRITON.add("reuse", Reuse)
TRITON.add("free", Free)
TRITON.add("launch", Launch, symbol=True, verify=_verify_launch)
TRITON.add("extern", ExternCall, symbol=True, open_attrs=True, verify=verify_aliases)
add_memory_ops(TRITON, "torch.as_strided(buffer, sizes, strides, its offset + offset): an alias")
add_collective_ops(TRITON)
