"""Combo kernels (Inductor's foreach and combo kernels): the nodes of one combo, pointwise and
independent of each other (passes/combo_kernels.py), as one kernel that one launch runs.

Each node's kernel is built as the pointwise strategy builds it, with one launch config for all
(the largest node's). The combo kernel takes the union of their arguments; its programs are the
nodes' programs one after another, and each node's body runs in a `triton.program_range` over
its own programs, where `xpid` counts from 0 as in the node's kernel alone:

    pid = tl.program_id(0)
    if pid < 12:
        xpid = pid
        ...
    if (pid >= 12) & (pid < 13):
        xpid = pid - 12
        ...
"""

from __future__ import annotations

from collections.abc import Mapping

from mind.dialects.scheduled import Node
from mind.dialects.triton import ProgramRange
from mind.ir import dtypes as dt
from mind.ir.core import Block, Operation, Region, Value
from mind.ir.symbols import size_hint
from mind.ir.types import TensorType

from .heuristics import cdiv, pointwise_config
from .kernel import KernelBuilder
from .plan import KernelPlan, Launch, kernel_name
from .pointwise import Pointwise
from .tiling import numel, pointwise_tiling

#: how many origins name a combo kernel (all its nodes' would make names of hundreds of words)
NAMED_ORIGINS = 8


def plan_combo(nodes: list[Node], buffers: Mapping[Value, Value], index: int) -> KernelPlan:
    """One kernel and one launch for `nodes`, its parts in their order."""
    config = pointwise_config(max(size_hint(numel(n.sizes[0])) for n in nodes))
    block = config.blocks["XBLOCK"]
    parts, origins = [], []
    for node in nodes:
        tiling = pointwise_tiling(node, config)
        builder = KernelBuilder(node, tiling, Pointwise.name, node.symbol, buffers)
        parts.append(
            (builder.build(Pointwise()), builder.launch_args, cdiv(tiling.groups[0].numel, block))
        )
        origins += node.origins or []
    args, launch_args = _merged_signature(parts)
    pid = Operation(
        "triton.program_id", [0], result_types=[TensorType(dt.i32, ())], result_names=["pid"]
    )
    body = Block(list(args.values()), [pid])
    start = 0
    for kernel, given, blocks in parts:
        body.append(_part(kernel, [args[a] for a in given], pid.result, start, start + blocks))
        start += blocks
    name = kernel_name("combo", sorted(set(origins))[:NAMED_ORIGINS], index)
    attrs = {
        "kind": "combo",
        "constexprs": dict(config.blocks),
        "num_warps": config.num_warps,
        "num_stages": config.num_stages,
        "origins": sorted(set(origins)),
    }
    kernel = Operation(
        "triton.kernel", [], attrs, symbol=name, regions=[Region(body)], loc=nodes[0].loc
    )
    return KernelPlan([kernel], [Launch(name, launch_args, (start, 1, 1))])


def _merged_signature(parts: list) -> tuple[dict, list]:
    """The combo kernel's arguments, one per distinct launch argument (a buffer two nodes read
    is passed once), named by kind in order (`in_ptr0`, `out_ptr0`, ...), and its launch's."""
    args: dict = {}
    counts: dict[str, int] = {}
    for kernel, given, _ in parts:
        for param, value in zip(kernel.body.args, given):
            if value not in args:
                kind = param.name.rstrip("0123456789")
                counts[kind] = counts.get(kind, -1) + 1
                args[value] = Value(f"{kind}{counts[kind]}", param.type)
    return args, list(args)


def _part(kernel: Operation, args: list[Value], pid: Value, start: int, stop: int) -> Operation:
    """`kernel`'s body moved into a program range over programs start..stop-1, its arguments
    replaced by the combo's, its program id by the range's offset."""
    ops = list(kernel.body.ops)
    own_pid = next(op for op in ops if op.name == "triton.program_id")
    offset = Value(own_pid.result.name, pid.type)
    part = ProgramRange.build(
        "triton.program_range", pid=pid, start=start, stop=stop, regions=[Region(Block([offset]))]
    )
    for old, new in zip(kernel.body.args, args):
        old.replace_all_uses_with(new)
    own_pid.result.replace_all_uses_with(offset)
    for op in ops:  # (the node's kernel is dropped)
        if op is not own_pid:
            part.body.append(op)
    return part
