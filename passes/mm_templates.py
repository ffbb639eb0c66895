"""mm-templates: compute a matmul with ATen (cuBLAS) or with a Triton template mind generates.

`lower` makes mm, addmm and bmm `loops.extern` calls to ATen. This pass turns the ones it selects
into loops nodes that a Triton matmul template computes: a reduction over k of `a[m, k] *
b[k, n]` (batched: `a[b, m, k] * b[b, k, n]`), accumulated in f32 and marked
`template = "mm"`, then pointwise nodes for what addmm adds (`beta * bias + alpha * mm`) and the
cast to the result dtype. From there the usual passes build the template's prologue and
epilogue, visible in the dumps: `realize` and `inline` fold what the template reads an operand
through into its loads (views, and unrealized nodes that load one tensor once and cast or scale
it: `read_through`), `fuse` fuses pointwise consumers (bias, activation, residual add, cast) into
the template node, and code generation (codegen/template.py) tiles it for tl.dot with the fused
epilogue after the k-loop. Where a node that loads more computes the value that chain starts
from, that node is realized first: a template reloads each operand tile many times.

`select` chooses: `aten` (the default: cuBLAS usually wins against an untuned template),
`template` (every eligible matmul), or `autotune` (max-autotune, or `mind-opt` on a dump: a
benchmark of the template against ATen decides, mind/tuning.py, once per problem and cached;
where nothing can be timed, as with no GPU, ATen). Eligible: static sizes, m and n above 1,
inputs and result of one dtype among f32, f16 and bf16.

Whatever `select` says, `gathers` (on by default) makes a template of a matmul whose `a` operand
is gathered, with overlap, from a tensor at least GATHER_MIN times smaller than itself: the
windows of a stem convolution as a matmul (passes/aten_rules/convolution.py). cuBLAS needs the
operand written out and read back; the template gathers each tile in its k-loop, from a source
that stays in L2. On an H100, ResNet-18's bf16 stem (32 images of 224×224) wrote 122 MB of
windows in 115 µs and multiplied them in 72 µs.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from mind.analysis.loops import consumers, outer_tensors, producer
from mind.dialects.loops import Load, LoopsCall, Pointwise, View, is_realized
from mind.dialects.scheduled import ALONG_R, Node
from mind.ir import dtypes as dt
from mind.ir.core import Block, Operation, Value
from mind.ir.diagnostics import MindError
from mind.ir.types import TensorType, contiguous_strides

from .lower import LowerCtx
from .manager import GraphPass, option
from .realize import flatten_buffer_loads

#: the ATen matmuls a template can compute: symbol -> (positions of a and b, of the bias)
MATMULS = {
    "aten.mm.default": ((0, 1), None),
    "aten.bmm.default": ((0, 1), None),
    "aten.addmm.default": ((1, 2), 0),
}
FLOATS = (dt.f32, dt.f16, dt.bf16)
#: what a template's prologue does to an operand element besides loading it: casts and cheap
#: arithmetic (a scale, a shift), not math the k-loop would redo for every tile of n
PROLOGUE_KINDS = frozenset(
    "load cast constant neg add sub mul relu yield index lt le gt ge eq ne logical_and where".split()
)  # (an index, its comparisons and a `where`: the masks of a padded gather)
#: how many times more elements than its source a gathered operand holds, at the least, for
#: `gathers` to make the matmul a template
GATHER_MIN = 2
SELECT = ("aten", "template", "autotune")


@dataclass(frozen=True)
class MmTemplates(GraphPass, name="mm-templates", input="loops"):
    """Select Triton matmul templates (fused prologues and epilogues) or ATen for mm, addmm, bmm.

    `select` is aten (default), template or autotune (a benchmark decides, else aten);
    `gathers` makes a template of a matmul over a gathered operand whatever `select` says."""

    select: str = option(
        "aten", "aten (cuBLAS), template (every eligible matmul), or autotune (a benchmark decides)"
    )
    gathers: bool = option(
        True, "a template for every matmul whose left operand is gathered, with overlap, from a tensor"
        f" at least {GATHER_MIN} times smaller (whatever select says)"
    )  # fmt: skip

    def run_graph(self, graph: Operation) -> None:
        if self.select not in SELECT:
            raise MindError(f"mm-templates: select must be one of {', '.join(SELECT)}")
        chosen = [
            op
            for op in graph.body.ops
            if isinstance(op, LoopsCall) and eligible(op) and self.chooses(op, graph.body)
        ]
        if not chosen:
            return
        reserved = {v.name for op in graph.walk() for v in op.results}
        reserved |= {a.name for a in graph.body.args}
        for op in chosen:
            rewrite(graph.body, op, reserved)
        flatten_buffer_loads(graph.body)  # loads from the operands realized here

    def chooses(self, call: LoopsCall, block: Block) -> bool:
        if self.gathers and gathered(call, block):
            return True
        if self.select != "autotune":
            return self.select == "template"
        from mind.tuning import template_wins  # it runs kernels: torch, loaded only for this

        return bool(template_wins(call))


def eligible(op: Operation) -> bool:
    """Whether a template can compute the call: a matmul of static sizes (m, n > 1) whose
    tensors share one float dtype."""
    if op.name != "loops.extern" or op.symbol not in MATMULS or len(op.results) != 1:
        return False
    (ia, ib), ibias = MATMULS[op.symbol]
    tensors = [op.values[i] for i in (ia, ib, ibias) if i is not None]
    if not all(isinstance(v, Value) and isinstance(v.type, TensorType) for v in tensors):
        return False
    out = op.result.type
    types = [v.type for v in tensors] + [out]
    if {t.dtype for t in types} != {out.dtype} or out.dtype not in FLOATS:
        return False
    if not all(isinstance(s, int) for t in types for s in t.shape):
        return False
    m, n = out.shape[-2:]
    scales = (op.attrs.get(k, 1) for k in ("alpha", "beta"))
    return m > 1 and n > 1 and all(isinstance(s, int | float) for s in scales)


def gathered(call: LoopsCall, block: Block) -> bool:
    """Whether the matmul's `a` operand is gathered, for it alone, from a tensor at least
    GATHER_MIN times smaller than itself, through the nodes and views a template reads it
    through. (Where another op reads a node of the gather, as a training graph's output saved
    for the backward, the gather is written out anyway.)

    Not where k outnumbers the result's elements: a template runs one program per output tile,
    each looping over all of k, too few programs for a GPU; cuBLAS splits k. And not for a
    gathered `b` (a weight's gradient over windows, `grads.t() @ windows`): tried as a template
    split along k (not kept), with its operands in bf16, it took 410 µs on an H100 for
    ResNet-18's stem, against 191 µs for the gather and cuBLAS's split-k. A gathered `a`
    (windows as rows, the forward) took 102 µs against 228 for the gather, cuBLAS and the
    batch norm."""
    (ia, _), _ = MATMULS[call.symbol]
    operand = call.values[ia]
    if operand.type.shape[-1] > math.prod(call.result.type.shape[-2:]):
        return False
    chain, source = read_through(operand)
    nodes = {op for op in chain if isinstance(op, Pointwise)}
    if source is None or not nodes:
        return False
    if any(not consumers(op.result, block) <= nodes | {call} for op in nodes):
        return False
    return math.prod(operand.type.shape) >= GATHER_MIN * math.prod(source.type.shape)


def rewrite(block: Block, call: LoopsCall, reserved: set[str]) -> None:
    """Replace the call by its template reduction and pointwise epilogue nodes."""
    (ia, ib), ibias = MATMULS[call.symbol]
    a, b = call.values[ia], call.values[ib]
    for operand in (a, b):
        _realize_source(operand)
    out = call.result.type
    acc = dt.upcast(out.dtype)
    ctx = LowerCtx(Block(), reserved)
    ctx.outs, ctx.origin, ctx.base = [out], call.symbol.split(".")[1], call.result.name
    k = a.type.shape[-1]

    def product(body, idx, ridx):
        *bs, m, n = idx
        left = body.cast(body.load(a, [*bs, m, ridx[0]]), acc)
        return body.mul(left, body.cast(body.load(b, [*bs, ridx[0], n]), acc))

    result = ctx.reduction(acc, out.shape, [k], "sum", product)
    reduction = result.owner
    reduction.set_attr("template", "mm")
    value = result
    if ibias is not None or acc != out.dtype:
        value = ctx.pointwise(out.dtype, out.shape, _epilogue(call, result, ibias, acc))
    value.owner.result.type = out  # the call's buffer: consumers read it at flat offsets
    for op in list(ctx.block.ops):
        ctx.block.remove(op)
        block.insert_before(call, op)
    call.result.replace_all_uses_with(value)
    call.erase()


def _epilogue(call: LoopsCall, mm: Value, ibias: int | None, acc: dt.DType):
    """addmm's `beta * bias + alpha * mm`, in the accumulator dtype."""
    alpha, beta = call.attrs.get("alpha", 1), call.attrs.get("beta", 1)

    def body(b, idx):
        value = b.load(mm, idx)
        if ibias is None:
            return value
        if alpha != 1:
            value = b.mul(value, b.constant(alpha, acc))
        bias = b.cast(b.load(call.values[ibias], idx), acc)
        if beta != 1:
            bias = b.mul(bias, b.constant(beta, acc))
        return b.add(bias, value) if beta != 0 else value

    return body


def read_through(operand: Value) -> tuple[list[Operation], Value | None]:
    """What a template reads `operand` through, from the operand back: the views, and the
    unrealized pointwise nodes that load one tensor once and cast or scale it (`_prologue_loads`),
    which `inline` folds into the template's loads; and the value they start from (None: they
    load nothing), which the template reads as a buffer. mind/tuning.py's probe times the
    template through the same."""
    ops: list[Operation] = []
    value = operand
    while True:
        node = producer(value)
        if isinstance(node, View):
            ops.append(node)
            value = node.source
        elif type(node) is Pointwise and not is_realized(node):
            loads = _prologue_loads(node)
            if loads is None:
                return ops, value
            ops.append(node)
            if not loads:
                return ops, None
            value = loads[0]
        else:
            return ops, value


def _prologue_loads(node: Pointwise) -> list[Value] | None:
    """What a template reading through the node loads (at most one tensor, once), or None where
    it cannot read through: the body loads more, or does more than PROLOGUE_KINDS lists, or it
    rounds a value computed for it to a narrower dtype (a gradient computed in f32, rounded to
    bf16): that value is realized either way, and realized narrow it takes half the bytes to
    write and for the template to reread."""
    ops = node.body.ops
    loads = [op.source for op in ops if isinstance(op, Load)]
    kinds_ok = all(op.kind in PROLOGUE_KINDS for op in ops)
    if not kinds_ok or len(loads) > 1 or outer_tensors(node) != loads:
        return None
    if loads and loads[0].type.dtype.itemsize > node.result.type.dtype.itemsize:
        _, source = read_through(loads[0])
        if source is not None and _computed(source):
            return None
    return loads


def _computed(value: Value) -> bool:
    """Whether an unrealized pointwise node computes the value (`_realize_source` realizes it)."""
    node = producer(value)
    return isinstance(node, Pointwise) and not is_realized(node)


def _realize_source(operand: Value) -> None:
    """The value a template reads the operand through from (`read_through`), when an unrealized
    node computes it, is realized (given a flexible contiguous layout): the template reloads
    each operand tile many times, so its prologue loads each element once and does little to
    it."""
    _, source = read_through(operand)
    if source is None or not _computed(source):
        return
    node = producer(source)
    t = node.result.type
    node.result.type = dataclasses.replace(t, strides=contiguous_strides(t.shape))
    node.layout = "flexible"


def template_fusable(a: Node, b: Node, sizes: tuple) -> bool:
    """What fuse may put in one node with a template node: work without reductions, scans or
    sorts (its prologue, `read_through`, was inlined already; a pointwise consumer is an
    epilogue, computed on the output tile), over the template's own loops (its m, n tiling
    stays)."""
    template = a if a.template is not None else b if b.template is not None else None
    if template is None:
        return True
    other = b if template is a else a
    if other.template is not None or any(isinstance(op, ALONG_R) for op in other.body.ops):
        return False
    return tuple(map(list, sizes)) == tuple(map(list, template.sizes))
