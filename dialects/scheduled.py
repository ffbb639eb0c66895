"""The scheduled dialect: Inductor's scheduler nodes with MemoryDeps. See docs/IR.md.

A MemoryDep is the tuple `(%buf0, index, {d0: 4, d1: 128})`: the buffer, the flat index over
the dep's own variables, and their ranges. A node (or an extern call) names the buffers it
writes, its own results, in its `writes` and in its body's stores.
"""

from __future__ import annotations

import math

from mind.ir import dtypes as dt
from mind.ir.constraints import (
    BOOL,
    DEVICE,
    INDEX,
    INT,
    LAID_OUT,
    NONE,
    SCALAR,
    STR,
    TENSOR,
    dict_of,
    list_of,
    one_of,
    tuple_of,
    value,
)
from mind.ir.core import Operation, Value
from mind.ir.opdef import Op, arg, attr, operand, opt_attr, region, result, var_results
from mind.ir.registry import Dialect, VerifyError, register_dialect

from .collectives import add_collective_ops
from .common import (
    ExternCall,
    Reinterpret,
    add_graph_ops,
    add_memory_ops,
    is_graph_input,
    memory_readers,
    verify_aliases,
    verify_overwrite,
    verify_sole_reader,
)
from .index_symbols import verify_loop_vars, verify_size_symbols
from .loops import INDIRECT, ORIGINS, TEMPLATES, Load, register_body_ops
from .reductions import KINDS, REDUCTIONS
from .scans import SCAN_KINDS, SCANS
from .store_modes import STORE_MODES

#: a MemoryDep: (buffer, flat index over its variables, {variable: range})
DEP = tuple_of(value(TENSOR), INDEX, dict_of(STR, INDEX))
DEPS = list_of(DEP)


class Node(Op):
    """One kernel's worth of loops: iterates p0.. over the x sizes, then the r sizes"""

    sizes = attr(tuple_of(list_of(INDEX), list_of(INDEX)))
    device = attr(DEVICE | NONE)
    origins = opt_attr(ORIGINS)
    writes = attr(DEPS)
    unmet = attr(DEPS)
    met = attr(DEPS)
    template = opt_attr(one_of(*TEMPLATES))
    updates = opt_attr(value(LAID_OUT))
    #: nodes of one combo run as one kernel (passes/combo_kernels.py)
    combo = opt_attr(INT)
    buffers = var_results(LAID_OUT)
    body = region()


class Extern(ExternCall):
    """An ATen call with its own kernel (extern or fallback)"""

    origins = opt_attr(ORIGINS)
    writes = attr(DEPS)
    unmet = attr(DEPS)
    met = attr(DEPS)


class Reduction(Op):
    """Reduce over the node's r dims; one value per x position (two for online_softmax)"""

    value = operand(SCALAR)
    reduction_type = attr(one_of(*KINDS))
    reduced = var_results(SCALAR)


def _verify_reduction(op: Reduction) -> None:
    count = REDUCTIONS[op.reduction_type].results
    if len(op.results) != count:
        raise VerifyError(
            f"'{op.name}' {op.reduction_type} gives {count} values, not {len(op.results)}", op.loc
        )


class Scan(Op):
    """Fold a value along the node's r dims (flattened): at each r position, the fold up to it"""

    value = operand(SCALAR)
    scan_type = attr(one_of(*SCAN_KINDS))
    result = result(SCALAR)


def _verify_scan(op: Scan) -> None:
    kind, got = SCANS[op.scan_type], op.result.type.dtype
    expected = dt.i64 if kind.is_index else op.value.type.dtype
    if got != expected:
        raise VerifyError(
            f"type mismatch: '{op.name}' {kind.name} gives {expected}, not {got}", op.loc
        )


class Sort(Op):
    """Sort a value along the node's r dims (flattened), stably, NaN largest: values, positions"""

    value = operand(SCALAR)
    descending = attr(BOOL)
    values = result(SCALAR)
    indices = result(SCALAR)


def _verify_sort(op: Sort) -> None:
    expected = (op.value.type.dtype, dt.i64)
    got = (op.values.type.dtype, op.indices.type.dtype)
    if got != expected:
        raise VerifyError(
            f"type mismatch: '{op.name}' of {expected[0]} gives {expected[0]}, i64, not "
            f"{got[0]}, {got[1]}",
            op.loc,
        )


#: body ops that give a value per r position from the whole row (or the row up to it)
KEEPS_ROW = (Scan, Sort)
#: body ops that take a whole row along r: a node needs r sizes (none of them 0) for them
ALONG_R = (Reduction, *KEEPS_ROW)


class Store(Op):
    """Write one element of a buffer the node produces, or of a graph input it overwrites

    A scatter's stores are indirect, or by a mode."""

    buffer = operand(LAID_OUT)
    index = arg(INDEX)
    value = operand(SCALAR)
    indirect = opt_attr(INDIRECT)
    mode = opt_attr(one_of(*STORE_MODES))


def _verify_extern(op: Extern) -> None:
    _verify_writes(op)
    verify_aliases(op)


def overwritten_inputs(op: Operation) -> list[Value]:
    """The graph inputs a node stores into (AOTAutograd's input mutations), in store order."""
    if not isinstance(op, Node):
        return []
    stores = [inner.buffer for inner in op.body.ops if isinstance(inner, Store)]
    return list(dict.fromkeys(v for v in stores if is_graph_input(v)))


def _verify_writes(op: Node | Extern) -> None:
    """One write per tensor result, in order: each names the result it writes (an extern's
    other results, a token or a size, are no buffers); then one per graph input a node
    overwrites."""
    written = [dep[0] for dep in op.writes]
    buffers = [r for r in op.results if TENSOR(r.type)] + overwritten_inputs(op)
    if written != buffers:
        names = ", ".join(f"%{v.name}" for v in written)
        raise VerifyError(
            f"'{op.name}' writes [{names}] but produces "
            f"[{', '.join('%' + r.name for r in buffers)}]",
            op.loc,
        )


def _verify_node(op: Node) -> None:
    _verify_writes(op)
    verify_loop_vars(op, len(op.sizes[0]) + len(op.sizes[1]))
    reduces = next((inner for inner in op.body.ops if isinstance(inner, ALONG_R)), None)
    if reduces is not None and not op.sizes[1]:
        raise VerifyError(f"'{reduces.name}' in a node with no r sizes to run over", reduces.loc)
    if reduces is not None and 0 in op.sizes[1]:
        raise VerifyError(f"'{reduces.name}' over no element (an r size is 0)", reduces.loc)
    if 0 in op.sizes[1]:  # (an empty node has an x size of 0: an r size of 0 skips its stores)
        raise VerifyError(f"'{op.name}' runs its body no time (an r size is 0)", op.loc)
    own = set(op.results)
    for inner in op.body.ops:
        if (
            isinstance(inner, Store)
            and inner.buffer not in own
            and not is_graph_input(inner.buffer)
        ):
            raise VerifyError(
                f"'{inner.name}' writes '%{inner.buffer.name}', which its node does not produce",
                inner.loc,
            )
    for inner in op.body.ops:
        if isinstance(inner, Load) and inner.source in own:
            raise VerifyError(
                f"'{inner.name}' reads '%{inner.source.name}', which its own node writes",
                inner.loc,
            )
    stored: set[Value] = set()
    for inner in op.body.ops:
        if isinstance(inner, Store) and inner.buffer in own and inner.buffer in stored:
            raise VerifyError(  # (its write, one per result, covers one store)
                f"'{inner.name}' stores '%{inner.buffer.name}' again: its node stored it",
                inner.loc,
            )
        if isinstance(inner, Store):
            stored.add(inner.buffer)
    missing = [r for r in op.results if r not in stored]
    if missing:
        raise VerifyError(f"'{op.name}' never stores '%{missing[0].name}'", op.loc)
    _verify_update(op)
    for target in overwritten_inputs(op):
        _verify_overwrite(op, target)


def _verify_overwrite(op: Node, target: Value) -> None:
    """A node that stores into a graph input (AOTAutograd's input mutations) stores each element
    once, and reads the input only at the element it overwrites (other lanes would see new
    values); the graph's other reads of the input come before it."""
    stores = [s for s in op.body.ops if isinstance(s, Store) and s.buffer is target]
    if len(stores) > 1 or op.updates is not None:
        raise VerifyError(f"'{op.name}' overwrites input '%{target.name}' twice", op.loc)
    verify_overwrite(
        op,
        target,
        stores[0].index,
        lambda other: isinstance(other, Reinterpret),
        lambda other: target in overwritten_inputs(other),
    )


def _verify_update(op: Node) -> None:
    """A node that updates a buffer in place (a scatter) produces that memory, of its type, as
    its one result; the buffer is computed by a node and read by nothing else. Only such a node
    stores at an indirect index or with a mode (a plain node writes every element it makes)."""
    target = op.updates
    for inner in op.body.ops:
        if isinstance(inner, Store) and target is None and (inner.indirect or inner.mode):
            raise VerifyError(
                f"'{inner.name}' scatters into '%{inner.buffer.name}', which its node does not "
                "update in place",
                inner.loc,
            )
    if target is None:
        return
    if [r.type for r in op.results] != [target.type]:
        made = ", ".join(f"%{r.name}: {r.type}" for r in op.results)
        raise VerifyError(
            f"'{op.name}' updates '%{target.name}' ({target.type}) in place but produces [{made}]",
            op.loc,
        )
    if not isinstance(target.owner, Node):
        raise VerifyError(
            f"'{op.name}' updates '%{target.name}', which no node of the graph computes", op.loc
        )
    verify_sole_reader(op, target)


def _verify_graph(op: Operation) -> None:
    """Nodes have names of their own (passes and kernels are named after them); their indices
    read sizes the graph binds."""
    verify_size_symbols(op)
    seen: set[str] = set()
    combos: dict[int, list[tuple[int, Node]]] = {}
    for i, inner in enumerate(op.body.ops):
        if isinstance(inner, Node):
            if inner.symbol in seen:
                raise VerifyError(f"a second node named '@{inner.symbol}'", inner.loc)
            seen.add(inner.symbol)
            if inner.combo is not None:
                combos.setdefault(inner.combo, []).append((i, inner))
    for combo, members in combos.items():
        _verify_combo(combo, members)


#: the elements a combo's node may have: its kernel's program offsets are 32-bit
COMBO_MAX_NUMEL = 2**31


def combinable(node: Node) -> bool:
    """Whether `node` may run as part of a combo kernel: pointwise, of static sizes (each part's
    programs are counted when the kernel is made), updating no buffer in place."""
    xs, rs = node.sizes
    if rs or node.template is not None or node.updates is not None:
        return False
    if not all(isinstance(s, int) for s in xs):
        return False
    return 0 < math.prod(xs) < COMBO_MAX_NUMEL


def _verify_combo(combo: int, members: list[tuple[int, Node]]) -> None:
    """A combo's nodes sit side by side, each combinable, on one device; their kernel runs them
    at once, so none reads what another writes, nor overwrites what another reads."""
    first, node = members[0]
    for k, (i, other) in enumerate(members):
        if i != first + k:
            raise VerifyError(
                f"'@{other.symbol}' of combo {combo} is not beside the combo's other nodes",
                other.loc,
            )
        if not combinable(other):
            raise VerifyError(
                f"'@{other.symbol}' cannot join combo {combo}: a combo's nodes are pointwise, of"
                f" static sizes under {COMBO_MAX_NUMEL} elements, updating nothing in place",
                other.loc,
            )
        if other.device != node.device:
            raise VerifyError(
                f"combo {combo} spans devices {node.device} and {other.device}", other.loc
            )
    nodes = {n for _, n in members}
    writer = {r: n for n in nodes for r in n.results}
    for other in nodes:
        for load in other.body.ops:
            if isinstance(load, Load) and writer.get(load.source, other) is not other:
                raise VerifyError(
                    f"'@{other.symbol}' reads '%{load.source.name}', which"
                    f" '@{writer[load.source].symbol}' of the same combo writes",
                    other.loc,
                )
        for target in overwritten_inputs(other):
            readers = memory_readers(target, other.parent, lambda o: isinstance(o, Reinterpret))
            reader = next((r for r in readers if r in nodes and r is not other), None)
            if reader is not None:
                raise VerifyError(
                    f"'@{other.symbol}' overwrites '%{target.name}', which '@{reader.symbol}' of"
                    " the same combo reads",
                    other.loc,
                )


SCHEDULED = register_dialect(Dialect("scheduled"))
add_graph_ops(SCHEDULED, verify=_verify_graph)
SCHEDULED.add("node", Node, symbol=True, own_results=True, verify=_verify_node)
SCHEDULED.add(
    "extern", Extern, symbol=True, own_results=True, open_attrs=True, verify=_verify_extern
)
add_memory_ops(SCHEDULED, "A buffer's memory with other sizes, strides and offset (no kernel)")
add_collective_ops(SCHEDULED)
register_body_ops(SCHEDULED)
SCHEDULED.add("reduction", Reduction, verify=_verify_reduction)
SCHEDULED.add("scan", Scan, verify=_verify_scan)
SCHEDULED.add("sort", Sort, verify=_verify_sort)
SCHEDULED.add("store", Store)
