"""Scans and sorts along r in kernels (`scheduled.scan`, `scheduled.sort`): both keep the row,
each r position getting its own value.

A scan whose row is in registers (a persistent kernel) is one `triton.scan`
(`tl.associative_scan` with the kind's combine, along r). In an r-loop (a looped kernel, for rows
too long for registers) each block is scanned alone and folded into what the loop carries, as
Inductor's looped scans do: the blocks before it combined, a [XBLOCK, 1] value starting at the
kind's neutral value; the block's last lane is carried on. Lanes past the row's end come after
every real lane along r, so they never reach a real result: neither needs a mask.

A sort is a bitonic network over the whole row in registers (`triton.sort`), its positions
(i16, as Inductor) moving with the values, so a node with a sort is always persistent (the
lowering sorts static rows of at most 512 elements, Inductor's bound, and falls back to ATen
otherwise). Lanes past the row's end sort last by their position.

Values fold and sort in the kind's accumulator dtype (f32 for f16/bf16). Two such ops of one
kind on the same value (the sorted values' node and the indices' node, fused) are computed once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mind.analysis.patterns import same
from mind.dialects.scans import SCANS, fold_dtype
from mind.dialects.scheduled import Node, Scan, Sort
from mind.dialects.triton import dtype_of, shape_of
from mind.ir import dtypes as dt
from mind.ir.core import Operation, Value
from mind.ir.diagnostics import MindError

from .kernel import HANDLERS, KernelBuilder, Scope


@dataclass
class Carry:
    """A scan's running value in an r-loop: the loop's carried block arguments (the fold of the
    blocks before this one), and the values the next iteration gets."""

    args: list[Value]
    nexts: list[Value] = field(default_factory=list)


def holds_row(node: Node) -> bool:
    """Whether the node needs each row whole in registers (a sort): a persistent kernel."""
    return any(isinstance(op, Sort) for op in node.body.ops)


def carry_init(b: KernelBuilder, scope: Scope, op: Scan) -> list[Value]:
    """Where a looped scan's running value starts: the kind's neutral value (and position 0)."""
    kind = SCANS[op.scan_type]
    dtype = fold_dtype(op.value.type.dtype)
    rows = b.tiling.groups[0].shape
    start = [b.full(scope, kind.neutral(dtype), dtype, rows)]
    return start + ([b.full(scope, 0, dt.i64, rows)] if kind.is_index else [])


def _row(b: KernelBuilder, scope: Scope, value: Value, dtype: dt.DType) -> Value:
    """`value` as a full [XBLOCK, R0_BLOCK] block of `dtype`."""
    if dtype_of(value) != dtype:
        value = b.emit(scope, "cast", [value], dtype, shape_of(value))
    full = b.tiling.full_shape
    if tuple(shape_of(value)) != full:
        value = b.emit(scope, "broadcast_to", [value], dtype, full)
    return value


def _positions(b: KernelBuilder, scope: Scope, dtype: dt.DType) -> Value:
    """Each lane's position along r, as a full block of `dtype`."""
    index = scope.indices["r0_index"]
    return _row(b, scope, index, dtype)


def _results(b: KernelBuilder, scope: Scope, name: str, args: list, types: list, attrs) -> list:
    """An op of several block results, `tmpN` each."""
    names = [f"tmp{b.counter + i}" for i in range(len(types))]
    b.counter += len(types)
    return scope.block.append(Operation(f"triton.{name}", args, attrs, types, names)).results


def _computed_twin(b: KernelBuilder, scope: Scope, op: Operation) -> Operation | None:
    """An earlier op of the body of the same kind and attributes on the same value (structurally),
    already computed in this scope."""
    for other in b.phases.ops:
        if other is op:
            return None
        if (
            other.name == op.name
            and dict(other.attrs) == dict(op.attrs)
            and other.results[0] in scope.values
            and same(other.value, op.value, b.phases.defs)
        ):
            return other
    return None


def _reuse_twin(b: KernelBuilder, scope: Scope, op: Operation) -> bool:
    twin = _computed_twin(b, scope, op)
    if twin is not None:
        scope.values.update({r: scope.values[t] for r, t in zip(op.results, twin.results)})
    return twin is not None


def translate_scan(b: KernelBuilder, scope: Scope, op: Scan) -> None:
    """The scan of the row (persistent), or of this block folded into the carry (r-loop)."""
    if _reuse_twin(b, scope, op):
        return
    kind = SCANS[op.scan_type]
    dtype = fold_dtype(op.value.type.dtype)
    source = scope.values[op.value]
    blocks = [_row(b, scope, source, dtype)]
    if kind.is_index:
        blocks.append(_positions(b, scope, dt.i64))
    attrs = {"axis": 1, "scan_type": kind.name}
    scanned = _results(b, scope, "scan", blocks, [v.type for v in blocks], attrs)
    carry = scope.carries.get(op)
    if carry is not None:
        combined = _results(
            b, scope, "combine", [*carry.args, *scanned], [v.type for v in blocks],
            {"scan_type": kind.name},
        )  # fmt: skip
        rows = b.tiling.groups[0].shape
        carry.nexts = [b.emit(scope, "last", [v, 1], dtype_of(v), rows) for v in combined]
        scanned = combined
    value = scanned[-1]
    result = op.result.type.dtype
    if dtype_of(value) != result:
        value = b.emit(scope, "cast", [value], result, shape_of(value))
    scope.values[op.result] = b.track(value, {"value": source, "r": scope.indices["r0_index"]})


def translate_sort(b: KernelBuilder, scope: Scope, op: Sort) -> None:
    """The row sorted in registers, with the positions its values come from."""
    if _reuse_twin(b, scope, op):
        return
    rgroup = b.tiling.rgroup
    if not isinstance(rgroup.numel, int) or b.tiling.config.blocks["R0_BLOCK"] < rgroup.numel:
        raise MindError(
            f"'{op.name}' needs its row of {rgroup.numel} elements whole in registers", op.loc
        )
    dtype = fold_dtype(op.value.type.dtype)
    source = scope.values[op.value]
    blocks = [_row(b, scope, source, dtype), _positions(b, scope, dt.i16)]
    attrs = {"descending": op.descending}
    if rgroup.masked:
        attrs["numel"] = b.numels["r0_"]
    values, positions = _results(b, scope, "sort", blocks, [v.type for v in blocks], attrs)
    outs = []
    for value, result in ((values, op.values), (positions, op.indices)):
        if dtype_of(value) != result.type.dtype:
            value = b.emit(scope, "cast", [value], result.type.dtype, shape_of(value))
        outs.append(b.track(value, {"value": source, "r": scope.indices["r0_index"]}))
    scope.values.update(zip(op.results, outs))


HANDLERS["scan"] = translate_scan
HANDLERS["sort"] = translate_sort
