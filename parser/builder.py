"""Turns lark parse trees into IR: attributes and types bottom-up, ops with SSA scoping."""

from __future__ import annotations

import json
import keyword
from typing import Any

import sympy
from lark import Token, Tree
from mind.ir.attributes import PyCall, PyRef
from mind.ir.core import Block, Operation, Region, Value
from mind.ir.diagnostics import Location, MindError
from mind.ir.dtypes import DTYPES, Device, DType
from mind.ir.registry import lookup_op
from mind.ir.symbols import Mod, as_int_like, is_integral, sym
from mind.ir.types import OpaqueType, ScalarType, SymType, TensorType, Type

#: functions an index expression may call
EXPR_FUNCTIONS = {
    "floor": sympy.floor,
    "ceiling": sympy.ceiling,
    "Mod": Mod,
    "Min": sympy.Min,
    "Max": sympy.Max,
    "Abs": sympy.Abs,
}

#: bare names that denote something other than a symbol when they stand alone as an attribute
NAMED_ATTRS: dict[str, Any] = dict(DTYPES)
#: names no symbol may take: alone in an attribute they read back as something else (the
#: grammar's literals, a device type of its DEVICE, a dtype), and in a kernel as Python (keywords)
RESERVED_NAMES = frozenset(
    {*keyword.kwlist, "inf", "nan", "true", "false", "none", "type", *NAMED_ATTRS}
    | {"cpu", "cuda", "meta", "mps", "xpu"}
)
#: the largest device index torch has (its DeviceIndex is an int8)
MAX_DEVICE_INDEX = 127


class Builder:
    """Builds one file. Each top-level op is its own scope (isolated, like an MLIR function);
    nested regions see their parents' values."""

    def __init__(self, filename: str, source: str):
        self.filename = filename
        self.source = source
        self.scopes: list[dict[str, Value]] = []

    # -- locations -----------------------------------------------------------------------
    def loc(self, item: Tree | Token) -> Location:
        if isinstance(item, Token):
            line, col = item.line, item.column
        else:
            line, col = item.meta.line, item.meta.column
        return Location(self.filename, line, col, self.source)

    def error(self, message: str, item: Tree | Token) -> MindError:
        return MindError(message, self.loc(item))

    # -- values --------------------------------------------------------------------------
    def define(self, token: Token, value: Value) -> Value:
        if any(token[1:] in scope for scope in self.scopes):
            raise self.error(f"redefinition of value '{token}'", token)
        self.scopes[-1][token[1:]] = value
        return value

    def use(self, token: Token) -> Value:
        for scope in reversed(self.scopes):
            if token[1:] in scope:
                return scope[token[1:]]
        raise self.error(f"use of undefined value '{token}'", token)

    # -- ops -----------------------------------------------------------------------------
    def top_level(self, tree: Tree) -> list[Operation]:
        ops = []
        for child in tree.children:
            self.scopes = [{}]
            ops.append(self.op(child))
        return ops

    def op(self, tree: Tree) -> Operation:
        parts = {
            c.data if isinstance(c, Tree) else "name": c for c in tree.children if not _is_region(c)
        }
        name_token = parts["name"]
        if name_token.type == "OPSTR":  # the generic form quotes the name
            name_token = name_token.update(value=name_token[1:-1])
        opdef = lookup_op(str(name_token))
        if opdef is None:
            raise self.error(f"unknown operation '{name_token}'", name_token)
        types = [self.type(t) for t in _children(parts.get("result_types"))]
        result_tokens = _children(parts.get("results"))
        if len(types) != len(result_tokens):
            raise self.error(
                f"'{name_token}' names {len(result_tokens)} results but gives {len(types)} types",
                name_token,
            )
        symbol = self.symbol(parts["symbol"]) if "symbol" in parts else None
        op = Operation(
            str(name_token),
            result_types=types,
            result_names=[t[1:] for t in result_tokens],
            symbol=symbol,
            loc=self.loc(name_token),
        )
        if opdef.own_results:  # its attributes and body name the buffers it writes
            self.define_results(result_tokens, op)
        args, block_args = self.arglist(parts.get("arglist"))
        if block_args and not opdef.signature:
            raise self.error(f"'{name_token}' takes no typed block arguments", parts["arglist"])
        op.args = args
        op.attrs = {
            self.key(e.children[0]): self.attr(e.children[1])
            for e in _children(parts.get("attrdict"))
        }
        regions = [c for c in tree.children if _is_region(c)]
        for i, region_tree in enumerate(regions):
            self.scopes.append({})
            block = Block()
            header = [
                c for c in region_tree.children if isinstance(c, Tree) and c.data == "block_args"
            ]
            if header:
                block_args += [self.typed(t) for t in header[0].children if t is not None]
            if header or i == 0:
                for token, type_ in block_args:
                    block.add_arg(self.define(token, Value(token[1:], type_)))
                block_args = []
            for child in region_tree.children:
                if child.data == "op":
                    block.append(self.op(child))
            self.scopes.pop()
            op.add_region(Region(block))
        if block_args and not regions:
            raise self.error(f"'{name_token}' has typed arguments but no region", name_token)
        if not opdef.own_results:
            self.define_results(result_tokens, op)
        return op

    def define_results(self, tokens: list[Token], op: Operation) -> None:
        for token, result in zip(tokens, op.results):
            self.define(token, result)

    def arglist(self, tree: Tree | None) -> tuple[list[Any], list[tuple[Token, Type]]]:
        args, block_args = [], []
        for child in _children(tree):
            if child is None:
                continue
            if isinstance(child, Tree) and child.data == "typed_arg":
                block_args.append(self.typed(child))
            else:
                args.append(self.attr(child))
        if args and block_args:
            raise self.error("an argument list mixes uses and typed block arguments", tree)
        return args, block_args

    def typed(self, tree: Tree) -> tuple[Token, Type]:
        return tree.children[0], self.type(tree.children[1])

    def symbol(self, tree: Tree) -> str:
        token = tree.children[0]
        return self.string(token, token[1:]) if token.type == "SYMSTR" else str(token[1:])

    def key(self, token: Token) -> str:
        return self.string(token) if token.type == "STRING" else str(token)

    def string(self, token: Token, text: str | None = None) -> str:
        """A JSON string literal (the grammar admits exactly JSON's escapes) that UTF-8 can
        encode: a lone surrogate (`"\\ud800"`) could be read but never written back."""
        value = json.loads(token if text is None else text)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise self.error("string holds a lone surrogate (not valid UTF-8)", token) from None
        return value

    # -- attributes ----------------------------------------------------------------------
    def attr(self, item: Tree | Token) -> Any:
        kind = item.data if isinstance(item, Tree) else item.type
        if kind == "symbol" and str(item.children[0]) in NAMED_ATTRS:
            return NAMED_ATTRS[str(item.children[0])]
        if kind in _EXPR_RULES:
            value = as_int_like(self.expr(item))
            if isinstance(value, int) and not -(2**63) <= value < 2**64:
                raise self.error(f"integer {value} does not fit in 64 bits", item)
            return value
        handler = _ATTR_RULES[kind]
        return handler(self, item)

    def expr(self, item: Tree | Token) -> sympy.Expr:
        """An index expression; division by zero or a non-finite result is an error here."""
        try:
            value = self._expr(item)
        except ZeroDivisionError:
            raise self.error("division by zero in index expression", item) from None
        if value.has(sympy.zoo, sympy.oo, -sympy.oo, sympy.nan):
            raise self.error(f"index expression '{value}' is not finite", item)
        return value

    def _expr(self, item: Tree | Token) -> sympy.Expr:
        kind = item.data
        kids = item.children
        if kind == "int":
            return sympy.Integer(int(kids[0]))
        if kind == "symbol":
            if str(kids[0]) in RESERVED_NAMES:
                raise self.error(f"'{kids[0]}' cannot name a symbol (a reserved word)", kids[0])
            return sym(str(kids[0]))
        if kind == "call":
            fn = EXPR_FUNCTIONS.get(str(kids[0]))
            if fn is None:
                raise self.error(f"unknown function '{kids[0]}' in index expression", kids[0])
            args = [self._expr(k) for k in kids[1:]]
            try:
                return fn(*args)
            except TypeError:
                raise self.error(
                    f"'{kids[0]}' does not take {len(args)} arguments", kids[0]
                ) from None
        if kind not in _EXPR_RULES:
            raise self.error("expected an index expression", item)
        return _EXPR_RULES[kind](*(self._expr(k) for k in kids))

    # -- types ---------------------------------------------------------------------------
    def dtype(self, token: Token) -> DType:
        if str(token) not in DTYPES:
            raise self.error(f"unknown dtype '{token}'", token)
        return DTYPES[str(token)]

    def type(self, tree: Tree) -> Type:
        kids = tree.children
        if tree.data == "scalar_type":
            return ScalarType(self.dtype(kids[0]))
        if tree.data == "sym_type":
            return SymType(as_int_like(self.expr(kids[0])))
        if tree.data == "opaque_type":
            return OpaqueType(str(kids[0])[1:])
        shape = self.dims(kids[1])
        if any(isinstance(d, int) and d < 0 for d in shape):
            raise self.error(
                f"negative size in tensor type [{', '.join(map(str, shape))}]", kids[1]
            )
        strides = device = None
        for extra in kids[2:]:
            if isinstance(extra, Tree):
                strides = self.dims(extra.children[0])
                if len(strides) != len(shape):
                    raise self.error(f"{len(shape)} sizes but {len(strides)} strides", extra)
            elif extra is not None:
                device = self.device(extra)
        return TensorType(self.dtype(kids[0]), shape, strides, device)

    def device(self, token: Token) -> Device:
        device = Device.parse(str(token))
        if device.index is not None and device.index > MAX_DEVICE_INDEX:
            raise self.error(f"device index {device.index} is beyond {MAX_DEVICE_INDEX}", token)
        return device

    def dims(self, tree: Tree) -> tuple:
        """Sizes or strides: integers (int64) or integer arithmetic over size symbols."""
        kids = [k for k in tree.children if k is not None]
        dims = tuple(as_int_like(self.expr(k)) for k in kids)
        for d, k in zip(dims, kids):
            if isinstance(d, int) and not -(2**63) <= d < 2**63:
                raise self.error(f"size or stride {d} does not fit in 64 bits", k)
            if not isinstance(d, int) and not is_integral(d):
                raise self.error(f"size or stride '{d}' is not integral", k)
        return dims


def _children(tree: Tree | None) -> list:
    return [] if tree is None else list(tree.children)


def _is_region(item) -> bool:
    return isinstance(item, Tree) and item.data == "region"


_EXPR_RULES = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "neg": lambda a: -a,
    "pow": lambda a, b: a**b,
    "int": None,
    "symbol": None,
    "call": None,
}

_ATTR_RULES = {
    "float": lambda b, t: float(t.children[0]),
    "pos_inf": lambda b, t: float("inf"),
    "neg_inf": lambda b, t: float("-inf"),
    "nan": lambda b, t: float("nan"),
    "true": lambda b, t: True,
    "false": lambda b, t: False,
    "none": lambda b, t: None,
    "string": lambda b, t: b.string(t.children[0]),
    "value": lambda b, t: b.use(t.children[0]),
    "pyref": lambda b, t: PyRef(str(t.children[0])[1:]),
    "pycall": lambda b, t: PyCall(
        str(t.children[0])[1:], tuple(b.attr(k) for k in t.children[1:] if k is not None)
    ),
    "device": lambda b, t: b.device(t.children[0]),
    "type_attr": lambda b, t: b.type(t.children[0]),
    "list": lambda b, t: [b.attr(k) for k in t.children if k is not None],
    "dict": lambda b, t: {
        b.key(e.children[0]): b.attr(e.children[1]) for e in t.children if e is not None
    },
    "tuple": lambda b, t: tuple(b.attr(k) for k in t.children),
}
