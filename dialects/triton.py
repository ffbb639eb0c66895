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
import torch
from mind.ir.core import Block, Operation, Value
from mind.ir.registry import Dialect, VerifyError, register_dialect
from mind.ir.symbols import IntLike, sym
from mind.ir.types import DTYPES, OpaqueType, ScalarType, TensorType, Type, dtype_name

from .loops import verify_reinterpret
from .scalar_ops import SCALAR_OPS

#: reductions `triton.reduce` performs along an axis; argmax/argmin go through `reduce_index`
REDUCE_TYPES = ("sum", "prod", "max", "min", "any", "all")
INDEX_REDUCE_TYPES = ("argmax", "argmin")
KERNEL_KINDS = ("pointwise", "persistent_reduction", "reduction")

_PTR = re.compile(r"ptr<([a-z0-9]+)>$")


def neutral(kind: str, dtype: torch.dtype):
    """The value a masked lane contributes: it leaves the reduction unchanged."""
    if dtype == torch.bool:
        return kind in ("all", "prod", "argmin", "min")
    low = float("-inf") if dtype.is_floating_point else torch.iinfo(dtype).min
    high = float("inf") if dtype.is_floating_point else torch.iinfo(dtype).max
    table = {"sum": 0, "prod": 1, "max": low, "argmax": low, "min": high, "argmin": high}
    value = table.get(kind, 0)
    return float(value) if dtype.is_floating_point else int(value)


def ptr_type(dtype: torch.dtype) -> OpaqueType:
    return OpaqueType(f"ptr<{dtype_name(dtype)}>")


def ptr_dtype(type_: Type) -> torch.dtype | None:
    """The element dtype of a `!ptr<dt>` type, None for any other type."""
    match = _PTR.match(type_.name) if isinstance(type_, OpaqueType) else None
    return DTYPES.get(match.group(1)) if match else None


def block_type(dtype: torch.dtype, shape: tuple[IntLike, ...]) -> TensorType:
    return TensorType(dtype, tuple(shape))


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


def dtype_of(value: Value) -> torch.dtype:
    t = value.type
    if isinstance(t, TensorType | ScalarType):
        return t.dtype
    raise VerifyError(f"'%{value.name}' of type {t} is not a block or scalar")


def _result_block(op: Operation) -> TensorType:
    t = op.results[0].type if op.results else None
    if not isinstance(t, TensorType):
        raise VerifyError(f"'{op.name}' must produce a block type, not {t}", op.loc)
    return t


def _check_shape(op: Operation, values: list[Value], result: TensorType) -> None:
    expected = broadcast_shapes([shape_of(v) for v in values] + [result.shape], op)
    if tuple(expected) != tuple(result.shape):
        raise VerifyError(
            f"'{op.name}' result shape {list(result.shape)} does not cover its operands", op.loc
        )


def _verify_elementwise(op: Operation) -> None:
    """Scalar ops on blocks: the scalar dtype rule, plus broadcasting shapes."""
    spec = SCALAR_OPS[op.name.split(".", 1)[1]]
    values = [a for a in op.args if isinstance(a, Value)]
    if len(values) != len(op.args):
        raise VerifyError(f"'{op.name}' takes SSA values only", op.loc)
    dtypes = [dtype_of(v) for v in values]
    if spec.name == "where":
        if dtypes[0] != torch.bool:
            raise VerifyError(f"'{op.name}' condition must be b8", op.loc)
        dtypes = dtypes[1:]
    if len(set(dtypes)) > 1:
        names = ", ".join(dtype_name(d) for d in dtypes)
        raise VerifyError(
            f"type mismatch: '{op.name}' operands have different dtypes ({names})", op.loc
        )
    result = _result_block(op)
    expected = torch.bool if spec.result == "bool" else dtypes[0]
    if result.dtype != expected:
        raise VerifyError(
            f"type mismatch: '{op.name}' gives {dtype_name(expected)}, declared {result}", op.loc
        )
    _check_shape(op, values, result)


def _verify_index(op: Operation) -> None:
    expr, names = op.args
    if not isinstance(expr, int | sympy.Expr) or not isinstance(names, dict):
        raise VerifyError("'triton.index' takes (expression, {name: %value})", op.loc)
    if not all(isinstance(v, Value) for v in names.values()):
        raise VerifyError("'triton.index' binds names to values only", op.loc)
    result = _result_block(op)
    if result.dtype not in (torch.int32, torch.int64):
        raise VerifyError("'triton.index' produces i32 or i64", op.loc)
    _check_shape(op, list(names.values()), result)


def _verify_load(op: Operation) -> None:
    ptr, offset = op.args
    dtype = ptr_dtype(ptr.type) if isinstance(ptr, Value) else None
    if dtype is None:
        raise VerifyError("'triton.load' reads through a !ptr<dt> kernel argument", op.loc)
    result = _result_block(op)
    if result.dtype != dtype:
        raise VerifyError(
            f"type mismatch: load of {dtype_name(dtype)} declared {dtype_name(result.dtype)}",
            op.loc,
        )
    operands = [v for v in (offset, op.attrs.get("mask")) if isinstance(v, Value)]
    _check_shape(op, operands, result)


def _verify_store(op: Operation) -> None:
    ptr, _offset, value = op.args
    dtype = ptr_dtype(ptr.type) if isinstance(ptr, Value) else None
    if dtype is None:
        raise VerifyError("'triton.store' writes through a !ptr<dt> kernel argument", op.loc)
    if isinstance(value, Value) and dtype_of(value) != dtype:
        raise VerifyError(
            f"type mismatch: store of {dtype_name(dtype_of(value))} to a {dtype_name(dtype)} pointer",
            op.loc,
        )


def _verify_reduce(op: Operation) -> None:
    kinds = INDEX_REDUCE_TYPES if op.name.endswith("_index") else REDUCE_TYPES
    if op.attrs["reduction_type"] not in kinds:
        raise VerifyError(
            f"'{op.name}' reduction_type must be one of {', '.join(kinds)}, "
            f"got '{op.attrs['reduction_type']}'",
            op.loc,
        )


def _verify_for(op: Operation) -> None:
    args = op.body.args
    init = op.attrs["init"]
    if not args or len(args) - 1 != len(init) or len(init) != len(op.results):
        raise VerifyError(
            "'triton.for' needs an induction variable, then one carried value per init and result",
            op.loc,
        )
    term = op.body.terminator
    if term is None or term.name != "triton.yield" or len(term.args) != len(init):
        raise VerifyError("'triton.for' body must end with a yield of its carried values", op.loc)
    for carried, start, result in zip(args[1:], init, op.results):
        if not (carried.type == result.type == getattr(start, "type", carried.type)):
            raise VerifyError(f"'triton.for' carried value '%{carried.name}' changes type", op.loc)


def _verify_kernel(op: Operation) -> None:
    if op.attrs["kind"] not in KERNEL_KINDS:
        raise VerifyError(
            f"kernel kind must be one of {', '.join(KERNEL_KINDS)}, got '{op.attrs['kind']}'",
            op.loc,
        )
    if not isinstance(op.attrs["constexprs"], dict):
        raise VerifyError("kernel constexprs must be a dict {XBLOCK: 1024, ...}", op.loc)


def _verify_wrapper(op: Operation) -> None:
    term = op.body.terminator
    if term is None or term.name != "triton.output":
        raise VerifyError("'triton.wrapper' must end with 'triton.output'", op.loc)


def _sibling_kernel(op: Operation, name: str) -> Operation | None:
    """The kernel `@name` among the top-level ops around the wrapper that holds `op`."""
    block: Block | None = op.parent
    while block is not None and block.parent is not None and block.parent.parent is not None:
        block = block.parent.parent.parent
    ops = block.ops if block is not None else []
    return next((k for k in ops if k.name == "triton.kernel" and k.symbol == name), None)


def _verify_launch(op: Operation) -> None:
    kernel = _sibling_kernel(op, op.symbol)
    if kernel is None:
        raise VerifyError(f"'triton.launch' of unknown kernel '@{op.symbol}'", op.loc)
    if len(op.args) != len(kernel.body.args):
        raise VerifyError(
            f"'@{op.symbol}' takes {len(kernel.body.args)} arguments, launched with {len(op.args)}",
            op.loc,
        )
    grid = op.attrs["grid"]
    if not (isinstance(grid, tuple) and len(grid) == 3):
        raise VerifyError("'triton.launch' grid must be a 3-tuple", op.loc)


TRITON = register_dialect(Dialect("triton"))
T = TRITON
T.op("kernel", results=0, regions=1, symbol=True, signature=True,
     attrs=("kind", "constexprs", "num_warps", "num_stages"), verify=_verify_kernel,
     summary="a @triton.jit kernel")  # fmt: skip
T.op("program_id", args=("axis",), summary="tl.program_id(axis)")
T.op("arange", args=("start", "end"), summary="tl.arange(start, end)")
T.op("expand_dims", args=("value", "axis"), summary="a new axis of size 1 (value[:, None])")
T.op("index", args=("expr", "names"), verify=_verify_index, summary="index math in sympy")
T.op(
    "load",
    args=("ptr", "offset"),
    verify=_verify_load,
    summary="tl.load(ptr + offset, mask, other)",
)
T.op("store", args=("ptr", "offset", "value"), results=0, verify=_verify_store,
     summary="tl.store(ptr + offset, value, mask)")  # fmt: skip
T.op("full", args=("value",), summary="a constant block, tl.full")
T.op("cast", args=("value",), summary="value.to(dtype)")
T.op("broadcast_to", args=("value",), summary="tl.broadcast_to to the result shape")
for _spec in SCALAR_OPS.values():
    T.op(_spec.name, args=("a", "b", "c")[: _spec.arity], verify=_verify_elementwise)
T.op("reduce", args=("value", "axis"), attrs=("reduction_type",), verify=_verify_reduce,
     summary="reduce along an axis, keeping it with size 1")  # fmt: skip
T.op("reduce_index", args=("value", "index", "axis"), attrs=("reduction_type",),
     verify=_verify_reduce, summary="argmax/argmin: the index of the best value along an axis")  # fmt: skip
T.op("combine_index", args=("acc", "acc_index", "value", "index"), results=2,
     attrs=("reduction_type",), verify=_verify_reduce,
     summary="elementwise best of (acc, value) with indices, for looped argmax/argmin")  # fmt: skip
T.op("for", results=None, regions=1, signature=True, attrs=("range", "init"), verify=_verify_for,
     summary="for iv in range(start, stop, step) with loop-carried values")  # fmt: skip
T.op("yield", variadic=True, results=0, summary="the carried values of the next iteration")

T.op("wrapper", results=0, regions=1, symbol=True, signature=True, verify=_verify_wrapper,
     summary="the host function `call(args)`")  # fmt: skip
T.op("assert_size_stride", args=("tensor", "sizes", "strides"), results=0)
T.op("empty_strided", args=("sizes", "strides"), summary="allocate a buffer (result type)")
T.op("reuse", args=("buffer",), summary="take over a dead buffer of the same storage")
T.op("launch", variadic=True, results=0, symbol=True, attrs=("grid",), verify=_verify_launch,
     summary="kernel[grid](args)")  # fmt: skip
T.op("extern", variadic=True, results=None, symbol=True, summary="an ATen call, run by ATen")
T.op("reinterpret", args=("buffer",), attrs=("offset",), verify=verify_reinterpret,
     summary="torch.as_strided(buffer, sizes, strides, its offset + offset): an alias")  # fmt: skip
T.op("constant_tensor", symbol=True, attrs=("data",), summary="a constant buffer")
T.op("output", variadic=True, results=0, summary="the values call() returns")
T.op(
    "device_assert",
    args=("cond",),
    attrs=("msg",),
    results=0,
    summary="tl.device_assert(cond, msg, mask): checked where the kernel runs with debug",
)
