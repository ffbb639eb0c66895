"""Python objects in IR text: the allow-list through which `@path` references resolve, and the
conversion between torch.fx argument structures and attribute values. Shared by fx and aten."""

from __future__ import annotations

import builtins
import importlib
import math
import operator
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import sympy
import torch
import torch.fx
from mind.ir import dtypes as dt
from mind.ir.attributes import PyCall, PyRef
from mind.ir.context import bound
from mind.ir.core import Value, map_values
from mind.ir.diagnostics import MindError
from mind.ir.dtypes import Device, DType
from mind.ir.symbols import Mod, as_int_like, is_integral, sym
from mind.ir.types import OpaqueType, ScalarType, SymType, TensorType, Type
from torch.fx.node import _get_qualified_name

from .torch_types import from_torch, from_torch_device, to_torch, to_torch_device

#: the only modules an `@path` may resolve into
ALLOWED_ROOTS = {"torch": torch, "operator": operator, "math": math, "builtins": builtins}
_ALIASES = {"_operator": "operator"}
#: enum-like torch objects that appear as arguments, by the schema type that takes them
TORCH_ENUMS = {
    "Layout": ("strided", "sparse_coo"),
    "MemoryFormat": ("contiguous_format", "channels_last", "preserve_format"),
}
_TORCH_CONSTANTS = {
    getattr(torch, name): f"torch.{name}" for names in TORCH_ENUMS.values() for name in names
}
#: objects built from arguments in IR text, `@builtins.slice(none, 2, none)`,
#: `@builtins.complex(0.0, 2.0)`
_CONSTRUCTORS = {"builtins.slice": slice, "builtins.complex": complex}
#: DTensor placements (arguments of `redistribute`, `from_local`, `to_local`), by class name:
#: the fields that build one again, `@torch.distributed.tensor.Shard(0)`
_PLACEMENTS = {"Shard": ("dim",), "Replicate": (), "Partial": ("reduce_op",)}
_PLACEMENT_MODULE = "torch.distributed.tensor"


def _placement(arg: Any) -> PyCall | None:
    """A DTensor placement as the call that makes it, or None for anything else."""
    cls = type(arg)
    fields = _PLACEMENTS.get(cls.__name__)
    if fields is None or not cls.__module__.startswith(_PLACEMENT_MODULE):
        return None
    return PyCall(f"{_PLACEMENT_MODULE}.{cls.__name__}", tuple(getattr(arg, f) for f in fields))


def is_complex(attr: Any) -> bool:
    """Whether an attribute is a complex number (`@builtins.complex(0.0, 2.0)`)."""
    return isinstance(attr, PyCall) and attr.path == "builtins.complex"


def _constructor(path: str) -> Any:
    """What builds the object `@path(...)` names, or None where no such call is allowed."""
    module, _, name = path.rpartition(".")
    if module == _PLACEMENT_MODULE and name in _PLACEMENTS:
        return getattr(importlib.import_module(module), name)
    return _CONSTRUCTORS.get(path)


def qualified_name(target: Any) -> str:
    """`target`'s path under the allow-list: torch names a builtin (`getattr`) without its
    module, which an `@path` needs."""
    name = _get_qualified_name(target)
    root, _, rest = name.partition(".")
    if not rest and getattr(builtins, name, None) is target:
        return f"builtins.{name}"
    return f"{_ALIASES.get(root, root)}.{rest}" if rest else name


#: op namespaces some of whose ops a torch module registers when imported, not torch itself:
#: Dynamo writes Inductor's `prims.fma` for `addcmul_` (an optimizer step), and a dump of its
#: graph must load in a process that never imported Inductor's prims
_REGISTERED_BY = {"prims": "torch._inductor.inductor_prims"}


def resolve(path: str) -> Any:
    """Resolve `torch.ops.aten.add.Tensor` or `operator.add` through the allow-list only."""
    root, *rest = path.split(".")
    if root not in ALLOWED_ROOTS:
        raise MindError(
            f"'@{path}' is outside the modules a target may come from ({', '.join(sorted(ALLOWED_ROOTS))})"
        )
    obj: Any = ALLOWED_ROOTS[root]
    for i, part in enumerate(rest):
        if not hasattr(obj, part) and i == 0 and root == "torch":
            try:
                obj = importlib.import_module(f"torch.{part}")
            except ImportError:
                raise MindError(
                    f"'@{path}' does not name an object ('{part}' is missing)"
                ) from None
            continue
        if not hasattr(obj, part) and path.startswith("torch.ops.") and i == 2:
            registering = _REGISTERED_BY.get(rest[1])  # torch.ops.<namespace>.<part>
            if registering is not None:
                importlib.import_module(registering)
        if not hasattr(obj, part):
            raise MindError(f"'@{path}' does not name an object ('{part}' is missing)")
        obj = getattr(obj, part)
    return obj


#: torch's own sympy functions (torch.utils._sympy.functions, by name) as the plain sympy that
#: IR text prints and parses back and that every emitter reads: `FloorDiv` prints `(s0//2)`,
#: which the grammar cannot read (`//` starts a comment)
_PLAIN_SYMPY: dict[str, Callable[..., sympy.Expr]] = {
    "FloorDiv": lambda a, b: sympy.floor(a / b),
    "CeilDiv": lambda a, b: sympy.ceiling(a / b),
    "ModularIndexing": lambda x, d, m: Mod(sympy.floor(x / d), m),
    "PythonMod": Mod,
    "Mod": Mod,
    "Max": sympy.Max,
    "Min": sympy.Min,
    "PowByNatural": sympy.Pow,
    "FloorToInt": sympy.floor,
    "CeilToInt": sympy.ceiling,
    "Identity": lambda x: x,
}


def plain_sympy(expr: sympy.Expr) -> sympy.Expr:
    """`expr` with torch's sympy functions replaced by sympy's own (see `_PLAIN_SYMPY`)."""
    from torch.utils._sympy import functions

    for name, make in _PLAIN_SYMPY.items():
        cls = getattr(functions, name, None)  # feature test: not every torch has every one
        if cls is not None and expr.has(cls):
            expr = expr.replace(cls, make)
    return expr


def sympify_symint(value: Any) -> Any:
    """A torch SymInt/SymFloat/SymBool (or its sympy expr) as an expression over mind's symbols,
    in plain sympy (inside `host_sizes`, with the sizes it names as their symbols)."""
    expr = value.node.expr if hasattr(value, "node") else value
    expr = plain_sympy(sympy.sympify(expr))
    expr = as_int_like(expr.xreplace({s: sym(s.name) for s in expr.free_symbols}))
    named = _HOST_SIZES.get()
    return expr.xreplace(named) if named and isinstance(expr, sympy.Basic) else expr


#: inside `host_sizes`: each size computed in float arithmetic, and the symbol naming it
_HOST_SIZES: ContextVar[dict[sympy.Expr, sympy.Symbol] | None] = ContextVar(
    "mind_host_sizes", default=None
)


@contextmanager
def host_sizes(examples: Iterable[Any]) -> Iterator[None]:
    """Inside, each size that a SymInt among `examples` computes in float arithmetic reads as a
    symbol of its own, `h0`, `h1`, ...: interpolate's output size for a scale factor,
    `TruncToInt(1.7*ToFloat(s0))`, which no index expression holds (it rounds as the float
    product does: `int(0.29 * 100)` is 28). The graph's value that computes it binds it on the
    host, as a data-dependent size is bound; a symbol is a size, so non-negative."""
    named: dict[sympy.Expr, sympy.Symbol] = {}
    for example in examples:
        if isinstance(example, torch.SymInt):
            expr = sympify_symint(example)
            if isinstance(expr, sympy.Expr) and not is_integral(expr) and expr not in named:
                named[expr] = sym(f"h{len(named)}")
    with bound(_HOST_SIZES, named):
        yield


def type_of(example: Any) -> Type:
    """The IR type of an example value from a node's meta (FakeTensor, SymInt, ...)."""
    if isinstance(example, torch.Tensor):
        return TensorType(
            from_torch(example.dtype),
            tuple(sympify_symint(s) for s in example.shape),
            tuple(sympify_symint(s) for s in example.stride()),
            from_torch_device(example.device),
        )
    if isinstance(example, torch.SymInt):
        return SymType(sympify_symint(example))
    if isinstance(example, bool):
        return ScalarType(dt.b8)
    if isinstance(example, int):
        return ScalarType(dt.i64)
    if isinstance(example, float):
        return ScalarType(dt.f64)
    return OpaqueType(type(example).__name__.lower() if example is not None else "none")


def to_attr(arg: Any, values: dict[torch.fx.Node, Value]) -> Any:
    """An fx argument structure as an attribute value, nodes replaced by their IR values."""
    if isinstance(arg, torch.fx.Node):
        return values[arg]
    if isinstance(arg, list | tuple):
        items = [to_attr(a, values) for a in arg]
        return items if isinstance(arg, list) else tuple(items)
    if isinstance(arg, dict):
        return {k: to_attr(v, values) for k, v in arg.items()}
    if isinstance(arg, slice):
        return PyCall("builtins.slice", to_attr((arg.start, arg.stop, arg.step), values))
    if isinstance(arg, complex):
        return PyCall("builtins.complex", (arg.real, arg.imag))
    placement = _placement(arg)
    if placement is not None:
        return placement
    if isinstance(arg, bool | int | float | str) or arg is None:
        return arg
    if isinstance(arg, torch.dtype):
        return from_torch(arg)
    if isinstance(arg, torch.device):
        return from_torch_device(arg)
    if isinstance(arg, torch.SymInt | torch.SymFloat):
        return sympify_symint(arg)
    if arg in _TORCH_CONSTANTS:
        return PyRef(_TORCH_CONSTANTS[arg])
    if arg is Ellipsis:
        return PyRef("builtins.Ellipsis")
    if callable(arg):
        return PyRef(qualified_name(arg))
    raise MindError(f"cannot express the argument {arg!r} ({type(arg).__name__}) in IR text")


def from_attr(attr: Any, nodes: dict[Value, torch.fx.Node]) -> Any:
    """The inverse of to_attr: IR values become fx nodes, `@refs` resolve, sympy becomes ints."""
    if isinstance(attr, PyCall) and _constructor(attr.path) is not None:
        return _constructor(attr.path)(*(from_attr(a, nodes) for a in attr.args))
    if isinstance(attr, PyRef):
        return resolve(attr.path)
    if isinstance(attr, DType):
        return to_torch(attr)
    if isinstance(attr, Device):
        return to_torch_device(attr)
    if isinstance(attr, sympy.Expr):
        raise MindError(f"symbolic argument '{attr}' needs the value that defines it")
    if isinstance(attr, list | tuple):
        items = [from_attr(a, nodes) for a in attr]
        return items if isinstance(attr, list) else tuple(items)
    if isinstance(attr, dict):
        return {k: from_attr(v, nodes) for k, v in attr.items()}
    return map_values(attr, lambda v: nodes[v])
