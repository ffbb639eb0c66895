"""What an emitted module binds once, when it loads, for its wrappers (see mind.runtime.launch):
each kernel's launcher, compiled for its arguments' types and alignment; each ATen op an extern
call runs; each device and constant tensor. Each gets a module-level name, so `call` only names
them.

Alignment (16 bytes, which Triton specializes pointers on): a buffer `call` allocates is aligned,
and so is one ATen allocates (an extern call's result its `aliases` does not list: caching
allocators hand out aligned blocks) and an input the wrapper lists as `aligned` (a parameter the
backend found aligned); a view whole 16-byte steps into a buffer is aligned as the buffer is, one
at another constant offset of an aligned buffer is compiled unaligned. Any other pointer (an
input, a view ATen returns, a view at another offset) is checked at each launch: a misaligned
one takes Triton's JIT path.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

import sympy
from mind.dialects.collectives import KINDS, torch_target
from mind.dialects.common import aliased_memory
from mind.dialects.loops import LIBRARY_CALLS
from mind.dialects.triton import dtype_of, ptr_dtype
from mind.ir import dtypes as dt
from mind.ir.core import Module, Operation, Value
from mind.ir.diagnostics import MindError
from mind.ir.dtypes import Device
from mind.ir.types import ScalarType, TensorType, contiguous_strides

from .names import Names
from .pyexpr import is_dotted, py_literal, torch_dtype

#: where a tensor without a device lives
CPU = Device("cpu")
#: the modules an extern's callable may come from by its path (`torch.ops.prims.x.default`,
#: `operator.ge`), as an `aten.call` names them (mind.dialects.pyobjects.ALLOWED_ROOTS); any
#: other extern symbol is an op name under `torch.ops` (`aten.clone.default`)
PYTHON_ROOTS = ("torch", "operator", "math", "builtins")
#: the library calls of `loops.extern` (matmuls, convolutions), by their public bindings, as
#: Inductor's extern kernels call them: the same overload with the same arguments, parsed by
#: torch's generated argument parser instead of an OpOverload's boxed call through the
#: operator's schema (1-4 us less a call on a CPU: a ResNet's 11 convolutions, a transformer
#: step's dozens of matmuls)
PUBLIC_BINDINGS = {f"aten.{name}.default": f"torch.{name}" for name in LIBRARY_CALLS}
#: the collectives a CPU wrapper runs through their `_out` overload, into a buffer it allocates:
#: gloo's `all_gather_into_tensor` (its `allgather_into_tensor_coalesced`) now and then corrupts
#: the heap, the more often the more of them are in flight (reorder-collectives starts a graph's
#: all at once: a SimpleFSDP step aborted in glibc's `malloc(): unaligned tcache chunk detected`
#: about 1 run in 6); the `_out` overload runs gloo's `_allgather_base`, which does not
OUT_ON_CPU = {"all_gather_into_tensor": "all_gather_into_tensor_out"}
#: the signature placeholder of a parameter passed by value, by its dtype's kind (see BY_VALUE in
#: codegen/kernel.py): a value Triton types as that parameter's type
PLACEHOLDERS = {"f": "F32", "i": "I64", "b": "I1"}

#: the alignment (bytes) Triton specializes pointers on
ALIGNMENT = 16
ALIGNED, UNKNOWN, MISALIGNED = "aligned", "unknown", "misaligned"
#: how each wrapper op's result is aligned, from its operands' alignment: what a call
#: allocates is aligned, and so is what ATen allocates; a view ATen returns is not known to be
_ALIGNMENT = {
    "triton.empty_strided": lambda op, result, of: ALIGNED,
    "triton.constant_tensor": lambda op, result, of: ALIGNED,
    "triton.reuse": lambda op, result, of: of(op.buffer),
    "triton.reinterpret": lambda op, result, of: _view_alignment(of(op.buffer), op),
    "triton.extern": lambda op, result, of: UNKNOWN if aliased_memory(result) else ALIGNED,
}


def _view_alignment(base: str, op: Operation) -> str:
    """A view whole 16-byte steps into its buffer (for every value of the offset's size
    symbols) is aligned as its buffer is; one at another constant offset into an aligned
    buffer never is."""
    offset = sympy.expand(sympy.sympify(op.offset) * op.result.type.dtype.itemsize)
    if _multiple_of(offset, ALIGNMENT):
        return base
    return MISALIGNED if offset.is_Integer and base == ALIGNED else UNKNOWN


def _multiple_of(expr: sympy.Expr, n: int) -> bool:
    """Whether an integer expression (of integer symbols, `floor`s, ...) is a multiple of `n`
    whatever its symbols' values: each term of its expansion an integer multiple of `n`."""
    coefficients = (term.as_coeff_Mul()[0] for term in sympy.Add.make_args(expr))
    return all(c.is_Integer and c % n == 0 for c in coefficients)


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
        for i in wrapper.aligned or ():
            self.alignment[wrapper.body.args[i]] = ALIGNED
        for op in wrapper.body.ops:
            rule = _ALIGNMENT.get(op.name)
            for result in op.results:
                self.alignment[result] = rule(op, result, self.align_of) if rule else UNKNOWN
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
        self.by_value[op] = by_value
        pointers = [a for i, a in enumerate(op.values) if is_tensor(a) and i not in by_value]
        checks = f"checked={tuple(checked)!r}, " if checked else ""
        device = f"{self.device(pointers[0].type.device)}, "
        own = {**kernel.constexprs, "num_warps": kernel.num_warps, "num_stages": kernel.num_stages}
        candidates = [(op.symbol, own, op.grid), *(op.candidates or ())]
        heads = {}
        for symbol, _, grid in candidates:
            if symbol not in heads:
                candidate = self.module.lookup(symbol)
                tail = self._launcher_params(candidate, op, varying)
                heads[symbol] = f"{device}{_tuple([*signature, *tail])}, {checks}"
                heads[symbol] += _cooperation(candidate, grid)
        if not op.candidates:
            binding = _bind_call(op.symbol, heads[op.symbol], own)
        else:
            extents = tuple(_extent(a.type) for a in pointers)
            binding = "\n".join(
                [
                    "tune(",
                    f"    {_tuning_key(self.module, candidates, signature)!r},",
                    *(
                        f"    ({_bind_call(name, heads[name], config)}, {tuple(grid)!r}),"
                        for name, config, grid in candidates
                    ),
                    f"    extents={extents!r},",
                    ")",
                ]
            )
        if binding not in self.bound:
            self.bound[binding] = self.names.fresh(f"{op.symbol}_launch")
            self.lines.append(f"{self.bound[binding]} = {binding}")
        self.launchers[op] = self.bound[binding]

    def _launcher_params(self, kernel: Operation, op: Operation, varying: list[str]) -> list[str]:
        """The signature of the parameters `kernel` takes past the launch's values, which its
        launcher passes (a cooperative kernel's: runtime/cooperative.py); records which of its
        integer parameters vary between calls, the launch's and these."""
        tail, own = [], list(varying)
        for param in kernel.body.args[len(op.values) :]:
            pointee = ptr_dtype(param.type)
            tail.append(torch_dtype(pointee) if pointee else "I32")
            own += [] if pointee else [param.name]
        known = self.unspecialized.setdefault(kernel.symbol, [])
        known += [v for v in own if v not in known]
        return tail

    def bind_extern(self, op: Operation) -> None:
        if not is_dotted(op.symbol):
            raise MindError(f"cannot call '{op.symbol}'", op.loc)
        if op.symbol not in self.externs:
            name = self.names.fresh(op.symbol.replace(".", "_"))
            self.externs[op.symbol] = name
            root = op.symbol.split(".", 1)[0]
            if op.symbol in PUBLIC_BINDINGS:
                self.lines.append(f"{name} = {PUBLIC_BINDINGS[op.symbol]}")
                return
            if root not in PYTHON_ROOTS:  # an op name: `aten.clone.default`
                self.lines.append(f"{name} = torch.ops.{op.symbol}")
                return
            if root not in self.imported:  # a callable by its path: `operator.ge` on sizes
                self.imported.add(root)
                self.names.taken.add(root)
                self.lines.append(f"import {root}")
            self.lines.append(f"{name} = {op.symbol}")

    def bind_collective(self, op: Operation) -> None:
        target = torch_target(collective_kind(op))
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


def _tuple(items: list[str]) -> str:
    return f"({', '.join(items)}{',' if len(items) == 1 else ''})"


def _cooperation(kernel: Operation, grid: tuple) -> str:
    """A cooperative kernel's `cooperative=(programs a group, partials a program), `."""
    if kernel.cooperative is None:
        return ""
    return f"cooperative=({grid[0]}, {kernel.cooperative}), "


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


def collective_kind(op: Operation) -> str:
    """The functional collective a wrapper calls for collective `op`: its own kind, or on CPU
    its `_out` overload (`OUT_ON_CPU`)."""
    if op.kind in OUT_ON_CPU and (op.results[0].type.device or CPU).type == "cpu":
        return OUT_ON_CPU[op.kind]
    return op.kind


def is_tensor(value) -> bool:
    """Whether a launch argument is a tensor (else an int or a size expression)."""
    return isinstance(value, Value) and isinstance(value.type, TensorType)
