"""mm-epilogues: an addmm whose one reader applies tanh-GELU to it, and nothing else, becomes
one ATen call, `aten._addmm_activation`, which on a GPU applies the activation in cuBLASLt's
epilogue: the matmul's result is never written and read again for the activation.

On an H200, in bf16, GPT-2's 2048 x 768 x 3072 MLP projection with its tanh-GELU took 22.9 µs
as one call, against 21.0 µs for the addmm and 8.7 µs for a separate GELU kernel. Inductor has
no such rewrite: its default mode runs the activation as a Triton kernel after cuBLAS. ReLU
(`use_gelu=False`) would gain as much (21.6 against 21.0 + 6.9 µs), but cuBLASLt's ReLU epilogue
gives 0 for a NaN where torch.relu gives NaN, so a ReLU keeps its kernel: a NaN must not vanish.

Which activation the reader applies is read off its body (analysis/activations.py), so every
spelling of it matches. The rewrite keeps what the graph computes, except one rounding: the
activation reads the product in f32 before it is rounded to the result dtype, once, as a fused
kernel would. It applies where:

- the addmm adds a 1-D bias of the result's dtype to the plain product (beta = alpha = 1), in
  f16 or bf16: cuBLASLt's epilogue path (others fall back to an addmm and the activation inside
  ATen, no faster; f32 was not measured);
- nothing else reads its result: a training forward that saves it for the backward keeps it;
- the reader reads each element where its own result puts it (through views that regroup or
  permute dims: `x.view(-1, k) @ w` and back, a transpose), so its result is the call's memory,
  reinterpreted.

It runs after `inline`, where an activation and its views are one node.
"""

from __future__ import annotations

from dataclasses import dataclass

from mind.analysis.activations import activation_of
from mind.analysis.deps import equal, product
from mind.analysis.layouts import strides_in_order
from mind.analysis.loops import (
    flat_offset,
    pvars,
    simplify_index,
    simplify_with_ranges,
    strides_of,
)
from mind.dialects.common import Reinterpret
from mind.dialects.loops import Load, LoopsCall, Pointwise
from mind.ir import dtypes as dt
from mind.ir.core import Block, Operation
from mind.ir.types import TensorType, contiguous_strides

from .manager import GraphPass

#: the activations `_addmm_activation` applies (analysis/activations.py): name -> its `use_gelu`
USE_GELU = {"gelu_tanh": True}
HALF = (dt.f16, dt.bf16)


@dataclass(frozen=True)
class MmEpilogues(GraphPass, name="mm-epilogues", input="loops"):
    """Fold a tanh-GELU that only reads an addmm into the call (aten._addmm_activation)."""

    def run_graph(self, graph: Operation) -> None:
        for op in list(graph.body.ops):
            if isinstance(op, LoopsCall) and op.symbol == "aten.addmm.default":
                reader = _sole_pointwise_reader(op, graph.body)
                found = activation_of(reader) if reader is not None and _eligible(op) else None
                if found is not None and _reads_in_place(reader, found[1]):
                    _fold(graph, op, reader, USE_GELU[found[0]])


def _eligible(call: LoopsCall) -> bool:
    """A half-precision addmm of a 1-D bias of its dtype, unscaled."""
    bias, out = call.values[0], call.result.type
    if out.dtype not in HALF or any(call.attrs.get(k, 1) != 1 for k in ("alpha", "beta")):
        return False
    return (
        isinstance(bias.type, TensorType) and bias.type.rank == 1 and bias.type.dtype == out.dtype
    )


def _sole_pointwise_reader(call: LoopsCall, block: Block) -> Pointwise | None:
    """The pointwise node whose body reads the call's result, if nothing else reads it."""
    readers = {user.ancestor_in(block) for user in call.result.users}
    reader = readers.pop() if len(readers) == 1 else None
    return reader if type(reader) is Pointwise else None


def _reads_in_place(node: Pointwise, load: Load) -> bool:
    """Whether `node`, dense and of the call's dtype and size, reads the call's result at its
    own memory offset: the element at offset i of its result is f(the call's at offset i)."""
    out, src = node.result.type, load.source.type
    if out.strides is None or not _dense(out):
        return False
    if out.dtype != src.dtype or tuple(strides_of(load.source)) != contiguous_strides(src.shape):
        return False
    if not equal(product(list(out.shape)), product(list(src.shape))):
        return False
    p = pvars(0, len(out.shape))
    apart = simplify_index(flat_offset(load.source, load.index) - flat_offset(node.result, p))
    return simplify_with_ranges(apart, dict(zip(p, out.shape))) == 0


def _dense(t: TensorType) -> bool:
    """Strides that lay the elements one after another, in some order of the dims (symbolic
    strides: only in order)."""
    if tuple(t.strides) == contiguous_strides(t.shape):
        return True
    if not all(isinstance(s, int) for s in t.strides):
        return False
    dense = strides_in_order(t.shape, sorted(range(len(t.shape)), key=t.strides.__getitem__))
    return all(n == 1 or s == d for n, s, d in zip(t.shape, t.strides, dense))


def _fold(graph: Operation, call: LoopsCall, node: Pointwise, use_gelu: bool) -> None:
    call.symbol = "aten._addmm_activation.default"
    call.set_attr("use_gelu", use_gelu)
    result = call.result
    if node.result.type != result.type:
        view = Reinterpret.build(
            "loops.reinterpret",
            buffer=result,
            offset=0,
            results=[node.result.type],
            names=[f"{node.result.name}_reinterpret"],
            loc=node.loc,
        )
        result = graph.body.insert_after(call, view).result
    node.result.replace_all_uses_with(result)
    node.erase()
    if result is not call.result:  # a reinterpret of it reinterprets the call's result
        for user in list(result.users):
            if isinstance(user, Reinterpret):
                user.replace_uses(result, call.result)
        if not result.users:
            result.owner.erase()
