"""Python identifiers for the values of the emitted module: the kernels, the load-time bindings
and the wrappers share one module namespace."""

from __future__ import annotations

import keyword
from collections import ChainMap
from collections.abc import MutableMapping

from mind.ir.core import Value, fresh_name


class Names:
    """Python identifiers for SSA values: their IR names when valid, unique per function. A
    function's names see the module's (`outer`) through, without a copy: a module has a name
    per kernel, and copying them for each kernel made emitting quadratic."""

    def __init__(self, taken: set[str], outer: Names | None = None):
        self.taken = taken
        self.outer = outer
        self.names: MutableMapping[Value, str] = ChainMap({}, outer.names) if outer else {}

    def is_taken(self, name: str) -> bool:
        return name in self.taken or (self.outer is not None and self.outer.is_taken(name))

    def fresh(self, base: str) -> str:
        """A name not taken yet, from `base`, now taken."""
        base = base if base.isidentifier() else f"v{base}"
        base = base + "_" if keyword.iskeyword(base) else base
        name = fresh_name(base, self.is_taken)
        self.taken.add(name)
        return name

    def __call__(self, value: Value) -> str:
        if value not in self.names:
            self.names[value] = self.fresh(value.name)
        return self.names[value]

    def scope(self) -> Names:
        """Names for one function: module-level names stay taken, its own stay its own."""
        return Names(set(), outer=self)
