"""Python objects in IR text: the allow-list through which `@path` references resolve, and the
conversion between torch.fx argument structures and attribute values. Shared by fx and aten."""

from __future__ import annotations

import builtins
import importlib
import math
import operator
from typing import Any

import sympy
import torch
import torch.fx
from mind.ir import dtypes as dt
from mind.ir.attributes import PyCall, PyRef
from mind.ir.core import Value, map_values
from mind.ir.diagnostics import MindError
from mind.ir.dtypes import Device, DType
from mind.ir.symbols import as_int_like, sym
from mind.ir.types import OpaqueType, ScalarType, SymType, TensorType, Type
from torch.fx.node import _get_qualified_name

from .torch_types import from_torch, from_torch_device, to_torch, to_torch_device

#: the only modules an `@path` may resolve into
ALLOWED_ROOTS = {"torch": torch, "operator": operator, "math": math, "builtins": builtins}
_ALIASES = {"_operator": "operator"}
#: enum-like torch objects that appear as arguments (layouts, memory formats)
_TORCH_CONSTANTS = {
    obj: f"torch.{name}"
    for name in ("strided", "sparse_coo", "contiguous_format", "channels_last", "preserve_format")
    for obj in [getattr(torch, name)]
}
#: objects built from arguments in IR text, `@builtins.slice(none, 2, none)`
_CONSTRUCTORS = {"builtins.slice": slice}


def qualified_name(target: Any) -> str:
    """`target`'s path under the allow-list: torch names a builtin (`getattr`) without its
    module, which an `@path` needs."""
    name = _get_qualified_name(target)
    root, _, rest = name.partition(".")
    if not rest and getattr(builtins, name, None) is target:
        return f"builtins.{name}"
    return f"{_ALIASES.get(root, root)}.{rest}" if rest else name


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
            obj = importlib.import_module(f"torch.{part}")
            continue
        if not hasattr(obj, part):
            raise MindError(f"'@{path}' does not name an object ('{part}' is missing)")
        obj = getattr(obj, part)
    return obj


def sympify_symint(value: Any) -> Any:
    """A torch SymInt/SymFloat/SymBool (or its sympy expr) as an expression over mind's symbols."""
    expr = value.node.expr if hasattr(value, "node") else value
    expr = sympy.sympify(expr)
    return as_int_like(expr.xreplace({s: sym(s.name) for s in expr.free_symbols}))


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
    if isinstance(attr, PyCall) and attr.path in _CONSTRUCTORS:
        return _CONSTRUCTORS[attr.path](*(from_attr(a, nodes) for a in attr.args))
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
