"""Which symbols the index expressions of loops and scheduled IR may hold: the loop variables of
their node (`p0` up to its iteration's rank), the values of their op's own indirect index (`i0`
up to their count), and the size symbols their graph binds (in a type of an input, or of a value
an op makes: an unbacked size). Code generation takes any other symbol for a size the kernel is
passed, and a `p` past the rank for a loop no kernel runs: an expression holding one compiled to
a kernel reading what nothing defines, or to one that dropped the read."""

from __future__ import annotations

import re
from collections.abc import Iterator

import sympy
from mind.ir.core import Operation
from mind.ir.registry import VerifyError
from mind.ir.types import size_symbols

#: a loop variable (`p`) or an indirect index's value (`i`), and its position
_VAR = re.compile(r"([pi])(\d+)")
#: the fields of an op that hold index expressions (a view's index, a reduction's ranges, ...)
_EXPR_FIELDS = ("index", "reduction_ranges", "ranges", "sizes")


def verify_loop_vars(node: Operation, rank: int) -> None:
    """Each index in `node`'s body (or of the view `node`) reads loop variables below `rank`, and
    indirect values its own op has."""
    for op in node.walk():
        indirect = len(getattr(op, "indirect", None) or ())
        for s in _symbols(op):
            match = _VAR.fullmatch(s.name)
            if match is None:
                continue
            kind, position = match[1], int(match[2])
            if kind == "p" and position >= rank:
                raise VerifyError(
                    f"'{op.name}' reads loop variable '{s}', but its node's are {_vars('p', rank)}",
                    op.loc,
                )
            if kind == "i" and position >= indirect:
                raise VerifyError(
                    f"'{op.name}' reads indirect value '{s}', but its own are {_vars('i', indirect)}",
                    op.loc,
                )


def verify_size_symbols(graph: Operation) -> None:
    """Every other symbol in an index of `graph`'s nodes is a size the graph binds."""
    block = graph.body
    bound = set().union(
        *(size_symbols(v.type) for v in block.args),
        *(size_symbols(r.type) for op in block.ops for r in op.results),
    )
    for op in (op for node in block.ops for op in node.walk()):
        for s in _symbols(op):
            if s.name not in bound and not _VAR.fullmatch(s.name):
                raise VerifyError(
                    f"'{op.name}' reads '{s}', which is neither a loop variable nor a size of the"
                    " graph",
                    op.loc,
                )


def _vars(kind: str, count: int) -> str:
    """`p0..p2`, `p0`, or none."""
    return "none" if count == 0 else f"{kind}0" + (f"..{kind}{count - 1}" if count > 1 else "")


def _symbols(op: Operation) -> Iterator[sympy.Symbol]:
    for name in _EXPR_FIELDS:
        for expr in _flat(getattr(op, name, None)):
            if isinstance(expr, sympy.Basic):
                yield from expr.free_symbols


def _flat(item: object) -> Iterator[object]:
    if isinstance(item, (list, tuple)):
        for inner in item:
            yield from _flat(inner)
    else:
        yield item
