"""The dialect registry. The core holds the mechanism; each dialect module registers its op
classes (ir/opdef.py) on import, and is imported the first time one of its ops is needed."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .core import Operation
from .diagnostics import MindError
from .opdef import Op, OpDef


@dataclass
class Dialect:
    """A named set of ops; `resolve` lets a dialect define ops on demand (every ATen overload)."""

    name: str
    ops: dict[str, OpDef] = field(default_factory=dict)
    resolve: Callable[[str], OpDef | None] | None = None

    def add(self, name: str, cls: type[Operation] = Op, **traits: Any) -> OpDef:
        """Register `cls` as `<dialect>.<name>`; one class may serve several dialects (the
        scalar ops of loop bodies). `traits` are OpDef's fields (symbol, verify, ...)."""
        traits.setdefault("summary", _first_line(cls.__doc__) if cls is not Op else "")
        decl = getattr(cls, "decl", None)
        opdef = OpDef(f"{self.name}.{name}", decl or OpDef.decl, cls, **traits)
        self.ops[opdef.name] = opdef
        _OPDEFS.pop(opdef.name, None)
        return opdef

    def op(self, name: str, **traits: Any) -> Callable[[type[Operation]], type[Operation]]:
        """Class decorator form of `add`."""

        def register(cls: type[Operation]) -> type[Operation]:
            self.add(name, cls, **traits)
            return cls

        return register

    def lookup(self, name: str) -> OpDef | None:
        if name in self.ops:
            return self.ops[name]
        return self.resolve(name) if self.resolve else None


def _first_line(doc: str | None) -> str:
    return doc.strip().splitlines()[0].rstrip(".") if doc else ""


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


_OPDEFS: dict[str, OpDef] = {}


def lookup_op(name: str) -> OpDef | None:
    opdef = _OPDEFS.get(name)
    if opdef is None:
        dialect = lookup_dialect(name.split(".", 1)[0])
        opdef = dialect.lookup(name) if dialect else None
        if opdef is not None:
            _OPDEFS[name] = opdef
    return opdef


def op_class(name: str) -> type[Operation]:
    """The class an op named `name` is built as (Operation when nothing declares it)."""
    opdef = lookup_op(name)
    return Operation if opdef is None else opdef.cls


Operation.resolve_class = op_class


class VerifyError(MindError):
    """Raised by a verifier; carries the failing op's location."""
