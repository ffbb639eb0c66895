"""attention-masks: an attention mask that no input changes, evaluated once and simplified.

A model that builds its mask from sizes alone hands `scaled_dot_product_attention` a mask that
eager code would have dropped. transformers' BERT called without an `attention_mask` builds
`arange(S) >= 0`, and Llama's causal-and-padding mask without padding is the causal triangle.
Eager transformers looks at the values and passes no mask, or `is_causal=True`. Traced, the mask
stays, and SDPA with a mask takes a slower kernel: one that reads a bias, or the math
decomposition (two bmm and a softmax, bf16 upcast to f32) for a mask of broadcast strides.

This pass runs the mask's subgraph once, at compile time, where it reads no graph input,
parameter or random number, and nothing writes its tensors in place. A mask that keeps every
score (all true, or all zero if additive) goes. A mask that is the causal triangle becomes
`is_causal=True`. Both rewrites are exact, and SDPA can then choose flash attention, as eager
does. Any other mask stays as it is.

It works on Dynamo's fx graph, before AOTAutograd decomposes SDPA: the backend runs it on the
GraphModule it gets, and `mind-opt --pass=attention-masks` on fx IR text."""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mind.ir.core import Operation
from mind.ir.logs import channel

from .manager import GraphPass

if TYPE_CHECKING:
    import torch
    import torch.fx

log = channel("passes")

#: scaled_dot_product_attention's parameters, in order
_PARAMETERS = (
    "query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa",
)  # fmt: skip
#: the most elements a value of a mask's subgraph may span in memory for the pass to run it (a
#: 8192 x 8192 mask: the model would make it on every call)
MAX_ELEMENTS = 1 << 26


def simplify_attention_masks(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """Drop or turn into `is_causal` the attention masks of `gm` that its inputs don't change
    (module docstring); returns the SDPA nodes rewritten. Nodes only the masks used are erased."""
    import torch

    calls = [
        (node, bound)
        for node in gm.graph.find_nodes(op="call_function", target=_sdpa())
        for bound in [dict(zip(_PARAMETERS, node.args)) | dict(node.kwargs)]
        if isinstance(bound.get("attn_mask"), torch.fx.Node) and not bound.get("is_causal")
    ]
    if not calls:
        return []
    written = {t for node in gm.graph.nodes for t in _writes(node)}
    masks: dict[torch.fx.Node, str | None] = {}
    changed = []
    for node, bound in calls:
        mask = bound["attn_mask"]
        if mask not in masks:
            masks[mask] = _kind(mask, bound.get("query"), bound.get("key"), written)
        if masks[mask] is None:
            continue
        del bound["attn_mask"]
        if masks[mask] == "causal":
            bound["is_causal"] = True
        node.args = tuple(bound.pop(p) for p in _PARAMETERS[:3])
        node.kwargs = bound
        log.info("%%%s: attn_mask %%%s is %s", node.name, mask.name, _SAYS[masks[mask]])
        changed.append(node)
    for mask in masks:
        _erase_unused(mask)
    if changed:
        gm.recompile()
    return changed


_SAYS = {"all": "all true: dropped", "causal": "the causal triangle: is_causal=True"}


def _sdpa():
    import torch

    return torch._C._nn.scaled_dot_product_attention


def _kind(
    mask: torch.fx.Node, query: object, key: object, written: set[torch.fx.Node]
) -> str | None:
    """What `classify` says of the mask's value, or None where the pass cannot evaluate it.
    `written`: the nodes whose tensors the graph writes in place (`_writes`)."""
    rows, cols = _length(query), _length(key)
    if rows is None or cols is None:
        return None
    value = _evaluate(mask, written)
    return None if value is None else classify(value, rows, cols)


def classify(mask: torch.Tensor, rows: int, cols: int) -> str | None:
    """What a mask of `rows` queries by `cols` keys is: "all", "causal" or None. An additive
    mask keeps a score where it is 0 and drops it where it is -inf or at most the dtype's
    lowest value (exp of that, less the row's max, is 0 in any float type: every row of the
    triangle keeps its diagonal, so no row's max is masked)."""
    import torch

    if mask.dtype != torch.bool and not mask.is_floating_point():
        return None
    try:
        mask = torch.broadcast_to(mask, (*mask.shape[:-2], rows, cols))
    except RuntimeError:  # SDPA refuses it as well
        return None
    mask = _unbroadcast(mask)
    keeps = mask if mask.dtype == torch.bool else mask == 0
    if bool(keeps.all()):
        return "all"
    triangle = torch.ones(rows, cols, dtype=torch.bool, device=mask.device).tril()
    drops = ~mask if mask.dtype == torch.bool else mask <= torch.finfo(mask.dtype).min
    return "causal" if bool(torch.where(triangle, keeps, drops).all()) else None


def _unbroadcast(mask: torch.Tensor) -> torch.Tensor:
    """`mask` with each broadcast dim (stride 0) cut to size 1: the same values, and whatever
    `classify` computes from them is no larger than what the mask holds."""
    index = tuple(slice(0, 1) if stride == 0 else slice(None) for stride in mask.stride())
    return mask[index]


def _length(node: object) -> int | None:
    """The sequence length (size -2) of a query or key, where it is a number."""
    value = _value(node) if hasattr(node, "meta") else None
    size = value.shape[-2] if value is not None and value.dim() >= 2 else None
    return size if isinstance(size, int) else None


def _evaluate(mask: torch.fx.Node, written: set[torch.fx.Node]) -> torch.Tensor | None:
    """The mask's value, computed by a copy of its subgraph, or None where the subgraph reads
    a graph input or attribute, draws random numbers, is too large or fails."""
    import torch
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    nodes = _subgraph(mask, written)
    if nodes is None:
        return None
    graph = torch.fx.Graph()
    copies: dict[torch.fx.Node, torch.fx.Node] = {}
    for node in nodes:
        copies[node] = graph.node_copy(node, copies.__getitem__)
    graph.output(copies[mask])
    try:
        with unset_fake_temporarily(), torch.no_grad(), _unseeded():
            value = torch.fx.GraphModule(torch.nn.Module(), graph)()
    except Exception as exc:  # noqa: BLE001 - any failure leaves the mask as it is
        log.debug("%s: not evaluated: %s: %s", mask.name, type(exc).__name__, exc)
        return None
    return value if isinstance(value, torch.Tensor) else None


def _subgraph(mask: torch.fx.Node, written: set[torch.fx.Node]) -> list[torch.fx.Node] | None:
    """The calls `mask` is made from, in graph order; None where one of them reads a graph
    input or attribute, spans more than MAX_ELEMENTS elements, or is written in place by a node
    outside them (`m[:, 4:] = -inf` leaves `m`'s own node computing zeros)."""
    seen: set[torch.fx.Node] = set()
    stack = [mask]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        if node.op not in ("call_function", "call_method") or _span(node) > MAX_ELEMENTS:
            return None
        seen.add(node)
        stack += node.all_input_nodes
    if _aliased(seen, written):
        return None
    return [n for n in mask.graph.nodes if n in seen]


#: calls that write their first argument (`x[i] = v`, `x += y` on a tensor)
_WRITES_FIRST = frozenset(
    getattr(operator, name)
    for name in (
        "setitem", "delitem", "iadd", "iand", "iconcat", "ifloordiv", "ilshift", "imatmul",
        "imod", "imul", "ior", "ipow", "irshift", "isub", "itruediv", "ixor",
    )
)  # fmt: skip


def _aliased(nodes: set[torch.fx.Node], written: set[torch.fx.Node]) -> bool:
    """Whether one of `written` is one of `nodes` or a view of one (the same storage, as the
    graph's example values tell)."""
    storages = {_storage(n) for n in nodes} - {None}
    return any(t in nodes or (_storage(t) or object()) in storages for t in written)


def _writes(node: torch.fx.Node) -> list[torch.fx.Node]:
    """The nodes whose tensors `node` writes in place: the first argument of an in-place method
    (`fill_`) or function (`torch.relu_`, `operator.setitem`), of a call with `inplace=True`,
    and `out=`; any argument of an op whose schema writes."""
    import torch

    if node.op not in ("call_function", "call_method"):
        return []
    if getattr(node.target, "__module__", None) in ("operator", "_operator"):
        in_place = node.target in _WRITES_FIRST  # `and_` is not in place
    else:
        name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
        in_place = isinstance(name, str) and name.endswith("_") and not name.startswith("__")
    if in_place or node.kwargs.get("inplace") is True:
        written = list(node.args[:1])
    elif isinstance(node.target, torch._ops.OpOverload) and node.target._schema.is_mutable:
        written = list(node.args)
    else:
        written = []
    written += [node.kwargs["out"]] if "out" in node.kwargs else []
    nodes: list[torch.fx.Node] = []
    torch.fx.node.map_arg(written, nodes.append)
    return nodes


def _storage(node: torch.fx.Node) -> object | None:
    """The storage of a node's example value (views share their base's), or None."""
    import torch
    from torch.multiprocessing.reductions import StorageWeakRef

    value = _value(node)
    if not isinstance(value, torch.Tensor):
        return None
    try:
        return StorageWeakRef(value.untyped_storage())
    except (NotImplementedError, RuntimeError):  # a tensor without storage
        return None


def _value(node: torch.fx.Node) -> object:
    """A node's example value: Dynamo's, or what fake tensor propagation gave it."""
    return node.meta.get("example_value", node.meta.get("val"))


def _span(node: torch.fx.Node) -> float:
    """The elements a node's value spans in memory (a broadcast dim, of stride 0, adds none):
    what running it allocates at most. Unknown sizes count as infinitely many."""
    import torch

    value = _value(node)
    if not isinstance(value, torch.Tensor):
        return 0
    dims = list(zip(value.shape, value.stride(), strict=True))
    if not all(isinstance(n, int) for dim in dims for n in dim):
        return math.inf
    if any(size == 0 for size, _ in dims):
        return 0
    return 1 + sum((size - 1) * abs(stride) for size, stride in dims)


def _erase_unused(node: torch.fx.Node) -> None:
    """Erase `node` if nothing uses it, then whatever it alone used (pure calls, as
    `_subgraph` found them)."""
    if node.users or node.op not in ("call_function", "call_method"):
        return
    inputs = node.all_input_nodes
    node.graph.erase_node(node)
    for n in inputs:
        _erase_unused(n)


def _unseeded():
    """A dispatch mode that refuses random ops: their values differ per call, so no mask made
    of them is constant."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Unseeded(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            import torch

            if torch.Tag.nondeterministic_seeded in func.tags:
                raise ValueError(f"{func} draws random numbers")
            return func(*args, **(kwargs or {}))

    return Unseeded()


@dataclass(frozen=True)
class AttentionMasks(GraphPass, name="attention-masks", input="fx"):
    """Evaluate attention masks that no input changes: drop an all-true one, make the causal
    triangle is_causal."""

    def run_graph(self, graph: Operation) -> None:
        from mind.dialects import fx

        gm = fx.export_graph(graph)
        # a node per op, in order (fx renames `%sum` to `sum_1`: names do not match them up)
        ops = dict(zip(gm.graph.nodes, graph.body.ops, strict=True))
        if not _propagate(gm, graph):
            return
        for node in simplify_attention_masks(gm):
            ops[node] = _rewrite(ops[node], node, ops)
        kept = set(gm.graph.nodes)
        graph.body.erase_ops(op for node, op in ops.items() if node not in kept)


def _propagate(gm: torch.fx.GraphModule, graph: Operation) -> bool:
    """Give `gm`'s nodes the fake values Dynamo would have (`meta["val"]`, views sharing their
    base's storage) from the placeholders' types; False where it cannot (symbolic sizes, a
    program torch rejects: to-aten reports those)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    from .to_aten import fake_inputs

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    try:
        FakeTensorProp(gm, mode).propagate(*fake_inputs(graph, mode))
    except Exception as exc:  # noqa: BLE001 - the pass leaves such a graph as it is
        log.debug("@%s: no fake values: %s: %s", graph.symbol, type(exc).__name__, exc)
        return False
    return True


def _rewrite(op: Operation, node: torch.fx.Node, ops: dict[torch.fx.Node, Operation]) -> Operation:
    """Replace `op` by one with the arguments of its rewritten node; returns that one."""
    from mind.dialects.pyobjects import to_attr

    values = {n: ops[n].result for n in node.all_input_nodes}
    new = Operation(
        op.name,
        list(to_attr(node.args, values)),
        to_attr(dict(node.kwargs), values),
        [op.result.type],
        [op.result.name],
        symbol=op.symbol,
        loc=op.loc,
    )
    op.parent.insert_after(op, new)
    op.replace_by([new.result])
    return new
