"""Attribute values and their text: ints, floats (inf, nan), bools, strings, None, lists, tuples,
dtypes, devices, sympy expressions, references to Python objects (`@torch.strided`) and values."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import sympy

from .core import Block, Operation, Value, map_values
from .dtypes import Device, DType
from .types import Type

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class PyRef:
    """A dotted path to a Python object (`operator.add`, `torch.strided`); resolved only through
    an allow-list by whoever needs the object, never by evaluating text."""

    path: str

    def __str__(self) -> str:
        return f"@{self.path}"


@dataclass(frozen=True)
class PyCall:
    """A Python object built from arguments (`@builtins.slice(none, 2, none)`)."""

    path: str
    args: tuple


def format_float(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    text = repr(value)
    return text if any(c in text for c in ".en") else text + ".0"


def format_string(value: str) -> str:
    return json.dumps(value)


def format_key(key: str) -> str:
    """A dict or attribute key: bare when it is an identifier, quoted otherwise."""
    return key if _IDENT.match(key) else format_string(key)


def _format_seq(items: Any, open_: str, close: str, fmt: Callable[[Any], str]) -> str:
    body = ", ".join(fmt(x) for x in items)
    if open_ == "(" and len(items) == 1:
        body += ","
    return f"{open_}{body}{close}"


def format_attr(value: Any, value_name: Callable[[Value], str] = lambda v: v.name) -> str:
    """Text of an attribute value; `value_name` gives the printed name of an SSA value."""

    def fmt(x: Any) -> str:
        return format_attr(x, value_name)

    for kind, printer in _PRINTERS:
        if isinstance(value, kind):
            return printer(value, fmt, value_name)
    raise TypeError(f"cannot print attribute of type {type(value).__name__}: {value!r}")


_PRINTERS: list[tuple[type | tuple[type, ...], Callable[..., str]]] = [
    (bool, lambda v, f, n: "true" if v else "false"),
    (int, lambda v, f, n: str(v)),
    (float, lambda v, f, n: format_float(v)),
    (str, lambda v, f, n: format_string(v)),
    (type(None), lambda v, f, n: "none"),
    (Value, lambda v, f, n: f"%{n(v)}"),
    (list, lambda v, f, n: _format_seq(v, "[", "]", f)),
    (tuple, lambda v, f, n: _format_seq(v, "(", ")", f)),
    (dict, lambda v, f, n: "{" + ", ".join(f"{format_key(k)}: {f(x)}" for k, x in v.items()) + "}"),
    (DType, lambda v, f, n: v.name),
    (Device, lambda v, f, n: str(v)),
    (sympy.Expr, lambda v, f, n: str(v)),
    (PyRef, lambda v, f, n: str(v)),
    (PyCall, lambda v, f, n: f"@{v.path}(" + ", ".join(f(a) for a in v.args) + ")"),
    (Type, lambda v, f, n: f"type<{v}>"),
]


def attr_key(value: Any) -> Hashable:
    """A hashable stand-in for an attribute value, equal to another's exactly when their texts
    (`format_attr`) would be, without printing: a key to find identical ops by. A value stands
    for itself (by identity), an index expression for itself (sympy compares structurally)."""
    if isinstance(value, Value):
        return value
    if isinstance(value, float):
        return float, format_float(value)
    if isinstance(value, list | tuple):
        return type(value), tuple(attr_key(x) for x in value)
    if isinstance(value, dict):
        return dict, tuple((k, attr_key(x)) for k, x in value.items())
    if isinstance(value, sympy.Integer):
        return int, int(value)
    if isinstance(value, PyCall):
        return PyCall, value.path, attr_key(value.args)
    return type(value), value


def op_key(op: Operation) -> Hashable | None:
    """What an op computes, hashable: equal for two ops exactly when their texts would be but
    for their results' names (an op that repeats another computes its value again: CSE); None
    where some attribute cannot be hashed."""
    key = (op.name, attr_key(op.args), attr_key(dict(op.attrs)), tuple(r.type for r in op.results))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def body_key(block: Block) -> Hashable:
    """A hashable stand-in for a block's text up to the names of the values it defines (each is
    its number, in order of definition; values from outside stand for themselves): two bodies
    that compute alike have the same key, without printing either."""
    numbers: dict[Value, int] = {}

    def number(value: Value) -> Any:
        return ("%", numbers[value]) if value in numbers else value

    def block_key(b: Block) -> tuple:
        for arg in b.args:
            numbers[arg] = len(numbers)
        return tuple(a.type for a in b.args), tuple(numbered_op(op) for op in b.ops)

    def numbered_op(op: Operation) -> tuple:
        head = (op.name, op.symbol, attr_key(map_values(op.args, number)))
        attrs = attr_key(map_values(dict(op.attrs), number))
        for result in op.results:
            numbers[result] = len(numbers)
        types = tuple(r.type for r in op.results)
        return head, attrs, types, tuple(block_key(r.block) for r in op.regions)

    return block_key(block)
