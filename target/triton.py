"""Triton IR -> a Python module, laid out like Inductor's output code: imports, one
`@triton.jit` function per kernel, what is bound once when the module loads, and `def call(args)`.

Bound at load (see mind.runtime.launch): each kernel's launcher, compiled for its arguments'
types and alignment; each ATen op an extern call runs; each constant tensor, on its device. So
`call` does only what a call needs: bind the symbolic sizes, make the graph's device current and
read its stream (CUDA), allocate or reuse buffers, launch, call ATen, return.

Alignment: a buffer `call` allocates is aligned; a graph input, an ATen result, or a view of them
may not be, so such a pointer argument is checked at each launch (a misaligned one takes
Triton's JIT path); a view at a misaligned offset of an aligned buffer is compiled unaligned.

Symbolic sizes: `call` first binds each size symbol by name from its inputs (a `sym(s0)` input
is the value; otherwise a tensor input's size or stride), so sizes, strides, grids and launch
arguments are Python expressions over them; integer arguments that vary are compiled
unspecialized (`do_not_specialize`). An r-loop up to a kernel argument is a `while`: the
interpreter cannot `range` over a scalar argument (numpy 2 refuses int() of its 1-element
array), and compiled Triton accepts both.
"""

from __future__ import annotations

import hashlib
import keyword
import math
import re
from collections import ChainMap
from collections.abc import MutableMapping
from dataclasses import dataclass, field

import sympy
from mind.dialects.collectives import KINDS, call_args, torch_target
from mind.dialects.reductions import REDUCTIONS
from mind.dialects.scalar_ops import SCALAR_OPS
from mind.dialects.store_modes import STORE_MODES
from mind.dialects.triton import dtype_of, shape_of
from mind.ir import dtypes as dt
from mind.ir.core import Module, Operation, Value, fresh_name
from mind.ir.diagnostics import MindError
from mind.ir.dtypes import Device
from mind.ir.types import ScalarType, SymType, TensorType, contiguous_strides, size_symbols

from .pyexpr import is_dotted, py_expr, py_float, py_literal, tl_dtype, torch_dtype
from .scans import KERNEL_OPS, TUPLES

HEADER = """\
import torch
import triton
import triton.language as tl
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
from mind.runtime.triton_helpers import for_current_mode

triton_helpers = for_current_mode()
"""

#: where a tensor without a device lives
CPU = Device("cpu")
#: the modules an extern's callable may come from by its path (`torch.ops.prims.x.default`,
#: `operator.ge`), as an `aten.call` names them (mind.dialects.pyobjects.ALLOWED_ROOTS); any
#: other extern symbol is an op name under `torch.ops` (`aten.mm.default`)
PYTHON_ROOTS = ("torch", "operator", "math", "builtins")
#: the signature placeholder of a parameter passed by value, by its dtype's kind (see BY_VALUE in
#: codegen/kernel.py): a value Triton types as that parameter's type
PLACEHOLDERS = {"f": "F32", "i": "I64", "b": "I1"}

_RESERVED = set(re.findall(r"\b[A-Za-z_][A-Za-z0-9_]*\b", HEADER)) | {
    "args", "stream", "range", "float", "int", "len", "print", "min", "max"}  # fmt: skip


class Names:
    """Python identifiers for SSA values: their IR names when valid, unique per function. A
    function's names see the module's (`outer`) through, without a copy: a module has a name
    per kernel, and copying them for each kernel made emitting quadratic."""

    def __init__(self, taken: set[str], outer: Names | None = None):
        self.taken = taken
        self.outer = outer
        self.names: MutableMapping[Value, str] = ChainMap({}, outer.names) if outer else {}

    def is_taken(self, name: str) -> bool:
        return name in self.taken or (self.outer is not None and self.outer.is_taken(name))

    def fresh(self, base: str) -> str:
        """A name not taken yet, from `base`, now taken."""
        base = base if base.isidentifier() else f"v{base}"
        base = base + "_" if keyword.iskeyword(base) else base
        name = fresh_name(base, self.is_taken)
        self.taken.add(name)
        return name

    def __call__(self, value: Value) -> str:
        if value not in self.names:
            self.names[value] = self.fresh(value.name)
        return self.names[value]

    def scope(self) -> Names:
        """Names for one function: module-level names stay taken, its own stay its own."""
        return Names(set(), outer=self)


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
        return f"tl.load({a[0]} + ({a[1]}){extra})"
    if kind == "full":
        return _full(result, a[0], op.args[0])
    if kind == "cast":
        return f"{a[0]}.to({tl_dtype(result.dtype)})"
    if kind == "broadcast_to":
        return f"tl.broadcast_to({a[0]}, {_shape(result.shape)})"
    if kind == "reduce":
        template = REDUCTIONS[op.reduction_type].triton
        return template.format(v=a[0], axis=a[1], dt=tl_dtype(result.dtype))
    if kind == "reduce_index":
        fn = REDUCTIONS[op.reduction_type].triton
        return f"triton_helpers.{fn}({a[0]}, {a[1]}, {a[2]}).to(tl.int64)"
    if kind == "dot":  # f16/bf16 through the helper (see runtime/triton_helpers.py)
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
        elif op.name == "triton.device_assert":
            mask = f", {n(op.mask)}" if op.mask is not None else ""
            lines.append(f"{pad}tl.device_assert({n(op.ok)}, {op.msg!r}{mask})")
        elif op.name == "triton.for":
            lines += _for_lines(op, n, depth)
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


# -- what is bound at load -------------------------------------------------------------------
ALIGNED, UNKNOWN, MISALIGNED = "aligned", "unknown", "misaligned"
#: how each wrapper op's result is aligned, from its operands' alignment
_ALIGNMENT = {
    "triton.empty_strided": lambda op, of: ALIGNED,
    "triton.constant_tensor": lambda op, of: ALIGNED,
    "triton.reuse": lambda op, of: of(op.buffer),
    "triton.reinterpret": lambda op, of: _view_alignment(of(op.buffer), op),
}


def _view_alignment(base: str, op: Operation) -> str:
    offset = op.offset
    if not isinstance(offset, int):
        return UNKNOWN
    if offset * op.result.type.dtype.itemsize % 16 == 0:
        return base
    return MISALIGNED if base == ALIGNED else UNKNOWN


@dataclass
class Host:
    """What the module binds once, when it loads, for its wrappers: launchers, ATen ops,
    devices and constants, each under a module-level name, with the lines that make them."""

    module: Module
    names: Names
    lines: list[str] = field(default_factory=list)
    #: kernel -> the names of its integer arguments that vary between calls (in any launch)
    unspecialized: dict[str, list[str]] = field(default_factory=dict)
    #: per launch op, the arguments it passes by value (`.item()` of a 0-d CPU tensor)
    by_value: dict[Operation, list[int]] = field(default_factory=dict)
    #: per launch op, its launcher's name
    launchers: dict[Operation, str] = field(default_factory=dict)
    #: a binding's text -> its launcher's name: launches of one kernel with the same signature
    #: share one launcher (a model's repeated layers launch one kernel many times)
    bound: dict[str, str] = field(default_factory=dict)
    externs: dict[str, str] = field(default_factory=dict)
    devices: dict[str, str] = field(default_factory=dict)
    #: per wrapper value: its alignment
    alignment: dict[Value, str] = field(default_factory=dict)
    #: the modules imported for externs named by their path
    imported: set[str] = field(default_factory=lambda: {"torch"})

    def bind_wrapper(self, wrapper: Operation) -> None:
        for op in wrapper.body.ops:
            rule = _ALIGNMENT.get(op.name)
            for result in op.results:
                self.alignment[result] = rule(op, self.align_of) if rule else UNKNOWN
            handler = _BINDINGS.get(op.name)
            if handler:
                handler(self, op)

    def align_of(self, value: Value) -> str:
        return self.alignment.get(value, UNKNOWN)

    def device(self, device: Device) -> str:
        key = str(device)
        if key not in self.devices:
            name = self.names.fresh(re.sub(r"\W", "_", key))
            self.devices[key] = name
            self.lines.append(f"{name} = torch.device({key!r})")
        return self.devices[key]

    def literal(self, value, names: Names) -> str:
        return py_literal(value, names, self.device)

    def bind_launch(self, op: Operation) -> None:
        kernel = self.module.lookup(op.symbol)
        signature, checked, varying, by_value = [], [], [], []
        for i, (param, arg) in enumerate(zip(kernel.body.args, op.values)):
            if isinstance(param.type, ScalarType) and is_tensor(arg):
                by_value.append(i)  # a 0-d CPU tensor: the launch passes its value
                varying.append(param.name)
                signature.append(PLACEHOLDERS[dtype_of(param).kind])
            elif is_tensor(arg):
                alignment = self.align_of(arg)
                if alignment == UNKNOWN:
                    checked.append(len(signature))
                dtype = torch_dtype(arg.type.dtype)
                signature.append(f"misaligned({dtype})" if alignment == MISALIGNED else dtype)
            elif isinstance(arg, int):
                signature.append(str(arg))
            else:  # a symbolic size: one compiled kernel serves every value
                varying.append(param.name)
                signature.append("I64" if dtype_of(param) == dt.i64 else "I32")
        known = self.unspecialized.setdefault(op.symbol, [])
        known += [v for v in varying if v not in known]
        self.by_value[op] = by_value
        pointers = [a for i, a in enumerate(op.values) if is_tensor(a) and i not in by_value]
        device = pointers[0].type.device
        checks = f"checked={tuple(checked)!r}, " if checked else ""
        head = f"{self.device(device)}, ({', '.join(signature)}{',' if len(signature) == 1 else ''}), {checks}"
        own = {**kernel.constexprs, "num_warps": kernel.num_warps, "num_stages": kernel.num_stages}
        if not op.candidates:
            binding = _bind_call(op.symbol, head, own)
        else:
            candidates = [(op.symbol, own, op.grid), *op.candidates]
            extents = tuple(_extent(a.type) for a in pointers)
            binding = "\n".join(
                [
                    "tune(",
                    f"    {_tuning_key(self.module, candidates, signature)!r},",
                    *(
                        f"    ({_bind_call(kernel_name, head, config)}, {tuple(grid)!r}),"
                        for kernel_name, config, grid in candidates
                    ),
                    f"    extents={extents!r},",
                    ")",
                ]
            )
        if binding not in self.bound:
            self.bound[binding] = self.names.fresh(f"{op.symbol}_launch")
            self.lines.append(f"{self.bound[binding]} = {binding}")
        self.launchers[op] = self.bound[binding]

    def bind_extern(self, op: Operation) -> None:
        if not is_dotted(op.symbol):
            raise MindError(f"cannot call '{op.symbol}'", op.loc)
        if op.symbol not in self.externs:
            name = self.names.fresh(op.symbol.replace(".", "_"))
            self.externs[op.symbol] = name
            root = op.symbol.split(".", 1)[0]
            if root not in PYTHON_ROOTS:  # an op name: `aten.mm.default`
                self.lines.append(f"{name} = torch.ops.{op.symbol}")
                return
            if root not in self.imported:  # a callable by its path: `operator.ge` on sizes
                self.imported.add(root)
                self.names.taken.add(root)
                self.lines.append(f"import {root}")
            self.lines.append(f"{name} = {op.symbol}")

    def bind_collective(self, op: Operation) -> None:
        target = torch_target(op.kind)
        if target not in self.externs:
            name = self.names.fresh(target.replace(".", "_"))
            self.externs[target] = name
            self.lines.append(f"{name} = torch.ops.{target}")

    def bind_constant(self, op: Operation) -> None:
        t = op.result.type
        strides = t.strides or contiguous_strides(t.shape)
        name = self.names(op.result)
        data = self.literal(op.data, self.names)
        self.lines.append(
            f"{name} = torch.empty_strided({self.literal(t.shape, self.names)}, "
            f"{self.literal(strides, self.names)}, dtype={torch_dtype(t.dtype)}, "
            f"device={self.device(t.device or CPU)})"
            f".copy_(torch.tensor({data}, dtype={torch_dtype(t.dtype)})"
            f".reshape({self.literal(t.shape, self.names)}))"
        )


def _bind_call(kernel: str, head: str, config: dict) -> str:
    """`bind(kernel, device, signature, checked=..., num_warps=..., num_stages=..., BLOCK=...)`."""
    options = {"num_warps": config["num_warps"], "num_stages": config["num_stages"]}
    options |= {k: v for k, v in config.items() if k not in options}
    return f"bind({kernel}, {head}{', '.join(f'{k}={v}' for k, v in options.items())})"


def _tuning_key(module: Module, candidates: list, signature: list[str]) -> str:
    """What a tuning result depends on: the candidates' kernels (their IR), configs and grids,
    and the argument types."""
    digest = hashlib.sha256()
    for kernel, config, grid in candidates:
        digest.update(
            f"{module.lookup(kernel)}\n{sorted(config.items())}\n{tuple(grid)}\n".encode()
        )
    digest.update(repr(signature).encode())
    return digest.hexdigest()


def _extent(t: TensorType) -> int:
    """The elements of storage a tensor of this layout spans from its first element."""
    if 0 in t.shape:
        return 0
    return 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.strides))


_BINDINGS = {
    "triton.launch": Host.bind_launch,
    "triton.extern": Host.bind_extern,
    "triton.constant_tensor": Host.bind_constant,
    **{f"triton.{kind}": Host.bind_collective for kind in KINDS},
}


# -- the wrapper -----------------------------------------------------------------------------
@dataclass
class Call:
    """One wrapper being emitted: its names, and the CUDA device it runs on (if any)."""

    host: Host
    n: Names
    cuda: int | None
    #: the size symbols bound so far
    bound: set[str] = field(default_factory=set)

    def lit(self, value) -> str:
        return self.host.literal(value, self.n)

    def bind_symbols(self, values) -> list[str]:
        """`s0 = arg0_1`, `u0 = buf1.size(0)`: each size symbol bound once, from the first value
        that holds it plainly: an input, or the extern result that defines it (a data-dependent
        size, which Inductor calls unbacked)."""
        lines = []
        for value in values:
            for symbol, source in symbol_sources(value, self.n(value)).items():
                if symbol not in self.bound:
                    self.bound.add(symbol)
                    lines.append(f"{symbol} = {source}")
        return lines

    def lines(self, op: Operation) -> list[str]:
        """The wrapper's lines for `op`, then the size symbols its results define."""
        line = self.line(op)
        return ([] if line is None else [line]) + self.bind_symbols(op.results)

    def alloc(self, t: TensorType) -> str:
        size, stride = self.lit(t.shape), self.lit(t.strides)
        device, dtype = t.device or CPU, torch_dtype(t.dtype)
        if device.type == "cpu":
            return f"empty_strided_cpu({size}, {stride}, {dtype})"
        if device.type == "cuda" and (device.index or 0) == self.cuda:
            return f"empty_strided_cuda({size}, {stride}, {dtype})"
        return f"torch.empty_strided({size}, {stride}, dtype={dtype}, device={self.host.device(device)})"

    def line(self, op: Operation) -> str | None:
        kind = op.name.split(".", 1)[1]
        n, lit = self.n, self.lit
        if kind == "assert_size_stride":
            return f"assert_size_stride({', '.join(lit(a) for a in op.args)})"
        if kind == "empty_strided":
            return f"{n(op.result)} = {self.alloc(op.result.type)}"
        if kind == "reuse":
            old, t = op.buffer, op.result.type
            if (old.type.shape, old.type.strides) == (t.shape, t.strides):
                return f"{n(op.result)} = {n(old)}  # reuse"
            return f"{n(op.result)} = reinterpret_tensor({n(old)}, {lit(t.shape)}, {lit(t.strides)}, 0)  # reuse"
        if kind == "launch":
            stream = "None" if self.cuda is None else "stream"
            values = [lit(a) for a in op.values]
            for i in self.host.by_value[op]:
                values[i] += ".item()"
            args = [*(lit(g) for g in op.grid), stream, *values]
            return f"{self.host.launchers[op]}({', '.join(args)})"
        if kind == "extern":
            args = [lit(a) for a in op.values] + [f"{k}={lit(v)}" for k, v in op.attrs.items()]
            targets = ", ".join(n(r) for r in op.results)
            call = f"{self.host.externs[op.symbol]}({', '.join(args)})"
            return f"{targets} = {call}" if op.results else call
        if kind == "reinterpret":
            t = op.result.type
            offset = lit(op.offset)
            return f"{n(op.result)} = reinterpret_tensor({n(op.buffer)}, {lit(t.shape)}, {lit(t.strides)}, {offset})"
        if kind in KINDS:  # the start's result stays bound until the wait, which returns it
            args = [lit(a) for a in call_args(op)] + [f"{k}={lit(v)}" for k, v in op.attrs.items()]
            targets = ", ".join(n(r) for r in op.results)
            targets += "," if op.decl.results[-1].variadic and len(op.results) == 1 else ""
            return f"{targets} = {self.host.externs[torch_target(kind)]}({', '.join(args)})"
        if kind == "constant_tensor":
            return None  # made at load
        if kind == "output":
            return f"return {lit(tuple(op.values))}"
        raise MindError(f"cannot emit '{op.name}' in a wrapper", op.loc)


def is_tensor(value) -> bool:
    """Whether a launch argument is a tensor (else an int or a size expression)."""
    return isinstance(value, Value) and isinstance(value.type, TensorType)


def symbol_sources(value: Value, name: str) -> dict[str, str]:
    """Where each size symbol that `value` holds plainly can be read: `s0` from a `sym(s0)`
    named `name`, `s1` from `name.size(1)` or `name.stride(0)` of a tensor."""
    t = value.type
    if isinstance(t, SymType):
        return {t.expr.name: name} if isinstance(t.expr, sympy.Symbol) else {}
    found: dict[str, str] = {}
    if isinstance(t, TensorType):
        for method, sizes in (("size", t.shape), ("stride", t.strides or ())):
            for d, size in enumerate(sizes):
                if isinstance(size, sympy.Symbol):
                    found.setdefault(size.name, f"{name}.{method}({d})")
    return found


def _cuda_index(op: Operation) -> int | None:
    """The CUDA device the wrapper makes current: that of its first CUDA tensor."""
    values = [*op.body.args, *(r for o in op.body.ops for r in o.results)]
    for value in values:
        t = value.type
        if isinstance(t, TensorType) and t.device is not None and t.device.type == "cuda":
            return t.device.index or 0
    return None


def emit_wrapper(op: Operation, host: Host) -> str:
    n = host.names.scope()
    n.taken |= _size_symbols(op)
    call = Call(host, n, _cuda_index(op))
    args = [n(a) for a in op.body.args]
    lines = [f"def {op.symbol}(args):"]
    if args:
        lines.append(f"    {', '.join(args)}{',' if len(args) == 1 else ''} = args")
    lines += ["    " + line for line in call.bind_symbols(op.body.args)]
    body = [line for inner in op.body.ops for line in call.lines(inner)]
    if call.cuda is not None:
        lines.append(f"    with device_guard({call.cuda}):")
        lines.append(f"        stream = get_raw_stream({call.cuda})")
        lines += ["        " + line for line in body]
    else:
        lines += ["    " + line for line in body]
    lines.append(f"{op.symbol}.output_strides = {output_strides(op)!r}")
    return "\n".join(lines) + "\n"


def output_strides(wrapper: Operation) -> tuple:
    """The strides of each tensor the wrapper returns (None for other outputs and for strides
    only a call knows): the caller reports them (AOTAutograd lays out a backward's inputs so)."""
    found = []
    for value in wrapper.body.terminator.args:
        t = value.type if isinstance(value, Value) else None
        static = isinstance(t, TensorType) and t.strides is not None
        static = static and all(isinstance(s, int) for s in t.strides)
        found.append(tuple(t.strides) if static else None)
    return tuple(found)


def _size_symbols(op: Operation) -> set[str]:
    """The names of the size symbols of the wrapper's values: kept free for the bindings."""
    values = [*op.body.args, *(r for inner in op.body.ops for r in inner.results)]
    return set().union(*(size_symbols(v.type) for v in values))
