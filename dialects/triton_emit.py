"""Triton IR -> a Python module, laid out like Inductor's output code: imports, one
`@triton.jit` function per kernel, and `def call(args)` that checks the inputs, allocates on the
inputs' device, launches `kernel[grid](..., XBLOCK=..., num_warps=...)` and returns the outputs.

Triton reads TRITON_INTERPRET when `@triton.jit` decorates a function (triton 3.6:
`knobs.runtime.interpret`, read from the environment on each access), so whoever imports the
generated module on CPU tensors sets it first; the module itself never changes it.

Symbolic sizes: `call` first binds each size symbol by name from its inputs (a `sym(s0)` input
is the value; otherwise a tensor input's size or stride), so sizes, strides, grids and launch
arguments are Python expressions over them. An r-loop up to a kernel argument is a `while`:
the interpreter cannot `range` over a scalar argument (numpy 2 refuses int() of its 1-element
array), and compiled Triton accepts both.
"""

from __future__ import annotations

import keyword

import sympy
import torch
from mind.ir.core import Module, Operation, Value
from mind.ir.diagnostics import MindError
from mind.ir.types import SymType, TensorType, contiguous_strides

from .triton import dtype_of, shape_of
from .triton_pyops import ELEMENTWISE, REDUCE, is_dotted, py_expr, py_float, py_literal, tl_dtype

HEADER = """\
import torch
import triton
import triton.language as tl
from torch._C._dynamo.guards import assert_size_stride

from mind.runtime.triton_helpers import for_current_mode

triton_helpers = for_current_mode()
"""

_RESERVED = {"tl", "triton", "torch", "triton_helpers", "for_current_mode", "assert_size_stride",
             "device", "args", "range", "float", "int", "len", "print"}  # fmt: skip


class Names:
    """Python identifiers for SSA values: their IR names when valid, unique per function."""

    def __init__(self, taken: set[str]):
        self.taken = set(taken)
        self.names: dict[Value, str] = {}

    def __call__(self, value: Value) -> str:
        if value not in self.names:
            base = value.name if value.name.isidentifier() else f"v{value.name}"
            base = base + "_" if keyword.iskeyword(base) else base
            name, n = base, 0
            while name in self.taken:
                n += 1
                name = f"{base}_{n}"
            self.taken.add(name)
            self.names[value] = name
        return self.names[value]


def emit(module: Module) -> str:
    """The Python source of a triton-dialect module."""
    taken = _RESERVED | {op.symbol for op in module.ops}
    parts = [HEADER]
    for op in module.ops:
        emitter = _TOP_LEVEL.get(op.name)
        if emitter is None:
            raise MindError(f"cannot emit '{op.name}' as Python (expected triton IR)", op.loc)
        _check_function_name(op)
        parts.append(emitter(op, Names(taken), module))
    return "\n\n".join(parts)


def _check_function_name(op: Operation) -> None:
    """A kernel or wrapper becomes a Python function of its symbol's name."""
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
    kind = op.name.split(".", 1)[1]
    a = [_value_text(x, n) for x in op.args if not isinstance(x, dict)]
    result = op.results[0].type if op.results else None
    if kind in ELEMENTWISE:
        return ELEMENTWISE[kind].format(*a)
    if kind == "program_id":
        cast = ".to(tl.int64)" if result.dtype != torch.int32 else ""
        return f"tl.program_id({a[0]}){cast}"
    if kind == "arange":
        return f"tl.arange({a[0]}, {a[1]})"
    if kind == "expand_dims":
        dims = [":"] * len(shape_of(op.args[0]))
        dims.insert(op.args[1], "None")
        return f"{a[0]}[{', '.join(dims)}]"
    if kind == "index":
        names = op.args[1]
        text = py_expr(op.args[0], lambda s: n(names[s]) if s in names else s)
        widen = result.dtype != torch.int32 and all(
            dtype_of(v) == torch.int32 for v in names.values()
        )
        return f"({text}).to(tl.int64)" if widen and names else text
    if kind == "load":
        mask = op.attrs.get("mask")
        extra = f", {n(mask)}" if mask is not None else ""
        if "other" in op.attrs:
            extra += f", other={_value_text(op.attrs['other'], n)}"
        if "eviction_policy" in op.attrs:
            extra += f", eviction_policy={op.attrs['eviction_policy']!r}"
        return f"tl.load({a[0]} + ({a[1]}){extra})"
    if kind == "full":
        return f"tl.full({_shape(result.shape)}, {a[0]}, {tl_dtype(result.dtype)})"
    if kind == "cast":
        return f"{a[0]}.to({tl_dtype(result.dtype)})"
    if kind == "broadcast_to":
        return f"tl.broadcast_to({a[0]}, {_shape(result.shape)})"
    if kind == "reduce":
        template = REDUCE[op.attrs["reduction_type"]]
        return template.format(v=a[0], axis=a[1], dt=tl_dtype(result.dtype))
    if kind == "reduce_index":
        fn = op.attrs["reduction_type"]
        return f"triton_helpers.{fn}({a[0]}, {a[1]}, {a[2]}).to(tl.int64)"
    if kind == "combine_index":
        fn = "maximum" if op.attrs["reduction_type"] == "argmax" else "minimum"
        return f"triton_helpers.{fn}_with_index({', '.join(a)})"
    raise MindError(f"cannot emit '{op.name}' in a kernel", op.loc)


def _kernel_lines(ops: list[Operation], n: Names, depth: int) -> list[str]:
    pad = "    " * depth
    lines = []
    for op in ops:
        if op.name == "triton.store":
            ptr, offset, value = (_value_text(x, n) for x in op.args)
            mask = op.attrs.get("mask")
            lines.append(
                f"{pad}tl.store({ptr} + ({offset}), {value}{', ' + n(mask) if mask else ''})"
            )
        elif op.name == "triton.device_assert":
            cond, mask = n(op.args[0]), op.attrs.get("mask")
            msg = repr(op.attrs["msg"])
            lines.append(f"{pad}tl.device_assert({cond}, {msg}{', ' + n(mask) if mask else ''})")
        elif op.name == "triton.for":
            lines += _for_lines(op, n, depth)
        elif op.name == "triton.yield":
            continue  # the enclosing for assigns the carried values
        else:
            targets = ", ".join(n(r) for r in op.results)
            lines.append(f"{pad}{targets} = {_kernel_op(op, n)}")
    return lines


def _for_lines(op: Operation, n: Names, depth: int) -> list[str]:
    pad = "    " * depth
    iv, *carried = op.body.args
    start, stop, step = (_value_text(x, n) for x in op.attrs["range"])
    lines = [f"{pad}{n(c)} = {n(i)}" for c, i in zip(carried, op.attrs["init"])]
    dynamic = isinstance(op.attrs["range"][1], Value)
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


def emit_kernel(op: Operation, n: Names, module: Module) -> str:
    params = [n(a) for a in op.body.args]
    clash = set(params) & set(op.attrs["constexprs"])
    if clash:  # a size symbol named like a block size (`XBLOCK`) in the input IR
        raise MindError(f"kernel argument '{sorted(clash)[0]}' is also a block size", op.loc)
    params += [f"{name}: tl.constexpr" for name in op.attrs["constexprs"]]
    asserts = any(o.name == "triton.device_assert" for o in op.walk())
    decorator = "@triton.jit(debug=True)" if asserts else "@triton.jit"  # asserts need debug
    head = f"{decorator}\ndef {op.symbol}({', '.join(params)}):"
    body = _kernel_lines(op.body.ops, n, 1) or ["    pass"]
    return "\n".join([head, *body]) + "\n"


# -- the wrapper -----------------------------------------------------------------------------
def _device_line(op: Operation, n: Names) -> str:
    tensors = [a for a in op.body.args if isinstance(a.type, TensorType)]
    if tensors:
        return f"    device = {n(tensors[0])}.device"
    typed = [r.type for o in op.body.ops for r in o.results if isinstance(r.type, TensorType)]
    device = next((t.device for t in typed if t.device is not None), "cpu")
    return f'    device = torch.device("{device}")'


def _alloc(t: TensorType) -> str:
    return f"torch.empty_strided({py_literal(t.shape, str)}, {py_literal(t.strides, str)}, device=device, dtype={t.dtype})"


def _wrapper_line(op: Operation, n: Names, module: Module) -> str:
    kind = op.name.split(".", 1)[1]

    def lit(value) -> str:
        return py_literal(value, n)

    if kind == "assert_size_stride":
        return f"assert_size_stride({', '.join(lit(a) for a in op.args)})"
    if kind == "empty_strided":
        return f"{n(op.result)} = {_alloc(op.result.type)}"
    if kind == "reuse":
        old, t = op.args[0], op.result.type
        if (old.type.shape, old.type.strides) == (t.shape, t.strides):
            return f"{n(op.result)} = {n(old)}  # reuse"
        return f"{n(op.result)} = {n(old)}.as_strided({lit(t.shape)}, {lit(t.strides)})  # reuse"
    if kind == "launch":
        kernel = module.lookup(op.symbol)
        config = {**kernel.attrs["constexprs"], "num_warps": kernel.attrs["num_warps"],
                  "num_stages": kernel.attrs["num_stages"]}  # fmt: skip
        args = [lit(a) for a in op.args] + [f"{k}={v}" for k, v in config.items()]
        return f"{op.symbol}[{lit(op.attrs['grid'])}]({', '.join(args)})"
    if kind == "extern":
        if not is_dotted(op.symbol):
            raise MindError(f"cannot call '{op.symbol}'", op.loc)
        args = [lit(a) for a in op.args] + [f"{k}={lit(v)}" for k, v in op.attrs.items()]
        targets = ", ".join(n(r) for r in op.results) + ("," if len(op.results) == 1 else "")
        target = op.symbol if op.symbol.startswith("torch.") else f"torch.ops.{op.symbol}"
        call = f"{target}({', '.join(args)})"  # aten ops by op name, others by their path
        return f"{targets.rstrip(',')} = {call}" if len(op.results) == 1 else f"{targets} = {call}"
    if kind == "reinterpret":
        buf, t, offset = op.args[0], op.result.type, op.attrs["offset"]
        start = "" if offset == 0 else f", {n(buf)}.storage_offset() + {lit(offset)}"
        return (
            f"{n(op.result)} = torch.as_strided({n(buf)}, {lit(t.shape)}, {lit(t.strides)}{start})"
        )
    if kind == "constant_tensor":
        t = op.result.type
        strides = t.strides or contiguous_strides(t.shape)
        data = f"torch.tensor({lit(op.attrs['data'])}, dtype={t.dtype}).reshape({lit(t.shape)})"
        alloc = _alloc(TensorType(t.dtype, t.shape, strides, t.device))
        return f"{n(op.result)} = {alloc}.copy_({data})"
    if kind == "output":
        return f"return {lit(tuple(op.args))}"
    raise MindError(f"cannot emit '{op.name}' in a wrapper", op.loc)


def _size_bindings(op: Operation, n: Names) -> list[str]:
    """`s0 = arg0_1` / `s1 = arg2_1.size(1)`: each size symbol bound once, from the first input
    that holds it plainly."""
    bound: dict[str, str] = {}
    for arg in op.body.args:
        t = arg.type
        if isinstance(t, SymType):
            if isinstance(t.expr, sympy.Symbol):
                bound.setdefault(t.expr.name, n(arg))
            continue
        if not isinstance(t, TensorType):
            continue
        for method, sizes in (("size", t.shape), ("stride", t.strides or ())):
            for d, size in enumerate(sizes):
                if isinstance(size, sympy.Symbol):
                    bound.setdefault(size.name, f"{n(arg)}.{method}({d})")
    return [f"    {name} = {source}" for name, source in bound.items()]


def emit_wrapper(op: Operation, n: Names, module: Module) -> str:
    n.taken |= _size_symbols(op)
    args = [n(a) for a in op.body.args]
    lines = [f"def {op.symbol}(args):"]
    if args:
        lines.append(f"    {', '.join(args)}{',' if len(args) == 1 else ''} = args")
    lines += _size_bindings(op, n)
    lines.append(_device_line(op, n))
    lines += ["    " + _wrapper_line(o, n, module) for o in op.body.ops]
    return "\n".join(lines) + "\n"


def _size_symbols(op: Operation) -> set[str]:
    """The names of the size symbols of the wrapper's inputs: kept free for the bindings."""
    names = set()
    for arg in op.body.args:
        t = arg.type
        exprs = [t.expr] if isinstance(t, SymType) else []
        if isinstance(t, TensorType):
            exprs = [*t.shape, *(t.strides or ())]
        for e in exprs:
            names |= {s.name for s in sympy.sympify(e).free_symbols}
    return names


_TOP_LEVEL = {"triton.kernel": emit_kernel, "triton.wrapper": emit_wrapper}
