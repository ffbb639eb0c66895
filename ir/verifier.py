"""Structural verification shared by all dialects, then each op's own `verify` hook."""

from __future__ import annotations

from .core import Block, Module, Operation, Value
from .registry import OpDef, VerifyError, lookup_op


def verify(module: Module) -> None:
    """Raise VerifyError at the first op that breaks its definition or SSA dominance."""
    for op in module.ops:
        _verify_op(op, set())


def _verify_op(op: Operation, visible: set[Value]) -> None:
    opdef = lookup_op(op.name)
    if opdef is None:
        raise VerifyError(f"unknown operation '{op.name}'", op.loc)
    for value in op.operands:
        if value not in visible:
            raise VerifyError(f"'{op.name}' uses '%{value.name}' before it is defined", op.loc)
    _check_shape(op, opdef)
    for region in op.regions:  # inner ops first: their errors are the more precise ones
        _verify_block(region.block, set(visible))
    if opdef.verify is not None:
        opdef.verify(op)


def _verify_block(block: Block, visible: set[Value]) -> None:
    visible.update(block.args)
    for op in block.ops:
        _verify_op(op, visible)
        visible.update(op.results)


def _check_shape(op: Operation, opdef: OpDef) -> None:
    lo = len(opdef.args) - opdef.optional_args
    hi = None if opdef.variadic else len(opdef.args)
    if not opdef.signature and (len(op.args) < lo or (hi is not None and len(op.args) > hi)):
        raise VerifyError(
            f"'{op.name}' expects {_count(lo, hi, 'argument')}, got {len(op.args)}", op.loc
        )
    if opdef.results is not None and len(op.results) != opdef.results:
        raise VerifyError(
            f"'{op.name}' expects {_count(opdef.results, opdef.results, 'result')}, got {len(op.results)}",
            op.loc,
        )
    if len(op.regions) != opdef.regions:
        raise VerifyError(
            f"'{op.name}' expects {_count(opdef.regions, opdef.regions, 'region')}, got {len(op.regions)}",
            op.loc,
        )
    missing = [a for a in opdef.attrs if a not in op.attrs]
    if missing:
        raise VerifyError(f"'{op.name}' is missing attribute '{missing[0]}'", op.loc)
    if opdef.symbol and op.symbol is None:
        raise VerifyError(f"'{op.name}' needs a @symbol", op.loc)


def _count(lo: int, hi: int | None, noun: str) -> str:
    if hi is None:
        return f"at least {lo} {noun}s"
    if lo == hi:
        return f"{lo} {noun}{'' if lo == 1 else 's'}"
    return f"{lo} to {hi} {noun}s"
