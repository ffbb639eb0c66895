"""Constraints on what an op's fields may hold: predicates with the words that diagnostics and
`mind-opt --list-ops` print for them (`index`, `list<index>`, `%tensor`, `"sum" | "max"`).

A constraint checks attribute values (ints, index expressions, lists, ...); `value(...)` checks
an SSA value by its type. They combine with `|`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import sympy

from .core import Value
from .dtypes import Device, DType
from .symbols import is_integral
from .types import OpaqueType, ScalarType, SymType, TensorType, Type


class Constraint:
    """A named predicate."""

    def __init__(self, text: str, check: Callable[[Any], bool]):
        self.text = text
        self.check = check

    def __call__(self, item: Any) -> bool:
        return self.check(item)

    def __str__(self) -> str:
        return self.text

    def __or__(self, other: Constraint) -> Constraint:
        return Constraint(f"{self} | {other}", lambda x: self.check(x) or other.check(x))


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


ANY = Constraint("any", lambda x: True)
NONE = Constraint("none", lambda x: x is None)
BOOL = Constraint("bool", lambda x: isinstance(x, bool))
INT = Constraint("int", _is_int)
STR = Constraint("str", lambda x: isinstance(x, str))
#: a number literal: what a scalar constant or a masked load's `other` holds
NUMBER = Constraint("number", lambda x: isinstance(x, bool | int | float))


def _is_index(x: Any) -> bool:
    if _is_int(x):
        return -(2**63) <= x < 2**63  # indexes are int64: a size, a stride, an offset
    return isinstance(x, sympy.Expr) and is_integral(x)


#: an index expression: an int64 or integer sympy arithmetic (over p vars, sizes, block sizes)
INDEX = Constraint("index", _is_index)
DTYPE = Constraint("dtype", lambda x: isinstance(x, DType))
DEVICE = Constraint("device", lambda x: isinstance(x, Device))


def one_of(*choices: str | int) -> Constraint:
    """One of the given strings or ints (of that type: True is no 1)."""
    text = " | ".join(json.dumps(c) for c in choices)
    return Constraint(text, lambda x: any(type(x) is type(c) and x == c for c in choices))


def list_of(item: Constraint) -> Constraint:
    return Constraint(
        f"list<{item}>", lambda x: isinstance(x, list) and all(item.check(i) for i in x)
    )


def tuple_of(*items: Constraint) -> Constraint:
    """A tuple of fixed length, each element under its own constraint; `tuple_of(c, ...)` is a
    tuple of any length under `c` (as typing writes it)."""
    if len(items) == 2 and items[1] is Ellipsis:
        each = items[0]
        return Constraint(
            f"tuple<{each}>", lambda x: isinstance(x, tuple) and all(each.check(i) for i in x)
        )
    text = "(" + ", ".join(map(str, items)) + ("," if len(items) == 1 else "") + ")"
    return Constraint(
        text,
        lambda x: (
            isinstance(x, tuple)
            and len(x) == len(items)
            and all(c.check(i) for c, i in zip(items, x))
        ),
    )


def dict_of(key: Constraint, item: Constraint) -> Constraint:
    return Constraint(
        f"{{{key}: {item}}}",
        lambda x: isinstance(x, dict) and all(key.check(k) and item.check(v) for k, v in x.items()),
    )


# -- types ---------------------------------------------------------------------------------------
ANY_TYPE = Constraint("any", lambda t: isinstance(t, Type))
TENSOR = Constraint("tensor", lambda t: isinstance(t, TensorType))
#: a tensor with strides: a buffer's layout
LAID_OUT = Constraint(
    "tensor[strides]", lambda t: isinstance(t, TensorType) and t.strides is not None
)
SCALAR = Constraint("scalar", lambda t: isinstance(t, ScalarType))
SYM = Constraint("sym", lambda t: isinstance(t, SymType))
OPAQUE = Constraint("opaque", lambda t: isinstance(t, OpaqueType))


def dtype_is(*dtypes: DType) -> Constraint:
    """A scalar or tensor type of one of `dtypes`."""
    return Constraint(
        " | ".join(d.name for d in dtypes),
        lambda t: isinstance(t, ScalarType | TensorType) and t.dtype in dtypes,
    )


def value(type_: Constraint = ANY_TYPE) -> Constraint:
    """An SSA value whose type satisfies `type_`."""
    text = f"%({type_})" if " | " in str(type_) else f"%{type_}"
    return Constraint(text, lambda x: isinstance(x, Value) and type_.check(x.type))
