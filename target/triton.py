"""Triton IR -> a Python module, laid out like Inductor's output code: imports, one
`@triton.jit` function per kernel, what is bound once when the module loads (bindings.py), and
`def call(args)` (wrapper.py). This module emits the kernels and puts the module together.

Integer kernel arguments that vary between calls are compiled unspecialized
(`do_not_specialize`). An r-loop up to a kernel argument is a `while`: the interpreter cannot
`range` over a scalar argument (numpy 2 refuses int() of its 1-element array), and compiled
Triton accepts both.
"""

from __future__ import annotations

import keyword
import math
import re

from mind.dialects.reductions import REDUCTIONS
from mind.dialects.scalar_ops import SCALAR_OPS
from mind.dialects.store_modes import STORE_MODES
from mind.dialects.triton import dtype_of, shape_of
from mind.ir import dtypes as dt
from mind.ir.core import Module, Operation, Value
from mind.ir.diagnostics import MindError
from mind.ir.generated import HOST

from .bindings import Host
from .names import Names
from .pyexpr import py_expr, py_float, tl_dtype
from .scans import KERNEL_OPS, TUPLES
from .wrapper import emit_wrapper

#: what the kernels need: a compile worker runs the kernels alone, without torch
#: (runtime/compile_job.py)
HEADER = """\
import triton
import triton.language as tl

from mind.runtime.triton_helpers import for_current_mode

triton_helpers = for_current_mode()
"""
#: after the kernels (from the `HOST` line on): what the loading process runs besides, to bind
#: them and call them
HOST_HEADER = f"""\
{HOST}
import torch
from torch._C._dynamo.guards import assert_size_stride

from mind.runtime.autotune import tune
from mind.runtime.launch import (
    F32,
    I1,
    I32,
    I64,
    bind,
    device_guard,
    empty_strided_cpu,
    empty_strided_cuda,
    get_raw_stream,
    misaligned,
    reinterpret_tensor,
)
"""

_RESERVED = set(re.findall(r"\b[A-Za-z_][A-Za-z0-9_]*\b", HEADER + HOST_HEADER)) | {
    "args", "stream", "range", "float", "int", "len", "print", "min", "max"}  # fmt: skip


def emit(module: Module) -> str:
    """The Python source of a triton-dialect module: kernels, load-time bindings, wrappers."""
    for op in module.ops:
        if op.name not in ("triton.kernel", "triton.wrapper"):
            raise MindError(f"cannot emit '{op.name}' as Python (expected triton IR)", op.loc)
        _check_function_name(op)
    kernels = [op for op in module.ops if op.name == "triton.kernel"]
    wrappers = [op for op in module.ops if op.name == "triton.wrapper"]
    names = Names(_RESERVED | {op.symbol for op in module.ops})
    host = Host(module, names)
    for wrapper in wrappers:
        host.bind_wrapper(wrapper)
    parts = [HEADER]
    parts += [
        emit_kernel(op, names.scope(), host.unspecialized.get(op.symbol, [])) for op in kernels
    ]
    # the wrappers first: a device they name (an extern's `device=cpu`) becomes a host line
    calls = [emit_wrapper(op, host) for op in wrappers]
    parts.append(HOST_HEADER)
    if host.lines:
        parts.append("\n".join(host.lines) + "\n")
    return "\n\n".join(parts + calls)


def _check_function_name(op: Operation) -> None:
    """A kernel or wrapper becomes a Python function of its symbol's name, beside the module's
    own names."""
    name = op.symbol or ""
    if not name.isidentifier() or keyword.iskeyword(name) or name in _RESERVED:
        raise MindError(f"'@{name}' cannot name a Python function", op.loc)


# -- kernels ---------------------------------------------------------------------------------
def _shape(shape: tuple) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _value_text(value, name) -> str:
    if isinstance(value, Value):
        return name(value)
    if isinstance(value, float):
        return py_float(value)
    return py_expr(value, lambda s: s) if not isinstance(value, bool) else repr(value)


def _kernel_op(op: Operation, n: Names) -> str:
    """The right-hand side for one kernel op."""
    if op.name in KERNEL_OPS:
        return KERNEL_OPS[op.name](op, n)
    kind = op.name.split(".", 1)[1]
    a = [_value_text(x, n) for x in op.args if not isinstance(x, dict)]
    result = op.results[0].type if op.results else None
    if kind in SCALAR_OPS:
        return SCALAR_OPS[kind].triton.format(*a)
    if kind == "program_id":
        cast = ".to(tl.int64)" if result.dtype != dt.i32 else ""
        return f"tl.program_id({a[0]}){cast}"
    if kind == "arange":
        return f"tl.arange({a[0]}, {a[1]})"
    if kind == "expand_dims":
        dims = [":"] * len(shape_of(op.value))
        dims.insert(op.axis, "None")
        return f"{a[0]}[{', '.join(dims)}]"
    if kind == "index":
        names = op.names
        text = py_expr(op.expr, lambda s: n(names[s]) if s in names else s)
        widen = result.dtype != dt.i32 and all(dtype_of(v) == dt.i32 for v in names.values())
        return f"({text}).to(tl.int64)" if widen and names else text
    if kind == "load":
        extra = f", {n(op.mask)}" if op.mask is not None else ""
        if op.other is not None:
            extra += f", other={_value_text(op.other, n)}"
        if op.eviction_policy is not None:
            extra += f", eviction_policy={op.eviction_policy!r}"
        if op.cache_modifier is not None:
            extra += f", cache_modifier={op.cache_modifier!r}"
        return f"tl.load({a[0]} + ({a[1]}){extra})"
    if kind == "full":
        return _full(result, a[0], op.args[0])
    if kind == "cast":
        # f64 to a 16-bit float through f32, as torch converts (each rounding to nearest even):
        # a direct conversion rounds once, and 535.74998 became 535.5 where torch's half is 536
        narrow = dtype_of(op.value) == dt.f64 and result.dtype in (dt.f16, dt.bf16)
        return f"{a[0]}{'.to(tl.float32)' if narrow else ''}.to({tl_dtype(result.dtype)})"
    if kind == "broadcast_to":
        return f"tl.broadcast_to({a[0]}, {_shape(result.shape)})"
    if kind == "reduce":
        template = REDUCTIONS[op.reduction_type].triton
        return template.format(v=a[0], axis=a[1], dt=tl_dtype(result.dtype))
    if kind == "reduce_index":
        fn = REDUCTIONS[op.reduction_type].triton
        return f"triton_helpers.{fn}({a[0]}, {a[1]}, {a[2]}).to(tl.int64)"
    if kind == "dot":  # f16/bf16 through the helper (see runtime/triton_helpers/math_*.py)
        if dtype_of(op.a) != dt.f32:
            return f"triton_helpers.dot({a[0]}, {a[1]})"
        precision = op.input_precision or "ieee"
        return f"tl.dot({a[0]}, {a[1]}, input_precision={precision!r}, out_dtype=tl.float32)"
    if kind == "combine_index":
        fn = REDUCTIONS[op.reduction_type].combine
        return f"triton_helpers.{fn}_with_index({', '.join(a)})"
    raise MindError(f"cannot emit '{op.name}' in a kernel", op.loc)


def _full(result, text: str, value) -> str:
    """A constant block. Triton makes any value equal to 0 its type's null value, +0.0, so -0.0
    is +0.0 negated; a bf16 constant is made in f32 (Triton's interpreter has none)."""
    negative_zero = isinstance(value, float) and value == 0 and math.copysign(1.0, value) < 0
    dtype = "tl.float32" if result.dtype == dt.bf16 else tl_dtype(result.dtype)
    block = f"tl.full({_shape(result.shape)}, {'0.0' if negative_zero else text}, {dtype})"
    if negative_zero:
        block = f"triton_helpers.neg({block})"
    return f"{block}.to(tl.bfloat16)" if result.dtype == dt.bf16 else block


def _kernel_lines(ops: list[Operation], n: Names, depth: int) -> list[str]:
    pad = "    " * depth
    lines = []
    for op in ops:
        if op.name == "triton.store":
            lines.append(pad + _store(op, n))
        elif op.name == "triton.barrier":
            sem, offset = (_value_text(x, n) for x in (op.sem, op.offset))
            lines.append(f"{pad}triton_helpers.group_barrier({sem} + ({offset}), {op.count})")
        elif op.name == "triton.device_assert":
            mask = f", {n(op.mask)}" if op.mask is not None else ""
            lines.append(f"{pad}tl.device_assert({n(op.ok)}, {op.msg!r}{mask})")
        elif op.name == "triton.for":
            lines += _for_lines(op, n, depth)
        elif op.name == "triton.program_range":
            lines += _range_lines(op, n, depth)
        elif op.name == "triton.yield":
            continue  # the enclosing for assigns the carried values
        else:
            targets = ", ".join(n(r) for r in op.results) + ("," if op.name in TUPLES else "")
            lines.append(f"{pad}{targets} = {_kernel_op(op, n)}")
    return lines


def _store(op: Operation, n: Names) -> str:
    """`tl.store(ptr + (offset), value, mask)`, or with a mode its atomic (relaxed: no other
    memory is ordered by it), as Inductor emits `tl.atomic_add(..., sem='relaxed')`."""
    ptr, offset, value = (_value_text(x, n) for x in (op.ptr, op.offset, op.value))
    mask = f", {n(op.mask)}" if op.mask is not None else ""
    if op.mode is None:
        return f"tl.store({ptr} + ({offset}), {value}{mask})"
    return f"{STORE_MODES[op.mode].triton}({ptr} + ({offset}), {value}{mask}, sem='relaxed')"


def _for_lines(op: Operation, n: Names, depth: int) -> list[str]:
    pad = "    " * depth
    iv, *carried = op.body.args
    start, stop, step = (_value_text(x, n) for x in op.range)
    lines = [f"{pad}{n(c)} = {n(i)}" for c, i in zip(carried, op.init)]
    dynamic = isinstance(op.range[1], Value)
    if dynamic:
        lines.append(f"{pad}{n(iv)} = {stop} * 0 + {start}")
        lines.append(f"{pad}while {n(iv)} < {stop}:")
    else:
        lines.append(f"{pad}for {n(iv)} in range({start}, {stop}, {step}):")
    lines += _kernel_lines(op.body.ops, n, depth + 1)
    nexts = op.body.terminator.args
    lines += [f"{pad}    {n(c)} = {n(v)}" for c, v in zip(carried, nexts)]
    if dynamic:
        lines.append(f"{pad}    {n(iv)} += {step}")
    lines += [f"{pad}{n(r)} = {n(c)}" for r, c in zip(op.results, carried)]
    return lines


def _range_lines(op: Operation, n: Names, depth: int) -> list[str]:
    """A combo kernel's part: `if` its programs, its argument the program's offset among them."""
    pad, pid = "    " * depth, n(op.pid)
    test = f"{pid} < {op.stop}" if op.start == 0 else f"({pid} >= {op.start}) & ({pid} < {op.stop})"
    offset = f"{pid} - {op.start}" if op.start else pid
    (arg,) = op.body.args
    lines = [f"{pad}if {test}:", f"{pad}    {n(arg)} = {offset}"]
    return lines + _kernel_lines(op.body.ops, n, depth + 1)


def emit_kernel(op: Operation, n: Names, unspecialized: list[str]) -> str:
    """`@triton.jit def kernel(...)`; integer arguments that vary between calls are listed in
    `do_not_specialize`, so the kernel bound at load serves every call. A kernel that asserts
    compiles with `debug=True` (Triton drops device asserts otherwise; `bind` reads the flag)."""
    params = [n(a) for a in op.body.args]
    clash = set(params) & set(op.constexprs)
    if clash:  # a size symbol named like a block size (`XBLOCK`) in the input IR
        raise MindError(f"kernel argument '{sorted(clash)[0]}' is also a block size", op.loc)
    params += [f"{name}: tl.constexpr" for name in op.constexprs]
    names = [n(a) for a in op.body.args if a.name in unspecialized]
    options = ["debug=True"] if any(o.name == "triton.device_assert" for o in op.walk()) else []
    options += [f"do_not_specialize={names!r}"] if names else []
    decorator = f"@triton.jit({', '.join(options)})" if options else "@triton.jit"
    head = f"{decorator}\ndef {op.symbol}({', '.join(params)}):"
    body = _kernel_lines(op.body.ops, n, 1) or ["    pass"]
    return "\n".join([head, *body]) + "\n"
