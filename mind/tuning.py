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

from mind.dialects.common import Graph
from mind.dialects.loops import LoopsCall, LoopsOutput
from mind.dialects.torch_types import to_torch, to_torch_device
from mind.ir.core import Block, Module, Region, Value
from mind.ir.types import TensorType, contiguous_strides
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
    inputs = [_random(v) for v in graph.body.args]
    op = reduce(getattr, call.symbol.split("."), torch.ops)
    kwargs = {k: v for k, v in call.attrs.items() if k not in ("input_strides", "origins")}

    def template() -> None:
        program.call(list(inputs))

    def aten() -> None:
        op(*inputs, **kwargs)

    times = {run.__name__: timer(run) for run in (template, aten)}
    winner = min(times, key=times.__getitem__)
    problem = (
        f"{call.symbol}({', '.join(str(v.type) for v in call.values if isinstance(v, Value))})"
    )
    remember_tuning(key, interpret, {"winner": winner, "ms": times, "problem": problem})
    return winner == "template"


def probe(call: LoopsCall) -> Graph:
    """A graph of the call alone, on inputs typed as its arguments, laid out as the call takes
    them: an argument computed in the graph has no layout before `realize` (a training forward's
    activation, a transposed weight), and the call's `input_strides` say the one it gets."""
    block = Block()
    placed = iter(call.input_strides or ())
    args = {}
    for i, v in enumerate(call.values):
        t = v.type
        strides = tuple(next(placed, None) or ()) if isinstance(t, TensorType) else ()
        if isinstance(t, TensorType) and t.strides is None:
            t = dataclasses.replace(t, strides=strides or contiguous_strides(t.shape))
        args[v] = block.add_arg(Value(f"arg{i}_1", t))
    values = [args.get(v, v) for v in call.values]
    op = call.clone({}, call.name)
    op.values = values
    block.append(op)
    block.append(LoopsOutput.build("loops.output", values=[op.result]))
    return Graph.build("loops.graph", regions=[Region(block)], symbol="mm_probe")


def _random(value: Value) -> torch.Tensor:
    t = value.type
    out = torch.empty_strided(
        t.shape, t.strides, dtype=to_torch(t.dtype), device=to_torch_device(t.device)
    )
    return out.normal_()
