"""welford: a two-pass variance becomes one reduction of a row's mean and squared deviations.

A variance (var, var_mean, a layer norm, a hand-written `((x - x.mean()) ** 2).mean()`) reduces
each row twice: `sum(v)`, then `sum((v' - sum / n) ** 2)` where v' is v computed again and n the
row's length. This pass makes each such pair one `scheduled.reduction` of kind `welford` with
two results, (mean, m2), as Inductor's welford_reduce:

    %1 = scheduled.reduction(%0) {reduction_type = "sum"} : f32
    ... %4 = scheduled.truediv(%1, %3) ... %7 = scheduled.reduction(%6) {reduction_type = "sum"} : f32
becomes
    %1, %2 = scheduled.reduction(%0) {reduction_type = "welford"} : f32, f32

`sum / n` becomes the mean; other uses of the sum read `mean * n`. Code generation decides how
to compute it (codegen/welford.py), which is where one pass beats two: a persistent kernel holds
the row and still takes two passes over registers (exact); a looped kernel reads the row once
instead of twice; a split reduction (passes/split_reductions.py) reduces the row's parts in one pass each
and merges them, where two passes would take four kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

from mind.analysis.deps import erase_dead, product
from mind.analysis.patterns import definitions, is_reduction, same, two_value_reduction
from mind.dialects.loops import Constant
from mind.dialects.scheduled import Node, Reduction
from mind.ir.core import Operation, Value
from mind.ir.types import ScalarType

from .manager import GraphPass
from .schedule import renumber


@dataclass(frozen=True)
class Welford(GraphPass, name="welford", input="scheduled"):
    """Make each two-pass variance one welford reduction (a row's mean and m2)."""

    def run_graph(self, graph: Operation) -> None:
        for node in graph.body.ops:
            if isinstance(node, Node):
                rewrite_node(node)


@dataclass(frozen=True)
class Variance:
    """A matched two-pass variance: the sum, its divisions by n (the mean), the squares' sum."""

    total: Reduction
    means: list[Operation]
    squares: Reduction
    n: float


def rewrite_node(node: Node) -> None:
    changed = False
    while (found := _find(node)) is not None:
        _rewrite(node, found)
        changed = True
    if changed:  # the reloads that go read what the reduction reads: the MemoryDeps stay
        erase_dead(node.body)
        renumber(node.body.ops)


def _find(node: Node) -> Variance | None:
    rnumel = product(list(node.sizes[1]))
    if not isinstance(rnumel, int):
        return None
    defs = definitions(node.body)
    for op in node.body.ops:
        found = _match(op, defs, float(rnumel))
        if found is not None:
            return found
    return None


def _match(op: Operation, defs: dict[Value, Operation], n: float) -> Variance | None:
    """`op` as the second pass, `sum((v' - sum(v) / n) ** 2)`, else None."""
    if not is_reduction(op, "sum"):
        return None
    dev = _squared(defs.get(op.value), defs)
    sub = defs.get(dev)
    if sub is None or sub.kind != "sub":
        return None
    mean = defs.get(sub.b)
    if mean is None or mean.kind != "truediv" or not _is_constant(defs.get(mean.b), n):
        return None
    total = defs.get(mean.a)
    if not is_reduction(total, "sum") or not same(sub.a, total.value, defs):
        return None
    dtypes = {v.type.dtype for v in (total.value, total.result, op.value, op.result)}
    if len(dtypes) != 1 or not dtypes.pop().is_floating_point:
        return None
    means = [u for u in total.result.users if _divides_by(u, total.result, n, defs)]
    return Variance(total, means, op, n)


def _squared(op: Operation | None, defs: dict[Value, Operation]) -> Value | None:
    """d for `d * d`, `square(d)` or `d ** 2`."""
    if op is None:
        return None
    if op.kind == "mul" and op.a is op.b:
        return op.a
    if op.kind == "square":
        return op.x
    if op.kind == "pow" and _is_constant(defs.get(op.b), 2.0):
        return op.a
    return None


def _is_constant(op: Operation | None, value: float) -> bool:
    return isinstance(op, Constant) and op.value == value


def _divides_by(op: Operation, total: Value, n: float, defs: dict[Value, Operation]) -> bool:
    return op.kind == "truediv" and op.a is total and _is_constant(defs.get(op.b), n)


def _rewrite(node: Node, found: Variance) -> None:
    total = found.total
    dtype = total.result.type.dtype
    welford = two_value_reduction(total, "welford")
    mean, m2 = welford.results
    for op in found.means:
        op.replace_by([mean])
    if total.result.users:  # other uses of the sum: mean * n
        n = Constant.build("scheduled.constant", value=found.n, results=[ScalarType(dtype)])
        node.body.insert_after(welford, n)
        times = Operation("scheduled.mul", [mean, n.result], result_types=[ScalarType(dtype)])
        node.body.insert_after(n, times)
        total.replace_by([times.result])
    else:
        total.erase()
    found.squares.replace_by([m2])
