"""How one scheduled node maps onto a Triton kernel's program: which dims each block axis
covers (x, y, r0), the launch config, and the index width. The strategies pick among these.

- pointwise: 1-D over the merged x dims, unless accesses contiguous along an outer dim but not the
  innermost (a transpose) carry a good share of the bytes: then a 2-D tile [YBLOCK, XBLOCK] with
  the outer dims on y, so both kinds stay coalesced within the tile. Also 2-D, the innermost dim
  on x, where an access takes apart (Mod, floor: a flattening view) both the innermost dim (a
  tile wide at least) and an outer one, sizes static, as an unfold's windows gathered as padded
  rows do: a 1-D kernel would divide every element's index, a tile each row's and column's once.
- reductions: x on axis 0, r0 on axis 1. Reads contiguous along r make an inner reduction (small
  XBLOCK, wide R0_BLOCK); reads contiguous along x only (a column sum) an outer one (wide XBLOCK).
- i64 indices once any extent reaches 2**31 or is symbolic, i32 otherwise.
- symbolic sizes: configs are chosen for their size hint; numels stay expressions (kernel
  arguments at run time).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from math import prod

import sympy
from mind.analysis.coalescing import is_inner, moves_along, unit_stride
from mind.analysis.deps import index_ops
from mind.analysis.loops import pvar, pvars
from mind.dialects.loops import Load
from mind.dialects.scheduled import Node, Store
from mind.ir import dtypes as dt
from mind.ir.core import Operation
from mind.ir.dtypes import DType
from mind.ir.symbols import IntLike, as_int_like, size_hint, sym
from mind.ir.types import TensorType

from .heuristics import LaunchConfig, pointwise_config


@dataclass(frozen=True)
class Group:
    """The dims (positions of p vars) that one block axis covers."""

    prefix: str  # "x", "y", "r0_": names xindex, xmask, xnumel
    block: str  # the constexpr block size: XBLOCK
    dims: tuple[int, ...]
    sizes: tuple[IntLike, ...]
    axis: int  # the block axis it varies along
    rank: int  # the kernel's block rank
    pid_axis: int | None  # grid axis; None for the reduction group
    masked: bool

    @property
    def numel(self) -> IntLike:
        return numel(self.sizes)

    @property
    def shape(self) -> tuple:
        return tuple(sym(self.block) if i == self.axis else 1 for i in range(self.rank))


@dataclass(frozen=True)
class Tiling:
    """How a kernel's program covers its node: block axes, launch config, index width."""

    config: LaunchConfig
    groups: tuple[Group, ...]  # grid groups first (y, x), then r0_
    index_dtype: DType

    @property
    def rgroup(self) -> Group | None:
        return next((g for g in self.groups if g.prefix == "r0_"), None)

    @property
    def full_shape(self) -> tuple:
        rank = self.groups[0].rank
        return tuple(next(sym(g.block) for g in self.groups if g.axis == i) for i in range(rank))


#: body symbols that are not sizes: p vars (iteration dims) and i vars (indirect loads)
_LOOP_VAR = re.compile(r"[pi]\d+$")


def numel(sizes) -> IntLike:
    return as_int_like(prod(sizes, start=sympy.Integer(1)))


def size_symbols(node: Operation) -> list[sympy.Symbol]:
    """The size symbols a node's sizes and body expressions use, by name: kernel arguments."""
    xs, rs = node.sizes
    exprs = [*xs, *rs] + [op.index for op in index_ops(node.body.ops)]
    found = set().union(*(sympy.sympify(e).free_symbols for e in exprs))
    return sorted((s for s in found if not _LOOP_VAR.match(s.name)), key=str)


#: a 2-D tile pays for its index math and layout change only when the accesses it coalesces carry
#: at least this share of the bytes a kernel touches: a small table read across the tile, such as
#: a rotary embedding's angles (64 KiB beside 8 MiB of q and k rows), is served from cache either
#: way, and tiling for it ran Llama's rotary kernel 1.6x slower than a 1-D one (88 against 55 us a
#: step, H200)
TILE_SHARE = 1 / 8


def _tile_split(node: Operation, nx: int) -> int | None:
    """The first x dim of the tile's x group, when accesses contiguous along an outer dim but not
    along the innermost one carry TILE_SHARE of the node's bytes (`_footprint`); None when a 1-D
    kernel reads the bulk coalesced."""
    if nx < 2:
        return None
    sizes = [size_hint(s) for s in node.sizes[0]]
    total, outer, dims = 0, 0, []
    for op in node.body.ops:
        if not isinstance(op, Load | Store):
            continue
        expr, nbytes = sympy.sympify(op.index), _footprint(op, sizes)
        total += nbytes
        across = [d for d in range(nx - 1) if unit_stride(expr, d)]
        if across and not unit_stride(expr, nx - 1):
            outer, dims = outer + nbytes, dims + across
    return max(dims) + 1 if dims and outer >= TILE_SHARE * total else None


#: the fewest elements along the innermost dim for a tile that takes apart (`_apart_split`): a
#: full tile's width, so that each row of the tile stores that many contiguous elements
APART_MIN = 64


def _apart_split(node: Operation, nx: int) -> int | None:
    """The innermost x dim, for a tile of it on x and the outer dims on y, when an access takes
    apart both it and an outer dim (its index has Mod or floor terms of each) and it holds at
    least APART_MIN elements (by its size hint); None otherwise."""
    xs = node.sizes[0]
    if nx < 2 or size_hint(xs[-1]) < APART_MIN:
        return None
    inner, outer = pvar(nx - 1), set(pvars(0, nx - 1))
    for op in node.body.ops:
        if isinstance(op, Load | Store):
            terms = sympy.sympify(op.index).atoms(sympy.Mod, sympy.floor)
            apart = set().union(*(t.free_symbols for t in terms))
            if inner in apart and apart & outer:
                return nx - 1
    return None


def _footprint(op: Load | Store, sizes: list[int]) -> int:
    """The bytes an access can touch: its element size times the extents of the loop dims its
    index moves along (`moves_along`: a gathered row moves with its ids; a broadcast dim re-reads
    the same bytes)."""
    moved = moves_along(op)
    tensor = op.source if isinstance(op, Load) else op.buffer
    extents = [size for d, size in enumerate(sizes) if pvar(d) in moved]
    return tensor.type.dtype.itemsize * prod(extents, start=1)


def index_dtype(node: Node, count: IntLike) -> DType:
    """i64 once the iteration count or an output's extent reaches 2**31 or is symbolic."""
    extents = [count]
    for value in node.results:
        if isinstance(value.type, TensorType) and value.type.strides is not None:
            extents.append(
                1 + sum((s - 1) * st for s, st in zip(value.type.shape, value.type.strides))
            )
    extents = [as_int_like(e) for e in extents]
    if not all(isinstance(e, int) for e in extents):
        return dt.i64
    return dt.i64 if max(extents) >= 2**31 else dt.i32


def pointwise_tiling(node: Node, config: LaunchConfig | None = None) -> Tiling:
    """1-D over the x dims, or a 2-D tile when an access is contiguous along an outer dim; with
    the heuristic's config, or `config` (of the same rank) when given."""
    (xs, _), x_dims = node.sizes, tuple(range(len(node.sizes[0])))
    idt = index_dtype(node, numel(xs))
    split = _tile_split(node, len(xs))
    if split is None:
        split = _apart_split(node, len(xs))
    if split is not None and (config is None or "YBLOCK" in config.blocks):
        ydims, xdims = x_dims[:split], x_dims[split:]
        ynumel = size_hint(numel(xs[:split]))
        tile = config or pointwise_config(size_hint(numel(xs[split:])), ynumel)
        return Tiling(
            tile,
            (
                Group("y", "YBLOCK", ydims, tuple(xs[:split]), 0, 2, 1, True),
                Group("x", "XBLOCK", xdims, tuple(xs[split:]), 1, 2, 0, True),
            ),
            idt,
        )
    if config is None or "YBLOCK" in config.blocks:
        config = pointwise_config(size_hint(numel(xs)))
    return Tiling(config, (Group("x", "XBLOCK", x_dims, tuple(xs), 0, 1, 0, True),), idt)


#: picks a reduction's launch config from (x numel, r numel, inner), numels at their size hints
ReductionConfig = Callable[[int, int, bool], LaunchConfig]


def reduction_tiling(node: Node, choose: ReductionConfig) -> Tiling:
    """x on block axis 0 (grid axis 0), r0 on block axis 1, with the config `choose` picks."""
    xs, rs = (list(s) for s in node.sizes)
    nx, nr = len(xs), len(rs)
    rnumel = numel(rs)
    config = choose(size_hint(numel(xs)), size_hint(rnumel), is_inner(node))
    rmasked = not isinstance(rnumel, int) or rnumel == 0 or rnumel % config.blocks["R0_BLOCK"] != 0
    return Tiling(
        config,
        (
            Group("x", "XBLOCK", tuple(range(nx)), tuple(xs), 0, 2, 0, True),
            Group("r0_", "R0_BLOCK", tuple(range(nx, nx + nr)), tuple(rs), 1, 2, None, rmasked),
        ),
        index_dtype(node, numel([*xs, *rs])),
    )


def row_size(node: Node) -> int:
    """The elements a reduction reduces per x position, at its size hint."""
    return size_hint(numel(node.sizes[1]))


def row_itemsize(node: Node) -> int:
    """The widest element a reduction's body loads along r (4 when it loads none)."""
    return max(_r_load_sizes(node), default=4)


def row_load_words(node: Node) -> int:
    """The 32-bit words a reduction's body loads along r per element of its tile: the registers
    its loads take (an int64 or a float64 two)."""
    return sum(max(1, size // 4) for size in _r_load_sizes(node))


def _r_load_sizes(node: Node) -> list[int]:
    rs = _r_vars(node)
    loaded = (op for op in node.body.ops if isinstance(op, Load))
    return [
        op.result.type.dtype.itemsize for op in loaded if sympy.sympify(op.index).free_symbols & rs
    ]


def _r_vars(node: Node) -> set[sympy.Symbol]:
    """The loop variables of a node's r dims (after its x dims)."""
    nx, nr = (len(s) for s in node.sizes)
    return set(pvars(nx, nr))
