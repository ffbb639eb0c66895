"""split-reductions: a reduction with too few rows to fill the GPU (a full sum, a column sum,
per-channel statistics) becomes two nodes, as Inductor's split reductions: a partial node
reduces each row's parts into buffers of partials, a final node reduces each row's partials and
runs the rest of the node (its per-row epilogue and stores). Both are ordinary nodes that
to-triton plans as any other (the partial one often looped, the final one persistent).

The row splits at a SplitPoint: its r dims before `dim`, and `parts` slices of `dim`, become part
dims (so that every index stays affine in the loop variables):

    @op0.partial: sizes ([*x, *part dims], [slice of dim, dims after it]) (part dims outermost
             for an outer reduction, so x stays contiguous); each reduction stores its partials,
             in its accumulator dtype (f32 for bf16 sums), one buffer per result (`%buf0_part0`);
             values stored along r before any reduction (a gradient whose column sum is a
             bias's) are stored here
    @op0:    sizes ([*x], [*part dims]); each reduction reduces its partials by its kind (welford
             merges the parts' (mean, m2), online_softmax their (max, sum of exp) by the kind's
             merge), then the node's per-row ops

It applies when every reduction is of a kind whose partials combine (not argmax/argmin, whose
index would need its part's offset) and reads only the row (no reduction depends on another: a
two-pass variance splits once the welford pass made it one reduction, a softmax's max and sum
once online-softmax did), when nothing stored along r depends on a reduction, the sizes are
static, and `split_factor` asks for parts; the split point is the one whose part count is
nearest to it. It runs after fuse, which keeps apart what a split would have to separate again
(`wanted_parts`: its "split" rule: a softmax of few long rows keeps its normalization apart), and
after welford and online-softmax, whose one-pass reductions split: a softmax's only while it
has at most a quarter as many rows as the GPU has SMs (`ONLINE_SOFTMAX_ROWS_PER_SM`), as a
decoder's few rows of vocabulary logits, which so spread over the GPU, not a program a row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import sympy
from mind.analysis.coalescing import is_inner
from mind.analysis.deps import INDEXED, erase_dead, product, set_node_deps
from mind.analysis.loops import pvar, substitute
from mind.analysis.patterns import closure
from mind.analysis.phases import Phases
from mind.dialects.loops import Load
from mind.dialects.reductions import REDUCTIONS, Arith, online_softmax_merge, welford_merge
from mind.dialects.scheduled import KEEPS_ROW, Node, Reduction, Store
from mind.ir import dtypes as dt
from mind.ir.core import Block, Operation, Region, Value
from mind.ir.types import ScalarType, TensorType, contiguous_strides

from .manager import GraphPass, option
from .merge_loops import normalize_deps
from .schedule import renumber

#: the streaming multiprocessors a split reduction fills (an H200's)
SM_COUNT = 132
#: the kinds whose partial results reduce again by their own kind (the two-result kinds by
#: their merges)
SPLITTABLE = ("sum", "prod", "max", "min", "any", "all", "welford", "online_softmax")
#: a softmax's online reduction splits only while it has at most this many rows per SM. On
#: an H100 (f32, CUDA graphs), rows of 1 x 128256, 4 x 50257, 8 x 128256 and 16 x 65536 took
#: 6.5, 5.6, 8.0 and 7.9 us split against 25.9, 13.3, 28.0 and 10.7 us a program a row
#: (Inductor: 8.1, 9.4, 10.2, 10.0); 64 x 16384, 128 x 32768 and 256 x 16384 took 8.0, 16.5 and
#: 16.4 us split against 6.6, 13.8 and 13.7: there a program a row reads fast enough that the
#: split's second kernel costs more than it saves
ONLINE_SOFTMAX_ROWS_PER_SM = 1 / 4


@dataclass(frozen=True)
class SplitReductions(GraphPass, name="split-reductions", input="scheduled"):
    """Split reductions whose rows are too few to fill the GPU into partial and final nodes."""

    sm_count: int = option(SM_COUNT, "the GPU's streaming multiprocessors (an H200 has 132)")

    def run_graph(self, graph: Operation) -> None:
        for node in list(graph.body.ops):
            point = split_point(node, self.sm_count) if isinstance(node, Node) else None
            if point is not None:
                split(graph.body, node, point)


def wanted_parts(node: Node, sm_count: int) -> int:
    """How many parts `node`'s rows would split into by their count and size alone (1: none),
    whatever its body: fuse asks it of nodes it may yet fuse."""
    xs, rs = node.sizes
    x, r = product(list(xs)), product(list(rs))
    if not rs or not isinstance(x * r, int):
        return 1
    return split_factor(x, r, is_inner(node), sm_count)


def split_factor(xnumel: int, rnumel: int, inner: bool, sm_count: int) -> int:
    """Into how many parts a reduction of `xnumel` rows of `rnumel` splits (1: none), so that
    enough programs fill `sm_count` SMs: Inductor's `reduction_split_factor` (2048 threads per SM,
    8 warps per program, 32 to 512 elements per thread) with its gates (no split past 64 rows per
    SM pair, nor of rows of at most 32; an inner row splits past 8192 and below 2 rows per SM)."""
    threads_per_sm, threads = 2048, 8 * 32
    low, high = 32 * sm_count * threads_per_sm, 512 * sm_count * threads_per_sm
    total = rnumel * xnumel
    if xnumel != 1 and (rnumel <= 32 or xnumel >= sm_count * 2 * 32):
        return 1
    if inner or xnumel == 1:
        if xnumel >= 2 * sm_count or rnumel <= 8192:
            return 1
        if total <= low:
            size = 32
        elif total < high:
            blocks = -(-(sm_count * threads_per_sm // (2 * threads)) // xnumel)
            size = _even(rnumel, -(-rnumel // (threads * blocks)), 30, at_least=32)
        else:
            size = _even(rnumel, 512, 50)
        return -(-rnumel // (size * threads))
    per_thread, xblocks = 4, -(-xnumel // 128)
    if total < low:
        size = 32
    elif total < high:
        blocks = -(-(sm_count * threads_per_sm // threads) // xblocks)
        size = _even(rnumel, -(-rnumel // (per_thread * blocks)), 20, at_least=32)
    else:
        size = _even(rnumel, 512, 50)
    return -(-rnumel // (per_thread * size))


def _even(n: int, size: int, slack: int, at_least: int = 1) -> int:
    """`size`, or the divisor of n nearest it when one is within `slack` (an even split)."""
    closest = min(sympy.divisors(n), key=lambda d: abs(d - size))
    return max(closest, at_least) if abs(closest - size) < slack else size


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


def split_point(node: Node, sm_count: int) -> SplitPoint | None:
    """How the node's rows split, or None when they do not."""
    xs, rs = node.sizes
    if not rs or not all(isinstance(s, int) for s in (*xs, *rs)):
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
        return None  # no reduced value is stored: the final node would write nothing
    wanted = wanted_parts(node, sm_count)
    if wanted <= 1:
        return None
    online = any(op.reduction_type == "online_softmax" for op in reductions)
    if online and product(list(xs)) > ONLINE_SOFTMAX_ROWS_PER_SM * sm_count:
        return None
    inner = is_inner(node)
    # whole parts of whole slices of one r dim, so that indices stay affine in the loop vars
    points = [
        SplitPoint(dim, d, inner, phases)
        for dim, size in enumerate(rs)
        for d in sympy.divisors(size)
        if math.prod(rs[:dim]) * d > 1
    ]
    return min(points, key=lambda p: abs(math.log(math.prod(p.part_sizes(list(rs))) / wanted)))


def split(block: Block, node: Node, point: SplitPoint) -> tuple[Node, Node]:
    """Put the partial and final nodes of `node` in its place, its uses on theirs."""
    partial, final, sources = split_node(node, point)
    for half in (partial, final):
        block.insert_before(node, half)
        renumber(half.body.ops)
        set_node_deps(half)
        normalize_deps(half)
    for new, old in sources.items():
        old.replace_all_uses_with(new)
    node.erase()
    return partial, final


def split_node(node: Node, point: SplitPoint) -> tuple[Node, Node, dict[Value, Value]]:
    """The partial and final nodes of `node` split at `point`, and the node's result each of
    their results stands for but the partials. Values stored along r (a gradient whose column
    sum the node also takes) are stored by the partial node, which visits every element once."""
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
    partials = [
        Value(f"{node.results[0].name}_part{k}", TensorType(dtype, *layout))
        for k, dtype in enumerate(_partial_dtypes(reductions))
    ]
    kept = [r for r in node.results if r not in stored]
    # (what is stored along r first: the partial node stores it before the partials)
    partial = _node(node, [part_xs, chunk], [*stored, *partials], f"{node.symbol}.partial")
    final = _node(node, [xs, parts], kept, node.symbol)
    vmap: dict[Value, Value] = dict(zip(stored, partial.results))
    for op in closure(node.body.ops, reductions + along_r):
        partial.body.append(_copy(op, vmap, reindex))
    # each reduction's results: stored as partials, reduced again in the final node
    final_map: dict[Value, Value] = dict(zip(kept, final.results))
    final_x, final_parts = [pvar(i) for i in range(nx)], [pvar(nx + i) for i in range(len(parts))]
    order = [*x_vars, *part_vars] if inner else [*part_vars, *x_vars]
    final_order = [*final_x, *final_parts] if inner else [*final_parts, *final_x]
    buffers = iter(partial.results[len(stored) :])
    for op in reductions:
        loaded = []
        for result in op.results:
            buffer = next(buffers)
            value = vmap[result]
            value.type = ScalarType(buffer.type.dtype)
            store = Store.build(
                "scheduled.store", buffer=buffer, index=_flat(part_xs, order), value=value
            )
            partial.body.append(store)
            loaded.append(_load(final.body, buffer, _flat(part_xs, final_order)))
        count = math.prod(chunk)
        final_map.update(zip(op.results, _reduce_again(final.body, op, loaded, count)))
    for op in node.body.ops:
        if not isinstance(op, Reduction) and not phases.has_r[op]:
            final.body.append(_copy(op, final_map, {}))
    for half in (partial, final):
        erase_dead(half.body)
    sources = dict(zip(partial.results, stored)) | dict(zip(final.results, kept))
    return partial, final, sources


def _node(node: Node, sizes: list[list[int]], results: list[Value], symbol: str) -> Node:
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
        symbol=symbol,
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


class BodyOps(Arith[Value]):
    """The two-result kinds' merges' arithmetic as scheduled body ops of one dtype, reducing
    along the node's r."""

    def __init__(self, block: Block, dtype: dt.DType):
        self.block, self.dtype = block, dtype

    def op(self, name: str, args: list[Value], predicate: bool = False) -> Value:
        result = ScalarType(dt.b8 if predicate else self.dtype)
        return self.block.append(Operation(f"scheduled.{name}", args, result_types=[result])).result

    def reduce(self, x: Value, kind: str) -> Value:
        op = Reduction.build(
            "scheduled.reduction", value=x, reduction_type=kind, results=[ScalarType(self.dtype)]
        )
        return self.block.append(op).result

    def constant(self, value: float) -> Value:
        return self.op("constant", [value])


def _reduce_again(block: Block, op: Reduction, partials: list[Value], chunk: int) -> list[Value]:
    """The reduction's results from its partials (each over `chunk` elements of the row)."""
    ops = BodyOps(block, op.results[0].type.dtype)
    if op.reduction_type == "welford":
        return list(welford_merge(ops, *partials, ops.constant(float(chunk))))
    if op.reduction_type == "online_softmax":
        return list(online_softmax_merge(ops, *partials))
    again = Reduction.build(
        "scheduled.reduction",
        value=partials[0],
        reduction_type=op.reduction_type,
        results=[r.type for r in op.results],
    )
    return block.append(again).results
