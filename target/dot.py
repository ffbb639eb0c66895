"""A scheduled graph as a Graphviz picture (DOT text): kernels as boxes, extern calls as grey
boxes, collectives (starts and waits) as orange boxes, graph inputs and the output as ellipses,
each buffer an edge from its writer to each reader, labelled with its name and size. Given the
graph again after fusion, each fused kernel is a box (a cluster) around the nodes it joined, each
combo kernel a dashed box around its nodes' kernels, and a buffer that fusion did away with is a
dashed edge.

Fused kernels are told by their symbols: fuse names the kernel that joins `@op0` and `@op1`
`@op0_op1`. Writing DOT text needs no library; `render` turns it into SVG or PNG with the
`graphviz` package, where Graphviz's `dot` program is installed."""

from __future__ import annotations

import json
import math
import shutil

from mind.dialects.collectives import KINDS
from mind.ir.core import Module, Operation, Value
from mind.ir.types import TensorType

#: how each kind of op is drawn (others: a dashed box)
_STYLE = {
    "scheduled.node": 'shape=box, style="rounded,filled", fillcolor="#dbe8f7"',
    "scheduled.extern": 'shape=box, style=filled, fillcolor="#e0e0e0"',
    "scheduled.output": "shape=ellipse",
    **dict.fromkeys(
        (f"scheduled.{kind}" for kind in KINDS), 'shape=box, style=filled, fillcolor="#f6dfb8"'
    ),
}
_OTHER = "shape=box, style=dashed"
_HEAD = [
    "digraph mind {",
    "  rankdir=TB;",
    '  node [fontname="monospace", fontsize=10];',
    '  edge [fontname="monospace", fontsize=9];',
]


def to_dot(before: Module, after: Module | None = None) -> str:
    """The DOT text of each graph of `before` (scheduled IR), one cluster per graph. `after`,
    the same graphs after fusion, boxes the nodes each fused kernel joined."""
    fused = {g.symbol: g for g in after.ops} if after is not None else {}
    lines = list(_HEAD)
    for i, graph in enumerate(before.ops):
        lines += _graph(graph, fused.get(graph.symbol), f"g{i}")
    return "\n".join([*lines, "}"]) + "\n"


def _graph(graph: Operation, after: Operation | None, prefix: str) -> list[str]:
    block = graph.body
    ids: dict[Value | Operation, str] = {a: f"{prefix}_in{k}" for k, a in enumerate(block.args)}
    ids.update({op: f"{prefix}_op{k}" for k, op in enumerate(block.ops)})
    lines = [f"  subgraph cluster_{prefix} {{", f"    label={_quote('@' + graph.symbol)};"]
    lines += [f"    {ids[a]} [shape=ellipse, label={_quote(_value(a))}];" for a in block.args]
    boxes: dict[str, list[str]] = {}
    groups, combos = _groups(after), _combos(after)
    for op in block.ops:
        line = f"{ids[op]} [{_STYLE.get(op.name, _OTHER)}, label={_quote(_label(op))}];"
        kernel = groups.get(op.symbol or "", "")
        boxes.setdefault(kernel or (op.symbol if op.symbol in combos else ""), []).append(line)
    lines += [f"    {line}" for line in boxes.pop("", [])]
    combined: dict[int | None, list[str]] = {}
    for k, (kernel, members) in enumerate(boxes.items()):
        box = members if kernel not in groups.values() else _box(f"{prefix}_k{k}", kernel, members)
        combined.setdefault(combos.get(kernel), []).extend(box)
    lines += [f"    {line}" for line in combined.pop(None, [])]
    for combo, members in combined.items():
        label = f"combo {combo}"
        lines += [f"    {line}" for line in _box(f"{prefix}_c{combo}", label, members, _COMBO)]
    kept = {v.name for op in after.body.ops for v in op.results} if after is not None else None
    for op in block.ops:
        for value in _reads(op, block):
            writer = value.owner if value.owner in ids else value
            gone = kept is not None and writer is not value and value.name not in kept
            style = ", style=dashed" if gone else ""
            label = _quote(f"%{value.name}\n{_bytes(value)}")
            lines.append(f"    {ids[writer]} -> {ids[op]} [label={label}{style}];")
    return [*lines, "  }"]


#: the frame of a fused kernel, and of a combo kernel around its nodes' kernels
_KERNEL, _COMBO = 'style=rounded; color="#3060a0";', 'style=dashed; color="#a03060";'


def _box(name: str, label: str, members: list[str], style: str = _KERNEL) -> list[str]:
    """A cluster around `members` (DOT lines), labelled `label` (a kernel's name is its symbol)."""
    title = label if label.startswith("combo") else "@" + label
    return [
        f"subgraph cluster_{name} {{",
        f"  label={_quote(title)};",
        f"  {style}",
        *(f"  {m}" for m in members),
        "}",
    ]


def _combos(after: Operation | None) -> dict[str, int]:
    """Each kernel of a combo (combo-kernels) -> its combo."""
    if after is None:
        return {}
    nodes = [op for op in after.body.ops if op.name == "scheduled.node"]
    return {op.symbol: op.combo for op in nodes if op.combo is not None}


def _groups(after: Operation | None) -> dict[str, str]:
    """Each node that fusion joined with others -> the symbol of its fused kernel."""
    if after is None:
        return {}
    kernels = [op.symbol for op in after.body.ops if op.name == "scheduled.node"]
    return {part: k for k in kernels if "_" in k for part in k.split("_")}


def _reads(op: Operation, block) -> list[Value]:
    """The graph values `op` uses, in its operands or in the ops of its body."""
    here = set(block.args) | {v for o in block.ops for v in o.results}
    used = [v for o in op.walk() for v in o.operands if v in here and v.owner is not op]
    return list(dict.fromkeys(used))


def _label(op: Operation) -> str:
    head = f"@{op.symbol}" if op.symbol else op.name.split(".", 1)[1]
    lines = [head]
    if op.name == "scheduled.node":
        xs, rs = op.sizes
        lines.append(f"{list(xs)} x {list(rs)}" if rs else str(list(xs)))
    origins = op.attrs.get("origins")
    if origins:
        lines.append(", ".join(origins))
    return "\n".join(lines)


def _value(value: Value) -> str:
    return f"%{value.name}\n{value.type}"


def _bytes(value: Value) -> str:
    """The size of a buffer: exact for static shapes (in B, KiB, MiB, GiB), else a formula."""
    t = value.type
    if not isinstance(t, TensorType):
        return str(t)
    size = math.prod(t.shape) * t.dtype.itemsize
    if not isinstance(size, int):
        return f"{size} B"
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:.3g} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def _quote(text: str) -> str:
    """A DOT string: JSON's escapes are DOT's (`\\n` a centered line break)."""
    return json.dumps(text, ensure_ascii=False)


def can_render() -> bool:
    """Whether `render` works here: the `graphviz` package and Graphviz's `dot` program."""
    try:
        import graphviz  # noqa: F401
    except ImportError:
        return False
    return shutil.which("dot") is not None


def render(dot: str, fmt: str) -> bytes:
    """`dot` drawn as `fmt` (svg, png) by Graphviz; see `can_render`."""
    import graphviz

    return graphviz.Source(dot).pipe(format=fmt)
