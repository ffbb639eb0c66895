"""realize: decide which loops nodes become buffers (Inductor's StorageBox.realize rules).

Not realizing a node means every consumer recomputes it; realizing it costs a write and a read.
Like Inductor, realize graph outputs, reductions (and scans, sorts), inputs of extern and
fallback calls, nodes reused by several consumers whose bodies read a lot, and nodes whose
inlined bodies have grown too many reads or ops. Unlike Inductor, also realize a node that
computes a costly op (a libdevice routine: trig, erf, pow) which its consumers would compute many
times over per element: a rotary embedding's cos and sin tables, broadcast over batch and heads
in every layer, are computed once, not once per element of every query and key.

A view feeding an extern call or a graph output is passed as its buffer reinterpreted
(`loops.reinterpret`, Inductor's ReinterpretView) when it reads that buffer at `offset +
sum(stride_i * p_i)` with the strides needed there, and copied into a buffer otherwise. Graph
outputs and the arguments of ATen calls take the strides the aten graph gave them (callers
such as a backward graph assert them; a call's results are laid out after its arguments), as
Inductor freezes the layouts of outputs and extern inputs. A node realized for another reason
(a reduction, a reused node) takes the order its reads step memory (analysis/layouts.py), as
Inductor's flexible layouts: a node computed from channels-last buffers is channels-last.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable
from dataclasses import dataclass

from mind.analysis.deps import product
from mind.analysis.layouts import read_strides
from mind.analysis.loops import (
    base_of,
    body_ops,
    consumers,
    copy_node,
    flat_offset,
    is_view,
    producer,
    pvars,
    strides_of,
)
from mind.analysis.views import view_layout
from mind.dialects.collectives import Start, WaitTensor
from mind.dialects.common import Reinterpret, is_graph_input
from mind.dialects.loops import (
    ROW_NODES,
    Load,
    LoopsCall,
    LoopsOutput,
    Pointwise,
    Reduction,
    Scan,
    Scatter,
    Sort,
    View,
    Yield,
    is_buffer,
    is_realized,
)
from mind.dialects.scalar_ops import SCALAR_OPS
from mind.ir.attributes import op_key
from mind.ir.core import Block, Operation, Value, iter_values, map_values
from mind.ir.diagnostics import MindError
from mind.ir.symbols import IntLike, size_hint
from mind.ir.types import TensorType, contiguous_strides

from .manager import GraphPass, option

#: ops whose tensor arguments (all their positional arguments hold) must be buffers, laid out as
#: they say: calls, outputs, collectives (contiguous)
NEEDS_BUFFERS = (LoopsCall, LoopsOutput, Start)
#: ops whose tensor arguments must be realized (a reinterpret aliases its argument's memory, a
#: scatter updates its target's)
NEEDS_MEMORY = (*NEEDS_BUFFERS, Reinterpret, Scatter)
#: ops whose tensor results are named bufN (nodes computed from a body, scatters, calls,
#: collectives)
NAMED_BUFFERS = (Pointwise, Scatter, LoopsCall, Start, WaitTensor)


@dataclass(frozen=True)
class Cost:
    """What a node's body would cost once its unrealized producers are inlined into it."""

    reads: int
    ops: int
    costly: int  # ops that are libdevice routines (`ScalarOp.costly`)


@dataclass(frozen=True)
class Realize(GraphPass, name="realize", input="loops"):
    """Choose the nodes that become buffers (%bufN) and rewrite loads from them.

    Options mirror Inductor's config: realize_reads_threshold, realize_acc_reads_threshold, and
    a cap on the size of an inlined body."""

    reads_threshold: int = option(
        4, "realize a node read by several consumers when its body loads more than this"
    )
    acc_reads_threshold: int = option(
        8, "realize a node whose body (its producers inlined) loads more than this"
    )
    max_body_ops: int = option(64, "realize a node whose inlined body has more ops than this")
    recompute_factor: int = option(
        4,
        "realize a node whose inlined body has a costly op (trig, erf, pow) when its consumers "
        "would compute it more than this many times its size",
    )

    def run_graph(self, graph: Operation) -> None:
        realize_graph(graph, self)


def realize_graph(graph: Operation, opts: Realize) -> None:
    """Realize in place: reinterpretations or copies for views that need memory, then strides,
    flexible layouts, bufN names and flat loads for the chosen nodes. Graph outputs and the tensor arguments of
    extern and fallback calls get the strides the aten graph gave them (`strides` on
    `loops.output`, `input_strides` on the calls), fixed: a node computing one is realized with
    them, and a buffer laid out otherwise is copied into them."""
    block = graph.body
    _place_views(block)
    chosen, tables = _choose(block, opts)
    fixed = _fixed_layouts(block)
    for node in chosen:
        strides = fixed.get(node)
        if strides is None:
            strides = _flexible_strides(node, node in tables)
            node.layout = "flexible"
        node.result.type = dataclasses.replace(node.result.type, strides=strides)
    for op in block.ops:  # a scatter's result is its target's memory
        if isinstance(op, Scatter):
            op.result.type = op.target.type
    _copy_misplaced(block)
    _name_buffers(block)
    flatten_buffer_loads(block)


Strides = tuple[IntLike, ...]


def _flexible_strides(node: Operation, table: bool) -> Strides:
    """A node nothing fixes takes the order its reads step memory (analysis/layouts.py), unless
    a reinterpret reads its memory (`_place_views` made it for a contiguous layout), it runs
    along an axis (a scan, a sort), or it is a `table`, realized for consumers that broadcast it
    over their outer dims and step its inner ones (a rotary embedding's cos, over batch and
    heads): laid out as its reads step, it could be read across its rows."""
    reinterpreted = any(isinstance(op, Reinterpret) for op in node.result.users)
    if reinterpreted or table or isinstance(node, Scan | Sort):
        return contiguous_strides(node.result.type.shape)
    return read_strides(node)


def required_strides(op: LoopsCall | LoopsOutput | Start) -> list[Strides | None]:
    """One entry per value among `op.args` (in `iter_values` order): the strides it must have,
    or None where any layout will do. An output lists an entry for every output (`none` for
    non-tensors) in `strides`; a call one for every tensor argument in `input_strides`; a
    collective communicates contiguous buffers."""
    values = list(iter_values(op.args))
    if isinstance(op, Start):
        return [contiguous_strides(v.type.shape) for v in values]
    if isinstance(op, LoopsOutput):
        attr, what, listed, slots = "strides", "outputs", op.strides, list(op.values)
    else:
        attr, what, listed = "input_strides", "tensor arguments", op.input_strides
        slots = [v for v in values if isinstance(v.type, TensorType)]
    if listed is None:
        return [None] * len(values)
    if len(listed) != len(slots):
        raise MindError(f"'{op.name}' has {len(slots)} {what} but {attr} for {len(listed)}", op.loc)
    entries = iter(tuple(s) if isinstance(s, list | tuple) else None for s in listed)
    if isinstance(op, LoopsOutput):
        found = [e for arg in op.values for e in _spread(arg, next(entries))]
    else:
        found = [next(entries) if v in slots else None for v in values]
    for value, strides in zip(values, found):
        if strides is not None and len(strides) != getattr(value.type, "rank", -1):
            raise MindError(
                f"'{op.name}' needs '%{value.name}' ({value.type}) with strides {list(strides)}",
                op.loc,
            )
    return found


def _spread(arg: object, strides: Strides | None) -> list[Strides | None]:
    """An output's entry, for each value it holds (a value, or none inside a literal)."""
    return [strides] if isinstance(arg, Value) else [None] * len(list(iter_values(arg)))


def _fixed_layouts(block: Block) -> dict[Operation, Strides]:
    """The unrealized nodes that outputs and calls need laid out as the aten graph says, with the
    strides of their first such use."""
    layouts: dict[Operation, Strides] = {}
    for op in block.ops:
        if not isinstance(op, NEEDS_BUFFERS):
            continue
        for value, strides in zip(iter_values(op.args), required_strides(op)):
            node = producer(value)
            while isinstance(node, Scatter):  # laid out as the target it updates
                node = producer(node.target)
            if strides is not None and isinstance(node, Pointwise):
                if not is_realized(node):
                    layouts.setdefault(node, strides)
    return layouts


def _copy_misplaced(block: Block) -> None:
    """A buffer that an output or call needs with other strides (in a dim longer than 1, as
    `assert_size_stride` compares them) is passed as a copy laid out as needed, one per layout."""
    copies: dict[tuple[Value, Strides], Value] = {}
    for op in list(block.ops):
        if isinstance(op, NEEDS_BUFFERS):
            needed = iter(required_strides(op))
            op.args = map_values(
                op.args, lambda v, op=op, it=needed: _placed(block, op, v, next(it), copies)
            )


def _placed(
    block: Block, op: Operation, value: Value, strides: Strides | None, copies: dict
) -> Value:
    """`value`, or the copy of it laid out with `strides` (made before `op` on first need)."""
    if strides is None or not is_buffer(value):
        return value
    if same_layout(value.type.shape, strides_of(value), strides):
        return value
    if (value, strides) not in copies:
        node = producer(value)
        origins = list(getattr(node, "origins", None) or [])
        copy = copy_node(value, f"{value.name}_copy", origins, op.loc)
        copy.result.type = dataclasses.replace(copy.result.type, strides=strides)
        block.insert_before(op, copy)
        copies[value, strides] = copy.result
    return copies[value, strides]


def same_layout(shape: tuple[IntLike, ...], strides: Strides, expected: Strides) -> bool:
    """Equal strides in every dim of size other than 1."""
    return len(strides) == len(expected) and all(
        n == 1 or s == e for n, s, e in zip(shape, strides, expected)
    )


def _place_views(block: Block) -> None:
    """An extern call or a graph output needs memory: a view there (an argument, or a call's
    keyword argument) becomes its buffer reinterpreted when that gives the strides needed (one
    per view and layout; calls share one per buffer, offset and layout: the views a layer's
    three projections take of one input are one reinterpret, which the wrapper makes once a
    call, while two outputs stay two tensors), a copy otherwise (one per view); an identity view
    is replaced by its source."""
    fixed = _fixed_layouts(block)
    copies: dict[Value, Value] = {}
    aliases: dict[tuple[Value, Strides], Value] = {}
    by_memory: dict[Hashable, Value] = {}  # calls' reinterprets, by what they reinterpret

    def place(op: Operation, value: Value, strides: Strides | None) -> Value:
        while is_view(value) and _is_identity(producer(value)):
            value = producer(value).source
        if not is_view(value):
            return value
        reinterpret = _reinterpretation(value, strides, fixed)
        if reinterpret is None:
            if value not in copies:
                copies[value] = _insert_copy(block, producer(value))
            return copies[value]
        by_view = (value, reinterpret.result.type.strides)
        shared = op_key(reinterpret) if isinstance(op, LoopsCall) else None
        if by_view not in aliases and shared in by_memory:
            return by_memory[shared]  # another view's: an output of this view gets its own
        if by_view not in aliases:
            aliases[by_view] = block.insert_before(op, reinterpret).result
        if shared is not None:
            by_memory.setdefault(shared, aliases[by_view])
        return aliases[by_view]

    for op in list(block.ops):
        if isinstance(op, NEEDS_BUFFERS):
            needed = iter(required_strides(op))
            op.args = map_values(op.args, lambda v, op=op, it=needed: place(op, v, next(it)))
            # a call's keyword arguments (`attn_mask=`), in any layout
            op.attrs = map_values(dict(op.attrs), lambda v, op=op: place(op, v, None))


def _reinterpretation(
    view: Value, strides: Strides | None, fixed: dict[Operation, Strides]
) -> Operation | None:
    """`loops.reinterpret` of the buffer under `view` when the view reads it affinely with
    `strides` (in dims longer than 1; any strides when None), else None. A computed node under
    it is predicted laid out as it will be: with its fixed strides, else contiguous."""
    base = base_of(view)
    node = producer(base)
    if is_buffer(base):
        base_strides = strides_of(base)
    elif isinstance(node, Pointwise):
        base_strides = fixed.get(node, contiguous_strides(base.type.shape))
    else:
        return None
    layout = view_layout(view, base_strides)
    t = view.type
    if layout is None or (
        strides is not None and not same_layout(t.shape, layout.strides, strides)
    ):
        return None
    return Reinterpret.build(
        "loops.reinterpret",
        buffer=layout.base,
        offset=layout.offset,
        results=[dataclasses.replace(t, strides=strides or layout.strides)],
        names=[f"{view.name}_reinterpret"],
        loc=producer(view).loc,
    )


def _is_identity(view: View) -> bool:
    return view.source.type.shape == view.result.type.shape and view.index == pvars(
        0, len(view.index)
    )


def _insert_copy(block: Block, view: View) -> Value:
    """A copy of `view`, made after it; or, where an overwrite of a graph input comes between
    the node the view reads and the view, made before that overwrite, with its chain of views:
    each read of an input in the graph is of its value as it came (AOTAutograd's input
    mutations end the graph), and the copy reads the unrealized nodes under it where it runs
    (`permute(x * 2)` returned after `x.mul_(2)`)."""
    name = f"{view.result.name}_copy"
    copy = copy_node(view.result, name, list(view.origins or []), view.loc)
    chain = _view_chain(view)
    base = chain[0].source.owner
    start = block.ops.index(base) + 1 if base in block.ops else 0
    write = next(
        (
            op
            for op in block.ops[start : block.ops.index(view)]
            if isinstance(op, Scatter) and is_graph_input(op.target)
        ),
        None,
    )
    if write is None:
        block.insert_after(view, copy)
        return copy.result
    for link in chain:
        block.remove(link)
        block.insert_before(write, link)
    block.insert_before(write, copy)
    return copy.result


def _view_chain(view: View) -> list[View]:
    """The views from the one over a node or buffer up to `view`."""
    chain = [view]
    while is_view(chain[0].source):
        chain.insert(0, producer(chain[0].source))
    return chain


def _choose(block: Block, opts: Realize) -> tuple[list[Operation], set[Operation]]:
    """The unrealized nodes to realize, deciding in definition order so that each node's cost
    counts through the producers that stay inlined; and those among them realized only as
    tables that their consumers broadcast (the costly-and-broadcast rule)."""
    forced = {
        producer(base_of(v))
        for op in block.ops
        if isinstance(op, NEEDS_MEMORY)
        for v in op.operands
    }
    chosen: set[Operation] = set()
    tables: set[Operation] = set()
    costs: dict[Operation, Cost] = {}
    for node in block.ops:
        if not isinstance(node, Pointwise) or is_realized(node):
            continue
        cost = costs[node] = _cost(node, chosen, costs)
        users = consumers(node.result, block)
        reused = len(users) > 1 and cost.reads > opts.reads_threshold
        broadcast = cost.costly and _recomputed(node, users) > opts.recompute_factor
        if (
            isinstance(node, ROW_NODES)
            or node in forced
            or reused
            or cost.reads > opts.acc_reads_threshold
            or cost.ops > opts.max_body_ops
        ):
            chosen.add(node)
        elif broadcast:
            chosen.add(node)
            tables.add(node)
    return [n for n in block.ops if n in chosen], tables


def _cost(node: Operation, chosen: set[Operation], costs: dict[Operation, Cost]) -> Cost:
    reads = ops = costly = 0
    for op in node.body.ops:
        if isinstance(op, Yield):
            continue
        is_load = isinstance(op, Load)
        src = producer(base_of(op.source)) if is_load else None
        if src in costs and src not in chosen:  # an unrealized node: its body is inlined here
            reads += costs[src].reads
            ops += costs[src].ops
            costly += costs[src].costly
        else:
            reads += int(is_load)
            ops += 1
            costly += int(op.kind in SCALAR_OPS and SCALAR_OPS[op.kind].costly)
    return Cost(reads, ops, costly)


def _recomputed(node: Operation, users: set[Operation]) -> float:
    """How many times over its size the nodes that would inline `node` compute it: once per
    element they compute (per reduced element, for a reduction) and load of it. Symbolic sizes
    count at their size hint."""
    loads = sum(
        _evaluations(user)
        * sum(1 for ld in body_ops(user, Load) if base_of(ld.source) is node.result)
        for user in users
        if isinstance(user, Pointwise)
    )
    return loads / max(_evaluations(node), 1)


def _evaluations(node: Operation) -> int:
    """The elements a node's body is computed for."""
    sizes = list(node.result.type.shape)
    if isinstance(node, Reduction):
        sizes += node.reduction_ranges
    return size_hint(product(sizes))


def _name_buffers(block: Block) -> None:
    """Inductor's buffer names: buf0, buf1, ... in definition order over every buffer made."""
    n = 0
    for op in block.ops:
        if not isinstance(op, NAMED_BUFFERS):
            continue
        for result in op.results:
            if isinstance(result.type, TensorType) and result.type.strides is not None:
                result.name = f"buf{n}"
                n += 1


def flatten_buffer_loads(block: Block) -> None:
    """Loads from a node that just became a buffer take the flat offset its strides give."""
    for node in block.ops:
        for load in body_ops(node, Load):
            if is_buffer(load.source) and isinstance(load.index, list):
                load.index = flat_offset(load.source, load.index)
