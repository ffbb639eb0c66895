"""Template or ATen, by benchmark (mode="max-autotune"): `mm-templates{select=autotune}` asks,
for each matmul, whether mind's Triton template beats ATen's kernel (cuBLAS). This answers as
Inductor's select_algorithm does: the matmul alone is compiled through the template (its configs
tuned at load, runtime/autotune.py) and timed against the ATen op on random inputs of the
call's sizes, strides and dtypes. The answer is recorded in the tuning cache under the probe's
generated source and the device, so a later compile of the same problem runs nothing. Where
nothing can be timed (no GPU), it cannot tell, and mm-templates keeps ATen.
"""

from __future__ import annotations

import dataclasses
import hashlib
from functools import reduce

import torch
from torch.utils._python_dispatch import _disable_current_modes

from mind.analysis.loops import base_of, producer
from mind.dialects.common import Graph
from mind.dialects.loops import LoopsCall, LoopsOutput, Pointwise, View, is_realized
from mind.dialects.torch_types import to_torch, to_torch_device
from mind.ir.core import Block, Module, Operation, Region, Value
from mind.ir.types import TensorType, contiguous_strides
from mind.passes.mm_templates import MATMULS, cheap_operand
from mind.runtime import at_once, load
from mind.runtime.autotune import timer_for
from mind.runtime.cache import recall_tuning, remember_tuning

#: the probe's pipeline: the template, its configs tuned
PROBE = (
    "mm-templates{select=template},realize,inline,schedule,fuse,merge-loops,"
    "to-triton{autotune=true}"
)


def install() -> None:
    """Make this benchmark decide `mm-templates{select=autotune}`."""
    from mind.passes.mm_templates import set_benchmark

    set_benchmark(template_wins)


def template_wins(call: LoopsCall) -> bool | None:
    """Whether the template computes `call` faster than ATen on its device (None: no timer).
    It runs real tensors while AOTAutograd traces the graph: outside its dispatch modes."""
    with _disable_current_modes():
        return _template_wins(call)


def _template_wins(call: LoopsCall) -> bool | None:
    device = call.result.type.device
    timer = timer_for(to_torch_device(device)) if device is not None else None
    if timer is None:
        return None
    from mind.passes import run_pipeline
    from mind.target.triton import emit

    graph = probe(call)
    source = emit(run_pipeline(Module([graph]), PROBE))
    interpret = device.type != "cuda"
    key = hashlib.sha256(f"mm-templates\n{source}".encode()).hexdigest()
    record = recall_tuning(key, interpret)
    if record is not None and record.get("winner") in ("template", "aten"):
        return record["winner"] == "template"
    with at_once():  # it runs now, inside the backend's overlapped compile
        program = load(source, "mm_probe", interpret=interpret)
    inputs = [_random(v.type) for v in graph.body.args]
    arguments = [_random(_typed(v, call)) for v in call.values]
    op = reduce(getattr, call.symbol.split("."), torch.ops)
    kwargs = {k: v for k, v in call.attrs.items() if k not in ("input_strides", "origins")}

    def template() -> None:
        program.call(list(inputs))

    def aten() -> None:
        op(*arguments, **kwargs)

    times = {run.__name__: timer(run) for run in (template, aten)}
    winner = min(times, key=times.__getitem__)
    problem = (
        f"{call.symbol}({', '.join(str(v.type) for v in call.values if isinstance(v, Value))})"
    )
    remember_tuning(key, interpret, {"winner": winner, "ms": times, "problem": problem})
    return winner == "template"


def probe(call: LoopsCall) -> Graph:
    """A graph of the call and the prologue a template would read its operands through: the
    views and unrealized pointwise nodes between them and buffers (`_prologue`), which `realize`
    and `inline` fold into the template's loads. Timing the matmul alone on contiguous operands
    misjudges a template that reads them permuted and cast: BERT's attention scores, a bf16
    [b, s, h, d] tensor read as f32 [b*h, d, s], ran 1.5x slower than the probe of contiguous
    f32 operands, which beat cuBLAS. What the prologue reads are the probe's inputs, laid out
    (`_typed`) as in the graph."""
    (ia, ib), _ = MATMULS[call.symbol]
    ops: set[Operation] = set()
    inputs: dict[Value, None] = {}  # ordered
    for i, v in enumerate(call.values):
        if i in (ia, ib) and not _realized_for_template(v):
            _prologue(v, ops, inputs)
        else:
            inputs[v] = None
    block, vmap = Block(), {}
    for i, v in enumerate(inputs):
        vmap[v] = block.add_arg(Value(f"arg{i}_1", _typed(v, call)))
    for op in call.parent.ops if ops else ():
        if op in ops:
            block.append(op.clone(vmap))
    block.append(call.clone(vmap))
    block.append(LoopsOutput.build("loops.output", values=[vmap[call.result]]))
    return Graph.build("loops.graph", regions=[Region(block)], symbol="mm_probe")


def _realized_for_template(operand: Value) -> bool:
    """Whether mm-templates realizes the operand's producer before the template reads it."""
    node = producer(base_of(operand))
    return isinstance(node, Pointwise) and not is_realized(node) and not cheap_operand(node)


def _prologue(value: Value, ops: set[Operation], inputs: dict[Value, None]) -> None:
    """Collect into `ops` the views and unrealized pointwise nodes of floats that compute
    `value`, and into `inputs` the values they read from outside them."""
    node = producer(value)
    if node in ops or value in inputs:
        return
    if isinstance(node, View):
        ops.add(node)
        _prologue(node.source, ops, inputs)
        return
    outer = _outer_values(node) if type(node) is Pointwise and not is_realized(node) else None
    # what the prologue reads gets random normal floats: a node reading other dtypes is an input
    if outer is None or not all(v.type.dtype.is_floating_point for v in outer):
        inputs[value] = None
        return
    ops.add(node)
    for v in outer:
        _prologue(v, ops, inputs)


def _outer_values(node: Operation) -> list[Value]:
    """The tensors a node's body reads from outside it."""
    inner = {r for op in node.walk() for r in op.results}
    inner |= {a for region in node.regions for a in region.block.args}
    found = (v for op in node.walk() for v in op.operands if v not in inner)
    return list(dict.fromkeys(v for v in found if isinstance(v.type, TensorType)))


def _typed(value: Value, call: LoopsCall) -> TensorType:
    """A probe input's type: its layout in the graph; a call's argument without one (computed
    in the graph, not yet realized) laid out as the call takes it (`input_strides`), or
    contiguous."""
    t = value.type
    if t.strides is not None:
        return t
    tensors = [v for v in call.values if isinstance(v, Value) and isinstance(v.type, TensorType)]
    placed = dict(zip(tensors, call.input_strides or ()))
    strides = tuple(placed.get(value) or ()) or contiguous_strides(t.shape)
    return dataclasses.replace(t, strides=strides)


def _random(t: TensorType) -> torch.Tensor:
    out = torch.empty_strided(
        t.shape, t.strides, dtype=to_torch(t.dtype), device=to_torch_device(t.device)
    )
    return out.normal_()
