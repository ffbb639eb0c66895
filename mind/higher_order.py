"""ATen graphs holding higher-order ops: `torch.cond`, `while_loop`, `flex_attention`, ... ops
whose arguments include graphs. mind's dialects have no op that holds a graph, so such a graph
is split around them (torch.fx's `split_module`): each run of other ops between them compiles
as a graph of its own (`<graph>_part<i>`: dumped, cached and checked as any graph), and each
higher-order op runs as torch runs it eagerly. The subgraphs of those that call them with
tensors (`CALLS_SUBGRAPHS`: a cond's branches, a while_loop's condition and body, a
`nested_compile_region`'s body) compile too;
the others keep torch's (flex_attention's score_mod, which torch vmaps: no compiled code could
stand in for it). Under symbolic sizes each part also takes the size symbols it uses that its
tensors hold only inside expressions (`_pass_size_symbols`)."""

from __future__ import annotations

import operator
from collections.abc import Callable

import sympy
import torch
from torch.fx.passes.split_module import split_module

#: compiles one part: (its GraphModule, its symbol) -> a boxed callable
CompilePart = Callable[[torch.fx.GraphModule, str], Callable[[list], object]]
#: the higher-order ops whose eager implementation calls their subgraphs with tensors
CALLS_SUBGRAPHS = ("cond", "while_loop", "invoke_subgraph")


def higher_order_ops(gm: torch.fx.GraphModule) -> list[str]:
    """The names of the higher-order ops `gm` calls, in order, once each."""
    names = (str(n.target.name()) for n in gm.graph.nodes if _is_higher_order(n))
    return list(dict.fromkeys(names))


def split_around_higher_order_ops(
    gm: torch.fx.GraphModule, symbol: str, compile_part: CompilePart
) -> Callable[[list], object]:
    """`gm` as a boxed callable that calls its compiled parts and its higher-order ops."""
    split = split_module(gm, None, _partition_of(gm).__getitem__, keep_original_order=True)
    _pass_size_symbols(split)
    for name, part in list(split.named_children()):
        part_symbol = f"{symbol}_part{name.rsplit('_', 1)[1]}"
        if higher_order_ops(part):
            _compile_subgraphs(part, part_symbol, compile_part)
        else:
            setattr(split, name, _compiled(part, part_symbol, compile_part))

    def call(args: list) -> object:
        inputs = list(args)
        args.clear()  # as a generated `call` does: the caller's list holds nothing alive
        return split(*inputs)

    return call


def _pass_size_symbols(split: torch.fx.GraphModule) -> None:
    """Give each part to compile, as inputs of its own, the size symbols its values use that its
    inputs do not hold alone: a part after a `cond` may get only a flattened `s0*s1`-long tensor,
    from which no wrapper can read `s0` and `s1`, which its kernels take. Each is read in the
    split graph from the graph's own inputs (a `sym(s0)` input, or a tensor's size or stride)."""
    graph = split.graph
    inputs = list(graph.find_nodes(op="placeholder"))
    sources = {s: source for node in reversed(inputs) for s, source in _held(node).items()}
    read: dict[sympy.Symbol, torch.fx.Node] = {}
    for call in graph.find_nodes(op="call_module"):
        part = getattr(split, call.target)
        if higher_order_ops(part):
            continue
        own = list(part.graph.find_nodes(op="placeholder"))
        held = {s for node in own for s in _held(node)}
        missing = sorted(_used(part) - held, key=str)
        for symbol in (s for s in missing if s in sources):
            if symbol not in read:
                read[symbol] = _read_symbol(graph, inputs[-1], *sources[symbol])
            # after the part's inputs (first, where it has none: `inserting_before(None)`)
            where = part.graph.inserting_after(own[-1]) if own else part.graph.inserting_before()
            with where:
                own.append(part.graph.placeholder(symbol.name))
            own[-1].meta["val"] = read[symbol].meta["val"]
            call.args = (*call.args, read[symbol])
        part.recompile()
    split.recompile()


def _held(node: torch.fx.Node) -> dict[sympy.Symbol, tuple]:
    """The size symbols a placeholder holds alone, each with where it is read: (node, None,
    None) for a SymInt input, (node, method, dim) for a tensor's size or stride."""
    found: dict[sympy.Symbol, tuple] = {}
    for method, d, size in _sizes(node.meta.get("val")):
        if size.node.expr.is_Symbol:
            found.setdefault(size.node.expr, (node, method, d))
    return found


def _used(part: torch.fx.GraphModule) -> set[sympy.Symbol]:
    """The size symbols in the values of `part`'s nodes."""
    found: set[sympy.Symbol] = set()
    for node in part.graph.nodes:
        vals = node.meta.get("val")
        for val in vals if isinstance(vals, list | tuple) else [vals]:
            for _, _, size in _sizes(val):
                found |= size.node.expr.free_symbols
    return found


def _sizes(val: object) -> list[tuple[str | None, int | None, torch.SymInt]]:
    """The symbolic sizes an example value holds, each with where it is read: (None, None, it)
    for a SymInt, (method, dim, size) for a tensor's sizes and strides."""
    if isinstance(val, torch.SymInt):
        return [(None, None, val)]
    if not isinstance(val, torch.Tensor):
        return []
    return [
        (method, d, size)
        for method in ("size", "stride")
        for d, size in enumerate(getattr(val, method)())
        if isinstance(size, torch.SymInt)
    ]


def _read_symbol(
    graph: torch.fx.Graph,
    after: torch.fx.Node,
    node: torch.fx.Node,
    method: str | None,
    d: int | None,
) -> torch.fx.Node:
    """A node of `graph` whose value is the symbol `node` holds (itself, or its size or stride
    along `d`), made after the inputs."""
    if method is None:
        return node
    target = {"size": torch.ops.aten.sym_size.int, "stride": torch.ops.aten.sym_stride.int}
    with graph.inserting_after(after):
        read = graph.call_function(target[method], (node, d))
    read.meta["val"] = getattr(node.meta["val"], method)(d)
    return read


def _compiled(gm: torch.fx.GraphModule, symbol: str, compile_part: CompilePart) -> torch.nn.Module:
    single = _return_a_tuple(gm)
    return _Compiled(compile_part(gm, symbol), single)


def _compile_subgraphs(part: torch.fx.GraphModule, symbol: str, compile_part: CompilePart) -> None:
    """Compile, in place, the subgraphs of `part`'s ops that call them with tensors."""
    for node in part.graph.nodes:
        if _is_higher_order(node) and node.target.name() in CALLS_SUBGRAPHS:
            for arg in node.args:
                graph = _subgraph(part, arg)
                if graph is not None:  # (not one compiled already, for another op)
                    name = f"{symbol}_{arg.target}"
                    setattr(part, arg.target, _compiled(graph, name, compile_part))


def _subgraph(part: torch.fx.GraphModule, arg: object) -> torch.fx.GraphModule | None:
    """The graph an argument of a higher-order op names, if it names one."""
    if not isinstance(arg, torch.fx.Node) or arg.op != "get_attr":
        return None
    graph = getattr(part, arg.target)
    return graph if isinstance(graph, torch.fx.GraphModule) else None


def _is_higher_order(node: torch.fx.Node) -> bool:
    return node.op == "call_function" and isinstance(node.target, torch._ops.HigherOrderOperator)


def _partition_of(gm: torch.fx.GraphModule) -> dict[torch.fx.Node, int]:
    """Each node's part: runs of ordinary ops numbered in order, each higher-order op a part of
    its own with the getitems of its results (a part's inputs are tensors, not a tuple)."""
    parts: dict[torch.fx.Node, int] = {}
    part = 0
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        source = node.args[0] if node.target is operator.getitem else None
        if isinstance(source, torch.fx.Node) and _is_higher_order(source):
            parts[node] = parts[source]
        elif _is_higher_order(node):
            parts[node], part = part + 1, part + 2
        else:
            parts[node] = part
    return parts


def _return_a_tuple(part: torch.fx.GraphModule) -> bool:
    """Make `part` return a tuple, as an ATen graph does; whether it returned one value."""
    (output,) = part.graph.find_nodes(op="output")
    single = not isinstance(output.args[0], tuple | list)
    if single:
        output.args = ((output.args[0],),)
        part.recompile()
    return single


class _Compiled(torch.nn.Module):
    """A compiled part where the split graph calls the part's module."""

    def __init__(self, code: Callable[[list], object], single: bool):
        super().__init__()
        self.code, self.single = code, single

    def forward(self, *args: object) -> object:
        outs = self.code(list(args))
        return outs[0] if self.single else tuple(outs)
