"""Operation definitions and the dialect registry. The core holds the mechanism; each dialect
module registers its own operations on import."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

from .core import Operation
from .diagnostics import MindError

Verifier = Callable[[Operation], None]


@dataclass(frozen=True)
class OpDef:
    """What an operation must look like. `args` names the positional arguments (the last may be
    variadic when `variadic` is set); `results` is a count, or None for any number."""

    name: str
    args: tuple[str, ...] = ()
    optional_args: int = 0
    variadic: bool = False
    results: int | None = 1
    regions: int = 0
    attrs: tuple[str, ...] = ()
    symbol: bool = False
    signature: bool = False
    verify: Verifier | None = None
    summary: str = ""

    def arg_index(self, name: str) -> int:
        return self.args.index(name)


@dataclass
class Dialect:
    """A named set of ops; `resolve` lets a dialect define ops on demand (every ATen overload)."""

    name: str
    ops: dict[str, OpDef] = field(default_factory=dict)
    resolve: Callable[[str], OpDef | None] | None = None

    def op(self, name: str, **kwargs) -> OpDef:
        opdef = OpDef(f"{self.name}.{name}", **kwargs)
        self.ops[opdef.name] = opdef
        return opdef

    def lookup(self, name: str) -> OpDef | None:
        if name in self.ops:
            return self.ops[name]
        return self.resolve(name) if self.resolve else None


DIALECTS: dict[str, Dialect] = {}
#: dialect name -> the module that registers it, imported the first time the dialect is needed
#: (reading loops IR must not load torch, which the fx and aten dialects import)
DIALECT_MODULES: dict[str, str] = {}


def register_dialect(dialect: Dialect) -> Dialect:
    DIALECTS[dialect.name] = dialect
    return dialect


def dialect_module(name: str, module: str) -> None:
    """Say which module defines dialect `name`; it is imported on the dialect's first lookup."""
    DIALECT_MODULES[name] = module


def lookup_dialect(name: str) -> Dialect | None:
    if name not in DIALECTS and name in DIALECT_MODULES:
        importlib.import_module(DIALECT_MODULES[name])
    return DIALECTS.get(name)


def all_dialects() -> list[Dialect]:
    """Every known dialect, each loaded."""
    return [d for d in map(lookup_dialect, DIALECT_MODULES) if d is not None]


def lookup_op(name: str) -> OpDef | None:
    dialect = lookup_dialect(name.split(".", 1)[0])
    return dialect.lookup(name) if dialect else None


class VerifyError(MindError):
    """Raised by a verifier; carries the failing op's location."""


def terminated_by(terminator: str) -> Verifier:
    """A verifier for graph-like ops: the body must end with `terminator` (e.g. `aten.output`)."""

    def verify(op: Operation) -> None:
        last = op.body.terminator
        if last is None or last.name != terminator:
            raise VerifyError(f"'{op.name}' must end with '{terminator}'", op.loc)

    return verify


def arg(op: Operation, name: str):
    """The positional argument `name` of `op`, by its OpDef."""
    opdef = lookup_op(op.name)
    assert opdef is not None, op.name
    return op.args[opdef.arg_index(name)]
