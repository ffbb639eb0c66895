"""The lowering registry: one function per ATen overload (or per packet, covering every
overload), called as `fn(ctx, *args, **kwargs)` with the aten op's arguments, aten values
replaced by loops values (SymInt values by their sympy expressions). It returns the loops
value(s) for the op's result(s). An op without a lowering, or one whose lowering raises
`Unsupported`, becomes a `loops.fallback` call."""

from __future__ import annotations

import importlib
from collections.abc import Callable

import torch
from mind.dialects.aten import op_name
from mind.dialects.pyobjects import qualified_name

Lowering = Callable[..., object]
LOWERINGS: dict[str, Lowering] = {}
#: the modules that register lowerings, one family each
FAMILIES = (
    "pointwise",
    "copies",
    "views",
    "masked",
    "creation",
    "reductions",
    "pooling",
    "scans",
    "indexing",
    "scatter",
    "extern",
)


class Unsupported(Exception):
    """A case a lowering does not cover (a bool mask index, a device change): ATen runs it."""


def key_of(target: torch._ops.OpOverload | torch._ops.OpOverloadPacket | str) -> str:
    """The registry key: `aten.add.Tensor` / `aten.add` for ATen, the qualified Python name
    (`torch.ops.prims.convert_element_type.default`) for other namespaces, as `aten.call`
    names them."""
    if isinstance(target, str):
        return target
    if isinstance(target, torch._ops.OpOverloadPacket):
        ns, name = target._qualified_op_name.split("::", 1)
        return f"aten.{name}" if ns == "aten" else f"torch.ops.{ns}.{name}"
    return op_name(target) if target.namespace == "aten" else qualified_name(target)


#: lowerings that take a number where the op's schema has a Tensor `self` (elementwise math:
#: `aten.sub.Tensor(7, x)`, which torch's references trace to); others get a tensor there
NUMBER_SELF: set[Lowering] = set()


def register_lowering(*targets, number_self: bool = False) -> Callable[[Lowering], Lowering]:
    def decorate(fn: Lowering) -> Lowering:
        for target in targets:
            LOWERINGS[key_of(target)] = fn
        if number_self:
            NUMBER_SELF.add(fn)
        return fn

    return decorate


def lowering_for(key: str) -> Lowering | None:
    """The lowering of an overload, else of its packet."""
    return LOWERINGS.get(key) or LOWERINGS.get(key.rsplit(".", 1)[0])


for _family in FAMILIES:
    importlib.import_module(f"{__name__}.{_family}")
