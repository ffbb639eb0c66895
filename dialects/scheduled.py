"""The scheduled dialect: Inductor's scheduler nodes with MemoryDeps. See docs/IR.md.

A MemoryDep is the tuple `("buf0", index, {d0: 4, d1: 128})`: buffer name, flat index over the
dep's own variables, and their ranges.
"""

from __future__ import annotations

from mind.ir.core import Operation
from mind.ir.registry import Dialect, VerifyError, register_dialect, terminated_by

from .loops import register_body_ops, verify_reinterpret
from .scalar_ops import REDUCTION_TYPES


def _verify_deps(op: Operation) -> None:
    for key in ("writes", "met", "unmet"):
        for dep in op.attrs.get(key, []):
            if not (
                isinstance(dep, tuple)
                and len(dep) == 3
                and isinstance(dep[0], str)
                and isinstance(dep[2], dict)
            ):
                raise VerifyError(
                    f"'{op.name}' {key} entry must be (buffer, index, {{var: size}}), got {dep!r}",
                    op.loc,
                )


def _verify_node(op: Operation) -> None:
    _verify_deps(op)
    sizes = op.attrs["sizes"]
    if not (
        isinstance(sizes, tuple) and len(sizes) == 2 and all(isinstance(s, list) for s in sizes)
    ):
        raise VerifyError("'scheduled.node' sizes must be ([x sizes], [r sizes])", op.loc)
    if len(op.attrs["writes"]) != len(op.results):
        raise VerifyError("'scheduled.node' needs one write per result", op.loc)


def _verify_reduction(op: Operation) -> None:
    if op.attrs["reduction_type"] not in REDUCTION_TYPES:
        raise VerifyError(f"unknown reduction_type '{op.attrs['reduction_type']}'", op.loc)


SCHEDULED = register_dialect(Dialect("scheduled"))
SCHEDULED.op(
    "graph",
    results=0,
    regions=1,
    symbol=True,
    signature=True,
    verify=terminated_by("scheduled.output"),
)
SCHEDULED.op("output", variadic=True, results=0)
SCHEDULED.op(
    "node",
    results=None,
    regions=1,
    symbol=True,
    attrs=("sizes", "writes", "met", "unmet"),
    verify=_verify_node,
    summary="one kernel's worth of loops",
)
SCHEDULED.op(
    "extern",
    variadic=True,
    results=None,
    symbol=True,
    attrs=("writes", "met", "unmet"),
    verify=_verify_deps,
    summary="an ATen call with its own kernel",
)
SCHEDULED.op(
    "reinterpret",
    args=("buffer",),
    attrs=("offset",),
    verify=verify_reinterpret,
    summary="a buffer's memory with other sizes, strides and offset (no kernel)",
)
SCHEDULED.op("constant_tensor", symbol=True, attrs=("data",))
register_body_ops(SCHEDULED)
SCHEDULED.op(
    "reduction",
    args=("value",),
    attrs=("reduction_type",),
    verify=_verify_reduction,
    summary="reduce over the node's r dims; one value per x position",
)
SCHEDULED.op("store", args=("buffer", "index", "value"), results=0, summary="write one element")
