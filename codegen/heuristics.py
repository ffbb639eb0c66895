"""Launch configurations for generated kernels: block sizes, warps and stages from the sizes
alone, the way Inductor's triton_heuristics pick the first config (max-autotune's candidates,
below, are timed against it).
Symbolic sizes choose with a size hint (mind.ir.symbols.size_hint: the size each symbol had where the
graph was traced, its `hints`, else SIZE_HINT), as Inductor does.

- pointwise: XBLOCK up to 1024, a warp per 256 elements, at least 4 warps past 128 elements;
  2-D tiles up to 64 x 64, made smaller (YBLOCK first, down to 8, then XBLOCK) while they would
  launch fewer than MIN_PROGRAMS programs, down to 256 elements.
- persistent reduction: the whole row in registers (R0_BLOCK = next power of 2 of the row);
  inner rows take XBLOCK so a program holds about 256 elements (the seed's [4, 128]: XBLOCK=1),
  outer ones (contiguous along x) the widest XBLOCK up to 32 keeping the tile at most 512, a
  warp per 256 elements.
- looped reduction: inner XBLOCK=1 x R0_BLOCK up to 2048; outer XBLOCK=32 x R0_BLOCK=64 with 4
  warps, so every row of the tile reads 32 contiguous elements and a wide matrix still gives
  many programs. On an H200, tuning bf16 Llama and GPT-2 training steps, 32 x 16 with 8 warps
  (the old rule) lost to 32-64 x 64 with 4 warps by 1.04-1.75x on the parts of split weight and
  bias gradients (rows of 128), where 16 rows a step left a program too little to load; a body
  loading many words along r takes fewer rows (OUTER_LOAD_WORDS), down to 8. Few
  short columns (FEW_COLUMNS, SHORT_COLUMN) take a column or a few a program instead, each
  column in one step.
- warps: a warp per 128 elements of the tile, 2 to 8; a looped inner row of at least LONG_ROW
  elements or LONG_ROW_BYTES up to 16 (as Inductor's `_num_warps` allows looped reductions), one
  of at least VERY_LONG_ROW elements (or 64 KiB of 32-bit ones) 32; `max-warps` caps them all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import sympy
from mind.ir.symbols import IntLike, as_int_like

#: inner rows up to this many elements reduce in registers, by the widest element the row loads
#: (Inductor's limit is 1024 for all). On an H200, rows of 16-bit loads run faster in registers
#: up to 4096 elements (softmax and layer norm of 2048 and 4096: 1.1-1.7x), while 32-bit rows of
#: 2048 and 4096 run 2-4% faster looped.
PERSISTENT_MAX = {1: 4096, 2: 4096, 4: 1024, 8: 1024}


def persistent_max(itemsize: int) -> int:
    return PERSISTENT_MAX.get(itemsize, 1024)


#: the same limit for a reduction along strided memory (a column sum): a row held whole leaves
#: few columns per program, so its loads are short segments far apart (Inductor's limit too)
OUTER_PERSISTENT_MAX = 64
#: a looped column sum of at most FEW_COLUMNS columns of at most SHORT_COLUMN rows (a split
#: reduction's final node, as a batch norm's per-channel statistics) takes a column or a few per
#: program: at 32 columns a program, 64 columns of 784 rows ran as 2 programs of 13 dependent
#: steps, 20 us on an H200; a column a program takes 5.5 us (ResNet training's batch norms)
FEW_COLUMNS, SHORT_COLUMN = 512, 1024
#: a looped column tile holds about this many 32-bit words of its loads along r in each thread
#: (an int64 counts 2): every loaded element takes a register, and the loads of a step are in
#: flight together. 32 columns by 64 rows on 4 warps, 16 elements a thread, won tuning on split
#: weight gradients (a few loads each); 256 words or more cannot all be in registers. ResNet
#: training's stem in fp32 on an H100: its batch norm backward fused with the max pool's backward
#: loads 26 words along r (the pool's four windows, each an index and four gradients), and at 16
#: elements a thread took 331 us, where Inductor's two kernels for the same work took 281
OUTER_LOAD_WORDS = 128
#: the widest R0_BLOCK of a looped reduction
MAX_R_BLOCK = 2048
#: the most warps a reduction's program gets, and the most a looped row shorter than LONG_ROW gets
MAX_WARPS, SHORT_ROW_WARPS = 32, 8
#: a looped inner row this long, or of LONG_ROW_BYTES of its widest load, takes up to
#: LONG_ROW_WARPS: on an H200 16 warps run softmax, sums and variances of 8192 to 65536 elements
#: 2-21% faster than 8. On an H100, tuning f32 rows of 4096 (16 KiB) found 16 warps 2.4% faster
#: than 8 on a layer norm (0.1809 against 0.1852 ms, Inductor's 0.1807) and 0.6% on a softmax,
#: and 8 warps 1-2% faster on a bf16 RMS norm's rows of 4096 (8 KiB); an earlier H200 measurement
#: had found the f32 layer norm 4% slower at 16, on a kernel written otherwise (two loops)
LONG_ROW, LONG_ROW_BYTES, LONG_ROW_WARPS = 8192, 16 * 1024, 16
#: a looped inner row of VERY_LONG_ROW elements, or a row of 32-bit elements of VERY_LONG_ROW_BYTES,
#: takes VERY_LONG_ROW_WARPS (a program of 1024 threads): on an H200 a softmax of 1024 rows of
#: 65536 f32, written as mind writes it (R0_BLOCK 2048, the second loop walking backward), took
#: 186 us at 32 warps against 197-201 us at 16; on an H100, with rows of 16384 f32, a softmax took
#: 183 us against 212 (Inductor's 185), a layer norm 182 against 210. Fewer programs then share
#: an SM, so more of each row is still in L2 when the loop after the first reads it again. A bf16
#: softmax of rows of 32768 ran 26% slower at 32 warps (its layer norm 12% faster): 16-bit rows
#: keep 16 warps up to VERY_LONG_ROW.
VERY_LONG_ROW, VERY_LONG_ROW_BYTES, VERY_LONG_ROW_WARPS = 65536, 64 * 1024, 32


@dataclass(frozen=True)
class LaunchConfig:
    blocks: dict[str, int]
    num_warps: int
    num_stages: int = 1


def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def cdiv(a: IntLike, b: int) -> IntLike:
    """Ceil division; over symbols, the floor expression the wrapper evaluates at run time."""
    if isinstance(a, int):
        return -(-a // b)
    return as_int_like(sympy.floor((a + b - 1) / b))


def _num_warps(elements_per_warp: int, lo: int, hi: int = 8) -> int:
    return next_power_of_2(min(max(elements_per_warp, lo), hi))


#: a 2-D pointwise tile shrinks while its grid has fewer programs than this (about two per SM of
#: an H100 or H200): tuning on an H200 found 64 x 64 tiles 1.2-5.3x slower than tiles of 256-1024
#: elements on 2-D kernels (permuted copies) launching 4-128 programs, and 1.02-1.05x at 384-512
MIN_PROGRAMS = 256


def pointwise_config(xnumel: int, ynumel: int | None = None) -> LaunchConfig:
    if ynumel is None:
        blocks = {"XBLOCK": min(1024, next_power_of_2(xnumel))}
    else:
        blocks = _tile_2d(xnumel, ynumel)
    elements = 1
    for b in blocks.values():
        elements *= b
    warps = _num_warps(elements // 256, 1)
    return LaunchConfig(blocks, max(warps, 4) if elements >= 128 else warps)


def _tile_2d(xnumel: int, ynumel: int) -> dict[str, int]:
    """Up to 64 x 64, halving YBLOCK (to 8) and then XBLOCK, the axis the kernel keeps wide,
    while fewer than MIN_PROGRAMS programs would run and the tile holds more than 256 elements."""
    y, x = min(64, next_power_of_2(ynumel)), min(64, next_power_of_2(xnumel))
    while cdiv(ynumel, y) * cdiv(xnumel, x) < MIN_PROGRAMS and x * y > 256:
        if y > 8:
            y //= 2
        else:
            x //= 2
    return {"YBLOCK": y, "XBLOCK": x}


def _reduction(xblock: int, rblock: int, max_warps: int = SHORT_ROW_WARPS) -> LaunchConfig:
    warps = _num_warps(xblock * rblock // 128, 2, max_warps)
    return LaunchConfig({"XBLOCK": xblock, "R0_BLOCK": rblock}, warps)


def persistent_config(xnumel: int, rnumel: int, inner: bool) -> LaunchConfig:
    rblock = next_power_of_2(rnumel)
    if inner and 256 <= rblock <= 1024 and xnumel // 8 >= 128:
        # one warp a program, 1024 elements (of 2 or 4 rows): its reductions are warp shuffles,
        # no shared memory and no barrier (Inductor's CUDA config for such rows). A row of 1024
        # takes 4 warps: tuning on an H200 found one warp 1.04-1.30x slower on the bf16 norm and
        # norm-backward rows of Llama and GPT-2 training (several loads a row), never faster
        if rblock == 1024:
            return LaunchConfig({"XBLOCK": 1, "R0_BLOCK": rblock}, 4)
        return LaunchConfig({"XBLOCK": 1024 // rblock, "R0_BLOCK": rblock}, 1)
    if inner:
        fits = [x for x in (1, 8, 32, 128) if x * rblock <= 256 and x <= next_power_of_2(xnumel)]
        return _reduction(max(fits, default=1), rblock)
    # columns: tiles of at most 512 elements (32 columns), a warp per 256, so that few columns
    # still make many programs: tuning's winners over 4096-element tiles on H200 split-reduction
    # finals of 768-8192 columns (1.2-1.3x). Wider tiles lose where many columns are indexed
    # through a reshape (Llama's sum over a group of heads: 512 x 4 took 20 us, 32 x 4 11 us)
    fits = [x for x in (1, 8, 16, 32) if x * rblock <= 512 and x <= next_power_of_2(xnumel)]
    xblock = max(fits, default=1)
    return LaunchConfig(
        {"XBLOCK": xblock, "R0_BLOCK": rblock}, _num_warps(xblock * rblock // 256, 1)
    )


def looped_config(
    xnumel: int,
    rnumel: int,
    inner: bool,
    max_r_block: int,
    max_warps: int = MAX_WARPS,
    itemsize: int = 4,
    outer_rows: int = 64,
) -> LaunchConfig:
    if inner:
        rblock = min(max_r_block, next_power_of_2(rnumel))
        if rnumel >= VERY_LONG_ROW or (itemsize >= 4 and rnumel * itemsize >= VERY_LONG_ROW_BYTES):
            return LaunchConfig(
                {"XBLOCK": 1, "R0_BLOCK": rblock}, min(max_warps, VERY_LONG_ROW_WARPS)
            )
        long = rnumel >= LONG_ROW or rnumel * itemsize >= LONG_ROW_BYTES
        warps = LONG_ROW_WARPS if long else SHORT_ROW_WARPS
        return _reduction(1, rblock, min(max_warps, warps))
    if xnumel <= FEW_COLUMNS and rnumel <= SHORT_COLUMN:
        # a program or two at 32 columns would walk its rows one short step after another:
        # Inductor's OUTER_TINY config, each program a column or a few, their rows in one step
        rblock = min(max_r_block, next_power_of_2(rnumel))
        return _reduction(2 * (256 // rblock) if rblock <= 256 else 1, rblock, max_warps)
    rblock = min(outer_rows, max_r_block, next_power_of_2(rnumel))
    blocks = {"XBLOCK": min(32, next_power_of_2(xnumel)), "R0_BLOCK": rblock}
    return LaunchConfig(blocks, min(max_warps, 4))


def outer_r_block(load_words: int, budget: int = OUTER_LOAD_WORDS) -> int:
    """A looped column tile's rows: 64 (16 elements a thread, at 32 columns and 4 warps) for up
    to `budget` / 16 words loaded along r, halved as the loads double, down to 8 (2 elements a
    thread)."""
    per_thread = 1 << max(0, (budget // max(1, load_words)).bit_length() - 1)
    return 4 * min(16, max(2, per_thread))


def template_config(m: int, n: int, k: int, itemsize: int) -> LaunchConfig:
    """A matmul template's tiles: up to 128 x 128 (16 at least, tl.dot's smallest), k tiles of
    32 f32 or 64 f16/bf16 elements, 8 warps for a full 128 x 128 tile, and the stages a Hopper
    GPU's shared memory holds for them; GROUP_M = 8 as Inductor's."""
    bm, bn = (min(128, max(16, next_power_of_2(s))) for s in (m, n))
    bk = min(64 if itemsize <= 2 else 32, max(16, next_power_of_2(k)))
    blocks = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}
    return LaunchConfig(blocks, 8 if bm * bn >= 128 * 128 else 4, 4 if itemsize <= 2 else 3)


# -- autotuning's candidates: Inductor's lists (triton_heuristics, mm_configs) and their kin,
# -- fitted to the sizes (codegen/autotune.py drops the heuristic's own and duplicates)
def pointwise_candidates(xnumel: int, ynumel: int | None = None) -> list[LaunchConfig]:
    if ynumel is not None:
        tiles = [(32, 32), (64, 64), (256, 16), (16, 256), (8, 128), (128, 8)]
        return [
            _tile(
                {
                    "YBLOCK": min(y, next_power_of_2(ynumel)),
                    "XBLOCK": min(x, next_power_of_2(xnumel)),
                },
                w,
            )
            for y, x in tiles
            for w in (4, 8)
        ]
    blocks = [b for b in (256, 512, 1024, 2048, 4096) if b <= max(256, next_power_of_2(xnumel))]
    return [_tile({"XBLOCK": b}, w) for b in blocks for w in (2, 4, 8) if w * 32 <= b]


def _tile(blocks: dict[str, int], warps: int) -> LaunchConfig:
    return LaunchConfig(blocks, min(warps, max(1, math.prod(blocks.values()) // 32)))


def persistent_candidates(xnumel: int, rnumel: int) -> list[LaunchConfig]:
    rblock = next_power_of_2(rnumel)
    xblocks = [x for x in (1, 2, 4, 8, 16, 32, 64, 128) if x * rblock <= 8192]
    xblocks = [x for x in xblocks if x <= next_power_of_2(xnumel)] or [1]
    return [
        LaunchConfig({"XBLOCK": x, "R0_BLOCK": rblock}, w)
        for x in xblocks
        for warps in [_num_warps(x * rblock // 128, 1, 16)]
        for w in sorted({max(1, warps // 2), warps, min(16, warps * 2)})
    ]


def looped_candidates(xnumel: int, rnumel: int, inner: bool) -> list[LaunchConfig]:
    r = next_power_of_2(rnumel)
    if inner:
        shapes = [(1, b) for b in (512, 1024, 2048, 4096)] + [(2, 1024), (4, 512), (8, 512)]
    else:
        shapes = [(32, 64), (64, 64), (32, 32), (16, 32), (64, 16), (128, 8), (8, 512), (64, 4)]
        shapes += [(32, 16), (32, 8)]
        shapes += [(64, 8), (1, 1024), (2, 512), (4, 256), (8, 128)]
    # a long row may take a program of 1024 threads (VERY_LONG_ROW's rule; tuning finds where)
    warps = ((4, 8, 16, 32) if rnumel >= LONG_ROW else (4, 8, 16)) if inner else (4, 8)
    return [
        LaunchConfig({"XBLOCK": min(x, next_power_of_2(xnumel)), "R0_BLOCK": min(b, r)}, w)
        for x, b in shapes
        for w in warps
    ]


#: Inductor's mm_configs: (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps)
MM_CONFIGS = (
    (32, 32, 16, 1, 2), (32, 32, 128, 2, 4), (32, 64, 32, 5, 8), (64, 32, 32, 5, 8),
    (64, 32, 128, 5, 4), (64, 64, 16, 2, 4), (64, 64, 32, 2, 4), (64, 64, 64, 3, 8),
    (64, 64, 128, 5, 4), (64, 128, 32, 3, 4), (64, 128, 32, 4, 8), (64, 128, 64, 3, 4),
    (64, 128, 128, 4, 4), (128, 64, 32, 3, 4), (128, 64, 32, 4, 8), (128, 128, 32, 2, 8),
    (128, 128, 32, 3, 4), (128, 128, 64, 3, 4), (128, 128, 64, 5, 8), (128, 128, 128, 4, 8),
    (128, 256, 64, 4, 8),
)  # fmt: skip


def template_candidates(m: int, n: int, k: int) -> list[LaunchConfig]:
    fit = [max(16, next_power_of_2(s)) for s in (m, n, k)]
    return [
        LaunchConfig(
            {
                "BLOCK_M": min(bm, fit[0]),
                "BLOCK_N": min(bn, fit[1]),
                "BLOCK_K": min(bk, fit[2]),
                "GROUP_M": 8,
            },
            warps,
            stages,
        )
        for bm, bn, bk, stages, warps in MM_CONFIGS
    ]


#: the most programs along grid axes 1 and 2 (CUDA's limit; axis 0 holds 2**31 - 1)
GRID_YZ_MAX = 65535


def y_folds(y_blocks: IntLike) -> bool:
    """Whether a tile's y blocks fold over grid axes 1 and 2: when more than axis 1 holds, or
    symbolic (a count the size hint keeps below the limit may pass it at run time)."""
    return not (isinstance(y_blocks, int) and y_blocks <= GRID_YZ_MAX)


def y_grid(y_blocks: IntLike) -> tuple[IntLike, IntLike]:
    """Grid axes 1 and 2 for `y_blocks` programs: axis 1 alone, or where they fold (`y_folds`)
    axis 1 up to its limit and axis 2 for the rest; the kernel's y program is then
    program_id(1) + GRID_YZ_MAX * program_id(2), as Inductor's for a y grid past the limit."""
    if not y_folds(y_blocks):
        return (y_blocks, 1)
    return (as_int_like(sympy.Min(y_blocks, GRID_YZ_MAX)), cdiv(y_blocks, GRID_YZ_MAX))


def grid(config: LaunchConfig, numels: dict[str, IntLike]) -> tuple:
    """x blocks on grid axis 0, y blocks on axes 1 and 2 (`y_grid`); expressions over the size
    symbols when the numels are symbolic."""
    x = cdiv(numels["XBLOCK"], config.blocks["XBLOCK"])
    if "YBLOCK" not in config.blocks:
        return (x, 1, 1)
    return (x, *y_grid(cdiv(numels["YBLOCK"], config.blocks["YBLOCK"])))
