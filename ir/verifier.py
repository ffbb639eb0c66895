"""Verification shared by all dialects: SSA dominance, then each op against its declaration
(argument, attribute, result and region counts and constraints, symbol, terminator), then its
own `verify` hook. Every error carries the op's location."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .attributes import format_attr
from .core import Block, Module, Operation, Value
from .opdef import OpDef
from .registry import VerifyError, lookup_op


def verify(module: Module) -> None:
    """Raise VerifyError at the first op that breaks its definition or SSA dominance."""
    for op in module.ops:
        _verify_op(op, set())


def _verify_op(op: Operation, visible: set[Value]) -> None:
    opdef = lookup_op(op.name)
    if opdef is None:
        raise VerifyError(f"unknown operation '{op.name}'", op.loc)
    own = op.results if opdef.own_results else ()
    for value in op.operands:
        if value not in visible and value not in own:
            raise VerifyError(f"'{op.name}' uses '%{value.name}' before it is defined", op.loc)
    check_declaration(op, opdef)
    for region in op.regions:  # inner ops first: their errors are the more precise ones
        _verify_block(region.block, visible, own)
    if opdef.terminator is not None:
        last = op.body.terminator
        if last is None or last.name != opdef.terminator:
            raise VerifyError(f"'{op.name}' must end with '{opdef.terminator}'", op.loc)
    if opdef.verify is not None:
        opdef.verify(op)


def _verify_block(block: Block, visible: set[Value], own: Iterable[Value] = ()) -> None:
    """Verify the block's ops in order, each seeing `visible`, the op's `own` results (those of
    the op holding the block, where it declares so), the block's arguments and what the ops
    before it define. What the block adds is taken out again at its end: a copy of the
    enclosing values per region made verifying a graph of nodes with bodies quadratic."""
    added = [v for v in (*own, *block.args) if v not in visible]
    visible.update(added)
    for op in block.ops:
        _verify_op(op, visible)
        for result in op.results:
            if result not in visible:
                visible.add(result)
                added.append(result)
    visible.difference_update(added)


def check_declaration(op: Operation, opdef: OpDef) -> None:
    """`op` holds what its declaration says: counts, then each field's constraint."""
    decl = opdef.decl
    fixed, variadic, lo, hi = opdef.arg_counts
    args = op.args
    if len(args) < lo or (hi is not None and len(args) > hi):
        raise VerifyError(
            f"'{op.name}' expects {_count(lo, hi, 'argument')}, got {len(args)}", op.loc
        )
    for f, item in zip(fixed, args):
        if not f.constraint.check(item):
            _fail(op, f"argument '{f.name}'", f.constraint, item)
    if variadic is not None:
        check = variadic.constraint.check
        for item in args[variadic.position :]:
            if not check(item):
                _fail(op, f"argument '{variadic.name}'", variadic.constraint, item)
    named = decl.attr_names
    for key, item in op.attrs.items():
        f = named.get(key)
        if f is not None:
            if not f.constraint.check(item):
                _fail(op, f"attribute '{key}'", f.constraint, item)
        elif not opdef.open_attrs:
            raise VerifyError(f"'{op.name}' has unknown attribute '{key}'", op.loc)
    for key in opdef.required_attrs:
        if key not in op.attrs:
            raise VerifyError(f"'{op.name}' is missing attribute '{key}'", op.loc)
    _check_results(op, decl.results)
    if len(op.regions) != len(decl.regions):
        n = len(decl.regions)
        raise VerifyError(
            f"'{op.name}' expects {_count(n, n, 'region')}, got {len(op.regions)}", op.loc
        )
    if opdef.symbol and op.symbol is None:
        raise VerifyError(f"'{op.name}' needs a @symbol", op.loc)


def _check_results(op: Operation, fields: tuple) -> None:
    variadic = bool(fields) and fields[-1].variadic
    n = len(fields) - int(variadic)
    results = op.results
    if len(results) < n or (not variadic and len(results) > n):
        expected = _count(n, None if variadic else n, "result")
        raise VerifyError(f"'{op.name}' expects {expected}, got {len(results)}", op.loc)
    last = len(fields) - 1
    for i, r in enumerate(results):
        f = fields[i if i < last else last]
        if not f.constraint.check(r.type):
            raise VerifyError(
                f"'{op.name}' result '%{r.name}' must be {f.constraint}, not {r.type}", op.loc
            )


def _fail(op: Operation, what: str, constraint: Any, item: Any) -> None:
    raise VerifyError(f"'{op.name}' {what} must be {constraint}, got {_show(item)}", op.loc)


def _show(item: Any) -> str:
    """An offending attribute value as text (`%x: f32` for an SSA value), kept short."""
    if isinstance(item, Value):
        return f"%{item.name}: {item.type}"
    try:
        text = format_attr(item)
    except TypeError:
        text = repr(item)
    return text if len(text) <= 60 else text[:57] + "..."


def _count(lo: int, hi: int | None, noun: str) -> str:
    if hi is None:
        return f"at least {lo} {noun}{'' if lo == 1 else 's'}"
    if lo == hi:
        return f"{lo} {noun}{'' if lo == 1 else 's'}"
    return f"{lo} to {hi} {noun}s"
