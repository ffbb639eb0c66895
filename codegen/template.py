"""The matmul template strategy: a node marked `template = "mm"` (passes/mm_templates.py) whose
one reduction sums a product `a * b` over k, `a` read along (m, k) and `b` along (k, n), as
Inductor's triton_mm template computes it. Each program owns a [BLOCK_M, BLOCK_N] tile of the
output (programs taken in groups of GROUP_M tile rows, so that neighbours share operand tiles in
L2; batch dims are grid axis 1), loops over k accumulating in f32 the tl.dot of a
[BLOCK_M, BLOCK_K] tile of `a` by a [BLOCK_K, BLOCK_N] tile of `b`, then runs the rest of the
node on the accumulator tile: the fused epilogue and its stores.

Each operand is its body ops translated on its tile, with the prologue that inlining put there
(a cast, a view's index); a last cast of an f16/bf16 operand to f32 is left out, so that tl.dot
multiplies the narrow values and accumulates in f32. Operand rows past m (columns past n) wrap
around (`% M`) rather than being masked, as Inductor's template does; the k tail is masked to 0.
A node of another shape goes to the other strategies, which compute the same sums.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy
from mind.analysis.deps import INDEXED
from mind.analysis.loops import pvar
from mind.analysis.patterns import closure, conjuncts, same_number
from mind.analysis.phases import Phases
from mind.dialects.scheduled import Node, Reduction
from mind.dialects.triton import For, Yield, dtype_of, shape_of
from mind.ir import dtypes as dt
from mind.ir.core import Block, Operation, Region, Value
from mind.ir.symbols import Mod, sym
from mind.ir.types import ScalarType

from .heuristics import LaunchConfig, cdiv, template_candidates, template_config, y_grid
from .kernel import KernelBuilder, Scope
from .plan import Options, Strategy
from .tiling import Group, Tiling, index_dtype, numel

BM, BN, BK, GROUP_M = (sym(n) for n in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M"))
NARROW = (dt.f16, dt.bf16)


@dataclass(frozen=True)
class Matmul:
    """A template node's parts: the reduction, its operands (as tl.dot takes them) and the ops
    that compute each, and the positions of the batch, m, n and k loops."""

    reduction: Reduction
    a: Value
    b: Value
    a_ops: list[Operation]
    b_ops: list[Operation]
    batch: int  # the number of batch dims: m is loop `batch`, n `batch + 1`, k `batch + 2`


def match(node: Node) -> Matmul | None:
    """The node as a matmul the template computes, or None."""
    xs, rs = node.sizes
    if node.template != "mm" or len(rs) != 1 or len(xs) < 2:
        return None
    if not all(isinstance(s, int) for s in (*xs, *rs)):
        return None
    phases = Phases(node)
    reductions = [op for op in node.body.ops if isinstance(op, Reduction)]
    if len(reductions) != 1 or reductions[0].reduction_type != "sum":
        return None
    (reduction,) = reductions
    product = phases.defs.get(reduction.value)
    if product is None or product.kind != "mul":
        return None
    nb = len(xs) - 2
    m, n, k = pvar(nb), pvar(nb + 1), pvar(nb + 2)
    batch = {pvar(i) for i in range(nb)}
    for a, b in ((product.a, product.b), (product.b, product.a)):
        a, b = _narrow(a, phases), _narrow(b, phases)
        a_ops, b_ops = _deps(a, phases), _deps(b, phases)
        if _uses(a_ops) <= batch | {m, k} and _uses(b_ops) <= batch | {k, n}:
            along_r = {op for op in node.body.ops if phases.has_r[op]}
            if along_r - {reduction} <= {product, *a_ops, *b_ops, *_casts(product, phases)}:
                return Matmul(reduction, a, b, a_ops, b_ops, nb)
    return None


def _narrow(value: Value, phases: Phases) -> Value:
    """The f16/bf16 value an operand casts to f32, or the operand."""
    op = phases.defs.get(value)
    if op is not None and op.kind == "cast" and dtype_of(op.x) in NARROW:
        return op.x
    return value


def _casts(product: Operation, phases: Phases) -> list[Operation]:
    return [
        op for v in product.operands if (op := phases.defs.get(v)) is not None and op.kind == "cast"
    ]


def _deps(value: Value, phases: Phases) -> list[Operation]:
    """The ops that compute `value`, in body order."""
    op = phases.defs.get(value)
    return closure(phases.ops, [op]) if op is not None else []


def _uses(ops: list[Operation]) -> set[sympy.Symbol]:
    """The loop variables the ops' indices use."""
    found: set[sympy.Symbol] = set()
    for op in ops:
        if isinstance(op, INDEXED):
            found |= {s for s in sympy.sympify(op.index).free_symbols if s.name.startswith("p")}
    return found


class MatmulTemplate(Strategy):
    name, prefix = "template", "tem"

    def applies(self, node: Node, options: Options) -> bool:
        return match(node) is not None

    def tiling(self, node: Node, options: Options) -> Tiling:
        xs, (k,) = node.sizes
        mm = match(node)
        itemsize = max(dtype_of(v).itemsize for v in (mm.a, mm.b))
        return matmul_tiling(node, template_config(*xs[-2:], k, itemsize))

    def candidates(self, node: Node, options: Options, tiling: Tiling) -> list[Tiling]:
        xs, (k,) = node.sizes
        return [matmul_tiling(node, c) for c in template_candidates(*xs[-2:], k)]

    def grid(self, tiling: Tiling) -> tuple:
        m, n, _, batch = _groups(tiling)
        blocks = tiling.config.blocks
        tiles = cdiv(m.numel, blocks["BLOCK_M"]) * cdiv(n.numel, blocks["BLOCK_N"])
        return (tiles, *y_grid(batch.numel if batch is not None else 1))

    def body(self, b: KernelBuilder, top: Scope) -> None:
        mm = match(b.node)
        m, n, k, batch = _groups(b.tiling)
        tiles = _program(b, top, m, n, batch)
        acc = _k_loop(b, top, mm, tiles, k)
        top.values[mm.reduction.result] = acc
        phases = b.phases
        for op in b.node.body.ops:
            if not phases.has_r[op] and not isinstance(op, Reduction):
                b.translate(top, op)


def matmul_tiling(node: Node, config: LaunchConfig) -> Tiling:
    """m, n and k tiles; batch dims one program each on grid axis 1. No group is launched by
    the builder: the template's body makes its program ids itself."""
    xs, (k,) = node.sizes
    nb = len(xs) - 2
    *batch, m, n = xs
    blocks = config.blocks
    groups = [
        Group("m", "BLOCK_M", (nb,), (m,), 0, 2, None, True),
        Group("n", "BLOCK_N", (nb + 1,), (n,), 1, 2, None, True),
        Group("k", "BLOCK_K", (nb + 2,), (k,), 1, 2, None, k % blocks["BLOCK_K"] != 0),
    ]
    if nb:
        groups.append(Group("b", "", tuple(range(nb)), tuple(batch), 0, 0, None, False))
    # no index spans m * n * k: the largest is an operand's or the result's element count
    count = numel(batch) * max(m * k, k * n, m * n)
    return Tiling(config, tuple(groups), index_dtype(node, count))


def _groups(tiling: Tiling) -> tuple[Group, Group, Group, Group | None]:
    by = {g.prefix: g for g in tiling.groups}
    return by["m"], by["n"], by["k"], by.get("b")


@dataclass(frozen=True)
class Tiles:
    """A program's rows and columns: for operand loads (wrapped around m and n) and for the
    epilogue (masked)."""

    a_rows: Value
    b_cols: Value


def _program(b: KernelBuilder, top: Scope, m: Group, n: Group, batch: Group | None) -> Tiles:
    """Program ids in GROUP_M-row groups of tiles; the epilogue's m and n vars with their masks,
    the operands' wrapped rows and columns; the batch vars."""
    idt = b.tiling.index_dtype
    pid = b.emit(top, "program_id", [0], idt, (), result="pid")
    grid_m, grid_n = (sympy.floor((g.numel + blk - 1) / blk) for g, blk in ((m, BM), (n, BN)))
    group = b.bind(top, sympy.floor(sym("pid") / (GROUP_M * grid_n)), [pid], (), "group_id")
    size = b.bind(
        top, sympy.Min(grid_m - GROUP_M * sym("group_id"), GROUP_M), [group], (), "group_size"
    )
    pid_m = b.bind(
        top,
        GROUP_M * sym("group_id") + Mod(sym("pid"), sym("group_size")),
        [pid, group, size],
        (),
        "pid_m",
    )
    pid_n = b.bind(top, sympy.floor(Mod(sym("pid"), GROUP_M * grid_n) / sym("group_size")), [pid, size], (), "pid_n")  # fmt: skip
    wrapped = []
    for g, first, axis in ((m, pid_m, 0), (n, pid_n, 1)):
        block = sym(g.block)
        shape = (block, 1) if axis == 0 else (1, block)
        ar = b.emit(top, "arange", [0, block], dt.i32, (block,))
        base = b.emit(top, "expand_dims", [ar, 1 - axis], dt.i32, shape, result=f"{g.prefix}base")
        start = block * sym(first.name) + sym(base.name)
        size_ = g.numel
        mod = start if size_ % b.tiling.config.blocks[g.block] == 0 else Mod(start, size_)
        wrapped.append(b.bind(top, mod, [first, base], shape, f"{g.prefix}wrapped"))
        index = b.bind(top, start, [first, base], shape, f"{g.prefix}index")
        b.value_groups[index] = frozenset([g])
        top.indices[f"{g.prefix}index"] = index
        top.indices[f"{g.prefix}mask"] = b.emit(
            top, "lt", [index, b.numels[g.prefix]], dt.b8, shape, result=f"{g.prefix}mask"
        )
        top.vars[b.subs[pvar(g.dims[0])].name] = index
    if batch is not None:
        b.group_index(top, batch, None, _batch_program(b, top, batch))
    return Tiles(*wrapped)


def _batch_program(b: KernelBuilder, top: Scope, batch: Group) -> Value:
    """The batch the program computes: one program per batch along y (`y_program`). The batch
    group has no mask, so where the batches fold, the programs past the last one compute it
    again: the same values to the same places."""
    program, pids = b.y_program(top, "b", batch.numel)
    if len(pids) == 1:
        return pids[0]
    return b.bind(top, sympy.Min(program, batch.numel - 1), pids, (), "bprogram")


def _k_loop(b: KernelBuilder, top: Scope, mm: Matmul, tiles: Tiles, k: Group) -> Value:
    """acc += dot(a tile, b tile) over k; returns the accumulator after the loop."""
    idt = b.tiling.index_dtype
    acc0 = b.full(top, 0.0, dt.f32, (BM, BN))
    ar = b.emit(top, "arange", [0, BK], dt.i32, (BK,))
    rows = b.emit(top, "expand_dims", [ar, 0], dt.i32, (1, BK), result="k_row")
    cols = b.emit(top, "expand_dims", [ar, 1], dt.i32, (BK, 1), result="k_col")
    block = Block([Value("k_offset", ScalarType(idt))])
    acc = block.add_arg(Value("acc", acc0.type))
    loop = For.build(
        "triton.for",
        range=(0, k.numel, BK),
        init=[acc0],
        results=[acc0.type],
        names=["acc_out"],
        regions=[Region(block)],
    )
    inner = top.child(block)
    k_var = b.subs[pvar(k.dims[0])].name
    sides = (
        (mm.a_ops, mm.a, rows, b.subs[pvar(mm.batch)].name, tiles.a_rows, (BM, BK)),
        (mm.b_ops, mm.b, cols, b.subs[pvar(mm.batch + 1)].name, tiles.b_cols, (BK, BN)),
    )
    operands = []
    for ops, value, k_base, var, tile, shape in sides:
        scope = inner.child(block)
        k_shape = shape_of(k_base)
        offset = sym("k_offset") + sym(k_base.name)
        index = b.bind(scope, offset, [block.args[0], k_base], k_shape, "k_index")
        if k.masked:
            b.value_groups[index] = frozenset([k])
            scope.indices["kmask"] = b.emit(scope, "lt", [index, b.numels["k"]], dt.b8, k_shape)
        scope.vars[k_var], scope.vars[var] = index, tile
        for op in ops:
            b.translate(scope, op)
        operands.append(_tile(b, scope, scope.values[value], shape, k.masked))
    left, right = operands
    if dtype_of(left) != dtype_of(right) or dtype_of(left) not in (*NARROW, dt.f32):
        left, right = (b.emit(inner, "cast", [v], dt.f32, shape_of(v)) for v in (left, right))
    attrs = {"input_precision": "ieee"} if dtype_of(left) == dt.f32 else {}
    product = b.emit(inner, "dot", [left, right], dt.f32, (BM, BN), attrs)
    block.append(
        Yield.build("triton.yield", values=[b.emit_op(inner, "add", [acc, product], dt.f32)])
    )
    top.block.append(loop)
    return loop.results[0]


def _tile(b: KernelBuilder, scope: Scope, value: Value, shape: tuple, masked: bool) -> Value:
    """An operand as a full tile of `shape`; past the k tail, zeros: the `other` of a load
    masked along k, where the operand is that load (or a cast of it), else a `where`."""
    if tuple(shape_of(value)) != shape:
        value = b.emit(scope, "broadcast_to", [value], dtype_of(value), shape)
    if not masked:
        return value
    kmask = scope.indices["kmask"]
    load = _load_masked_by(value, kmask)
    if load is not None and load.attrs.get("other") is None:
        load.set_attr("other", 0.0)
    if load is not None and same_number(load.attrs["other"], 0.0):
        return value
    zero = b.full(scope, 0.0, dtype_of(value), (1, 1))
    return b.emit_op(scope, "where", [kmask, value, zero], dtype_of(value))


def _load_masked_by(value: Value, mask: Value) -> Operation | None:
    """The load that `value` is, or casts, where `mask` is among what masks it."""
    op = value.owner
    while op is not None and op.kind == "cast":
        op = op.operands[0].owner
    if op is None or op.kind != "load" or op.attrs.get("mask") is None:
        return None
    return op if mask in conjuncts(op.attrs["mask"]) else None
