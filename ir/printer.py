"""The text form. One generic syntax serves every op of every dialect:

    %r0, %r1 = dialect.op @symbol(arg, %value, [1, 2]) {key = value} : type0, type1 {
      region body
    }

Ops whose definition has `signature` print their entry block's arguments in place of args:
`aten.graph @forward(%arg0_1: f32[4, 128]) { ... }`.
"""

from __future__ import annotations

import re

from .attributes import format_attr, format_key
from .core import Block, Module, Operation, Value, fresh_name
from .registry import lookup_op

_VALUE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.]*$")
_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*$")


class Printer:
    """Prints ops with value names unique among those visible (sibling regions may reuse a name,
    as loop bodies reuse `%0`); a clash gets a `_N` suffix, so the text re-parses."""

    def __init__(self, indent: str = "  ", generic: bool = False):
        self.indent = indent
        self.generic = generic
        self.names: dict[Value, str] = {}
        self.scopes: list[set[str]] = [set()]

    def name(self, value: Value) -> str:
        if value not in self.names:
            base = value.name if _VALUE_NAME.match(value.name) else "v"
            name = fresh_name(base, lambda n: any(n in scope for scope in self.scopes))
            self.scopes[-1].add(name)
            self.names[value] = name
        return self.names[value]

    def attr(self, value) -> str:
        return format_attr(value, self.name)

    def op(self, op: Operation, depth: int = 0) -> str:
        pad = self.indent * depth
        opdef = lookup_op(op.name)
        text = pad
        if op.results:
            text += ", ".join(f"%{self.name(r)}" for r in op.results) + " = "
        text += format_attr(op.name) if self.generic else op.name
        if op.symbol is not None:
            text += " @" + (op.symbol if _SYMBOL.match(op.symbol) else format_attr(op.symbol))
        if not self.generic and opdef is not None and opdef.signature and op.regions:
            text += "(" + ", ".join(f"%{self.name(a)}: {a.type}" for a in op.body.args) + ")"
        elif self.generic or op.args or opdef is None or opdef.decl.args:
            text += "(" + ", ".join(self.attr(a) for a in op.args) + ")"
        if op.attrs:
            text += (
                " {"
                + ", ".join(f"{format_key(k)} = {self.attr(v)}" for k, v in op.attrs.items())
                + "}"
            )
        if op.results:
            text += " : " + ", ".join(str(r.type) for r in op.results)
        in_signature = not self.generic and opdef is not None and opdef.signature
        for i, region in enumerate(op.regions):
            text += " " + self.block(region.block, depth, show_args=not (in_signature and i == 0))
        return text

    def block(self, block: Block, depth: int, show_args: bool = True) -> str:
        self.scopes.append(set())
        lines = ["{"]
        if block.args and show_args:
            header = ", ".join(f"%{self.name(a)}: {a.type}" for a in block.args)
            lines.append(f"{self.indent * (depth + 1)}^({header}):")
        lines += [self.op(op, depth + 1) for op in block.ops]
        lines.append(self.indent * depth + "}")
        self.scopes.pop()
        return "\n".join(lines)


def print_op(op: Operation, generic: bool = False) -> str:
    return Printer(generic=generic).op(op)


def print_module(module: Module, generic: bool = False) -> str:
    """Each top-level op is its own naming scope, as the parser reads it. The generic form quotes
    op names, always writes the argument list, and puts block arguments in the region."""
    text = "\n\n".join(Printer(generic=generic).op(op) for op in module.ops)
    return text + ("\n" if module.ops else "")
