"""The split-reduction strategy: a reduction with too few rows to fill the GPU (a full sum, a
column sum, per-channel statistics) becomes two kernels, as Inductor's split reductions: the
first reduces each row's parts into temporaries, the second reduces each row's partials and runs
the rest of the node (its per-row epilogue and stores).

Both kernels come from scheduled nodes this strategy builds and the other strategies plan. The
row splits at a SplitPoint: its r dims before `dim`, and `parts` slices of `dim`, become part
dims (so that every index stays affine in the loop variables):

    partial: sizes ([*x, *part dims], [slice of dim, dims after it]) (part dims outermost for an
             outer reduction, so x stays contiguous); each reduction stores its partials, in its
             accumulator dtype (f32 for bf16 sums), one temporary per result; values stored along
             r before any reduction (a gradient whose column sum is a bias's) are stored here
    final:   sizes ([*x], [*part dims]); each reduction reduces its partials by its kind (welford
             merges the parts' (mean, m2) by the kind's combine), then the node's per-row ops

It applies when every reduction is of a kind whose partials combine (not argmax/argmin, whose
index would need its part's offset, nor online_softmax) and reads only the row (no reduction
depends on another: a two-pass variance splits once the welford pass made it one reduction),
when nothing stored along r depends on a reduction, the sizes are static, and `split_factor`
(heuristics.py) asks for parts; the split point is the one whose part count is nearest to it.
"""

from __future__ import annotations

import math
from collections import ChainMap
from collections.abc import Mapping
from dataclasses import dataclass, field

import sympy
from mind.analysis.deps import INDEXED, erase_dead, set_node_deps
from mind.analysis.loops import pvar, substitute
from mind.analysis.patterns import closure
from mind.dialects.loops import Load
from mind.dialects.reductions import REDUCTIONS, welford_merge
from mind.dialects.scheduled import KEEPS_ROW, Node, Reduction, Store
from mind.ir import dtypes as dt
from mind.ir.core import Block, Operation, Region, Value
from mind.ir.types import ScalarType, TensorType, contiguous_strides

from .heuristics import split_factor
from .phases import Phases
from .plan import KernelPlan, Options, Strategy
from .tiling import is_inner

#: the kinds whose partial results reduce again by their own kind (welford by its combine)
SPLITTABLE = ("sum", "prod", "max", "min", "any", "all", "welford")


class Split(Strategy):
    name, prefix = "split_reduction", "red"

    def applies(self, node: Node, options: Options) -> SplitPoint | None:
        return split_point(node, options)

    def plan(
        self,
        node: Node,
        options: Options,
        buffers: Mapping[Value, Value],
        index: int,
        fit: SplitPoint,
    ) -> KernelPlan:
        from . import STRATEGIES, plan_node  # the halves are planned by the other strategies

        rest = [s for s in STRATEGIES if not isinstance(s, Split)]
        partial, final, temporaries, sources = split_node(node, fit)
        own = {t: t for t in temporaries} | dict(zip(partial.results, temporaries))
        own |= {new: buffers[old] for new, old in sources.items()}
        known = ChainMap(own, buffers)  # over the graph's buffers, not a copy of them per node
        first = plan_node(partial, options, known, index, rest)
        second = plan_node(final, options, known, index + len(first.kernels), rest)
        return KernelPlan(
            first.kernels + second.kernels,
            first.launches + second.launches,
            temporaries + first.temporaries + second.temporaries,
        )


@dataclass(frozen=True)
class SplitPoint:
    """Where the r dims split: the dims before `dim` and `parts` slices of `dim` become the
    partial node's part dims; the rest of `dim` and the dims after it, its r dims. It carries
    what finding it computed of the node, which splitting reads too: whether the node reads
    contiguously along r (`is_inner`) and its body's phases."""

    dim: int
    parts: int
    inner: bool
    phases: Phases = field(compare=False)

    def part_sizes(self, rs: list[int]) -> list[int]:
        return [*rs[: self.dim], self.parts]

    def chunk_sizes(self, rs: list[int]) -> list[int]:
        return [rs[self.dim] // self.parts, *rs[self.dim + 1 :]]


def split_point(node: Node, options: Options) -> SplitPoint | None:
    """How the node's rows split, or None when they do not."""
    xs, rs = node.sizes
    if not options.split_reductions or not rs or not all(isinstance(s, int) for s in (*xs, *rs)):
        return None
    phases = Phases(node)
    reductions = [op for op in node.body.ops if isinstance(op, Reduction)]
    if not reductions or any(
        op.reduction_type not in SPLITTABLE or phases.level[op] > 0 for op in reductions
    ):
        return None
    if any(
        isinstance(op, Store)
        and phases.has_r[op]
        and phases.level[op] > 0
        or isinstance(op, KEEPS_ROW)
        for op in node.body.ops
    ):
        return None  # values stored along r after a reduction, or a row taken in order (a scan)
    if not any(isinstance(op, Store) and phases.level[op] > 0 for op in node.body.ops):
        return None  # no reduced value is stored: the second kernel would write nothing
    inner = is_inner(node)
    wanted = split_factor(math.prod(xs), math.prod(rs), inner, options.sm_count)
    if wanted <= 1:
        return None
    # whole parts of whole slices of one r dim, so that indices stay affine in the loop vars
    points = [
        SplitPoint(dim, d, inner, phases)
        for dim, size in enumerate(rs)
        for d in sympy.divisors(size)
        if math.prod(rs[:dim]) * d > 1
    ]
    return min(points, key=lambda p: abs(math.log(math.prod(p.part_sizes(list(rs))) / wanted)))


def split_node(node: Node, point: SplitPoint) -> tuple[Node, Node, list[Value], dict[Value, Value]]:
    """The partial and final nodes of `node` split at `point`, the temporaries that hold the
    partial node's partials (the final node reads them), and the node's buffer each half's
    other results are. Values stored along r (a gradient whose column sum the node also takes)
    are stored by the partial node, which visits every element once."""
    xs, rs = (list(s) for s in node.sizes)
    nx, parts, chunk = len(xs), point.part_sizes(rs), point.chunk_sizes(rs)
    inner, phases = point.inner, point.phases
    # the partial node's loops: x dims and part dims (outermost unless the reduction is inner)
    part_xs = [*xs, *parts] if inner else [*parts, *xs]
    x_vars = [pvar(i if inner else len(parts) + i) for i in range(nx)]
    part_vars = [pvar(nx + i if inner else i) for i in range(len(parts))]
    chunk_vars = [pvar(len(part_xs) + i) for i in range(len(chunk))]
    reindex = {pvar(i): v for i, v in enumerate(x_vars)}
    for i in range(len(rs)):  # r dims: part dims, then the sliced dim, then the chunk's dims
        if i < point.dim:
            reindex[pvar(nx + i)] = part_vars[i]
        elif i == point.dim:
            reindex[pvar(nx + i)] = chunk[0] * part_vars[-1] + chunk_vars[0]
        else:
            reindex[pvar(nx + i)] = chunk_vars[i - point.dim]
    reductions = [op for op in node.body.ops if isinstance(op, Reduction)]
    along_r = [op for op in node.body.ops if isinstance(op, Store) and phases.has_r[op]]
    stored = list(dict.fromkeys(op.buffer for op in along_r))  # written by the partial node
    layout = (tuple(part_xs), contiguous_strides(part_xs), node.device)
    temporaries = [
        Value(f"{node.results[0].name}_part{k}", TensorType(dtype, *layout))
        for k, dtype in enumerate(_partial_dtypes(reductions))
    ]
    kept = [r for r in node.results if r not in stored]
    partial = _node(node, [part_xs, chunk], [*temporaries, *stored])
    final = _node(node, [xs, parts], kept)
    vmap: dict[Value, Value] = dict(zip(stored, partial.results[len(temporaries) :]))
    for op in closure(node.body.ops, reductions + along_r):
        partial.body.append(_copy(op, vmap, reindex))
    # each reduction's results: stored as partials, reduced again in the final node
    final_map: dict[Value, Value] = dict(zip(kept, final.results))
    final_x, final_parts = [pvar(i) for i in range(nx)], [pvar(nx + i) for i in range(len(parts))]
    order = [*x_vars, *part_vars] if inner else [*part_vars, *x_vars]
    final_order = [*final_x, *final_parts] if inner else [*final_parts, *final_x]
    buffers = iter(zip(partial.results, temporaries))
    for op in reductions:
        loaded = []
        for result in op.results:
            buffer, temp = next(buffers)
            value = vmap[result]
            value.type = ScalarType(buffer.type.dtype)
            store = Store.build(
                "scheduled.store", buffer=buffer, index=_flat(part_xs, order), value=value
            )
            partial.body.append(store)
            loaded.append(_load(final.body, temp, _flat(part_xs, final_order)))
        count = math.prod(chunk)
        final_map.update(zip(op.results, _reduce_again(final.body, op, loaded, count)))
    for op in node.body.ops:
        if not isinstance(op, Reduction) and not phases.has_r[op]:
            final.body.append(_copy(op, final_map, {}))
    for half in (partial, final):
        erase_dead(half.body)
        set_node_deps(half)
    sources = dict(zip(partial.results[len(temporaries) :], stored)) | dict(
        zip(final.results, kept)
    )
    return partial, final, temporaries, sources


def _node(node: Node, sizes: list[list[int]], results: list[Value]) -> Node:
    """An empty node like `node` over `sizes`, with buffers like `results`."""
    return Node.build(
        "scheduled.node",
        sizes=(sizes[0], sizes[1]),
        device=node.device,
        origins=node.origins,
        writes=[],
        unmet=[],
        met=[],
        results=[r.type for r in results],
        names=[r.name for r in results],
        regions=[Region(Block())],
        symbol=node.symbol,
        loc=node.loc,
    )


def _copy(op: Operation, vmap: dict[Value, Value], reindex: dict) -> Operation:
    """`op` with values through `vmap` (which learns its results), indices through `reindex`."""
    new = op.clone(vmap)
    if reindex and isinstance(new, INDEXED):
        new.index = substitute(new.index, reindex)
    vmap.update(zip(op.results, new.results))
    return new


def _flat(sizes: list[int], variables: list) -> sympy.Expr:
    return sum((v * s for v, s in zip(variables, contiguous_strides(sizes))), sympy.Integer(0))


def _load(block: Block, buffer: Value, index) -> Value:
    dtype = buffer.type.dtype
    op = Load.build("scheduled.load", source=buffer, index=index, results=[ScalarType(dtype)])
    return block.append(op).result


def _partial_dtypes(reductions: list[Reduction]) -> list[dt.DType]:
    """The dtype of each reduction result's partials: its kind's accumulator (f32 for a bf16
    sum, rounded once, in the final node)."""
    return [
        REDUCTIONS[op.reduction_type].accumulator(op.value.type.dtype, r.type.dtype)
        for op in reductions
        for r in op.results
    ]


class BodyOps:
    """`welford_merge`'s arithmetic as scheduled body ops; `sum` reduces along the node's r."""

    def __init__(self, block: Block, dtype: dt.DType):
        self.block, self.dtype = block, dtype

    def _op(self, name: str, args: list) -> Value:
        op = Operation(f"scheduled.{name}", args, result_types=[ScalarType(self.dtype)])
        return self.block.append(op).result

    def constant(self, value: float) -> Value:
        return self._op("constant", [value])

    def sum(self, x: Value) -> Value:
        op = Reduction.build(
            "scheduled.reduction", value=x, reduction_type="sum", results=[ScalarType(self.dtype)]
        )
        return self.block.append(op).result

    def add(self, a: Value, b: Value) -> Value:
        return self._op("add", [a, b])

    def sub(self, a: Value, b: Value) -> Value:
        return self._op("sub", [a, b])

    def mul(self, a: Value, b: Value) -> Value:
        return self._op("mul", [a, b])

    def truediv(self, a: Value, b: Value) -> Value:
        return self._op("truediv", [a, b])


def _reduce_again(block: Block, op: Reduction, partials: list[Value], chunk: int) -> list[Value]:
    """The reduction's results from its partials (each over `chunk` elements of the row)."""
    if op.reduction_type == "welford":
        ops = BodyOps(block, op.results[0].type.dtype)
        return list(welford_merge(ops, *partials, ops.constant(float(chunk))))
    again = Reduction.build(
        "scheduled.reduction",
        value=partials[0],
        reduction_type=op.reduction_type,
        results=[r.type for r in op.results],
    )
    return block.append(again).results
