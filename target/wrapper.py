"""The host wrapper of a triton-dialect module as a Python function, laid out like Inductor's
`call(args)`: take the arguments (the list is cleared, as Inductor's wrapper clears it: an input
the caller holds no more is freed after its last use), bind the symbolic sizes, make the graph's
device current and read its stream (CUDA), allocate or reuse buffers, launch, call ATen, return.
What does not change between calls is bound at load (bindings.py), under names the wrapper uses.

Symbolic sizes: `call` first binds each size symbol by name from its inputs (a `sym(s0)` input
is the value; otherwise a tensor input's size or stride), so sizes, strides, grids and launch
arguments are Python expressions over them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy
from mind.dialects.collectives import KINDS, call_args, torch_target
from mind.ir.core import Operation, Value
from mind.ir.diagnostics import MindError
from mind.ir.types import SymType, TensorType, size_symbols

from .bindings import CPU, Host, collective_kind
from .names import Names
from .pyexpr import torch_dtype


@dataclass
class Call:
    """One wrapper being emitted: its names, and the CUDA device it runs on (if any)."""

    host: Host
    n: Names
    cuda: int | None
    #: the size symbols bound so far
    bound: set[str] = field(default_factory=set)
    #: the 0-d CPU tensors whose value launches pass, read so far: the name of each value
    scalars: dict[Value, str] = field(default_factory=dict)

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
        """The wrapper's lines for `op` (a launch after reading the values it passes), then the
        size symbols its results define."""
        read = self.read_values(op) if op.name == "triton.launch" else []
        line = self.line(op)
        return read + ([] if line is None else [line]) + self.bind_symbols(op.results)

    def read_values(self, launch: Operation) -> list[str]:
        """`arg1_1_value = arg1_1.item()` for each 0-d CPU tensor the launch passes by value that
        no launch before it read: each is read once per call, however many launches pass it."""
        lines = []
        for i in self.host.by_value[launch]:
            tensor = launch.values[i]
            if tensor not in self.scalars:
                self.scalars[tensor] = self.n.fresh(f"{self.n(tensor)}_value")
                lines.append(f"{self.scalars[tensor]} = {self.n(tensor)}.item()")
        return lines

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
        if kind == "free":
            return f"del {', '.join(n(b) for b in op.buffers)}"
        if kind == "launch":
            stream = "None" if self.cuda is None else "stream"
            values = [lit(a) for a in op.values]
            for i in self.host.by_value[op]:
                values[i] = self.scalars[op.values[i]]
            args = [*(lit(g) for g in op.grid), stream, *values]
            return f"{self.host.launchers[op]}({', '.join(args)})"
        if kind == "extern":  # its attributes are keyword arguments, but those it declares
            kwargs = {k: v for k, v in op.attrs.items() if k not in op.decl.attr_names}
            args = [lit(a) for a in op.values] + [f"{k}={lit(v)}" for k, v in kwargs.items()]
            targets = ", ".join(n(r) for r in op.results)
            call = f"{self.host.externs[op.symbol]}({', '.join(args)})"
            return f"{targets} = {call}" if op.results else call
        if kind == "reinterpret":
            t = op.result.type
            offset = lit(op.offset)
            return f"{n(op.result)} = reinterpret_tensor({n(op.buffer)}, {lit(t.shape)}, {lit(t.strides)}, {offset})"
        if kind in KINDS:  # the start's result stays bound until the wait, which returns it
            args = [lit(a) for a in call_args(op)] + [f"{k}={lit(v)}" for k, v in op.attrs.items()]
            if (torch_kind := collective_kind(op)) != kind:  # an `_out` overload: into a new buffer
                args.append(f"out={self.alloc(op.result.type)}")
            targets = ", ".join(n(r) for r in op.results)
            targets += "," if op.decl.results[-1].variadic and len(op.results) == 1 else ""
            return f"{targets} = {self.host.externs[torch_target(torch_kind)]}({', '.join(args)})"
        if kind == "constant_tensor":
            return None  # made at load
        if kind == "output":
            return f"return {lit(tuple(op.values))}"
        raise MindError(f"cannot emit '{op.name}' in a wrapper", op.loc)


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
    if args:  # the call takes its arguments: what the caller drops is freed after its last use
        lines.append(f"    {', '.join(args)}{',' if len(args) == 1 else ''} = args")
        lines.append("    args.clear()")
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
