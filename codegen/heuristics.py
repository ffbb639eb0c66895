"""Launch configurations for generated kernels: block sizes, warps and stages from the sizes
alone, the way Inductor's triton_heuristics pick the first config (mind does not autotune).
Symbolic sizes choose with a size hint (passes.deps.SIZE_HINT per symbol), as Inductor does.

- pointwise: XBLOCK up to 1024, a warp per 256 elements, at least 4 warps past 128 elements;
  2-D tiles up to 64 x 64.
- persistent reduction: the whole row in registers (R0_BLOCK = next power of 2 of the row);
  inner rows take XBLOCK so a program holds about 256 elements (the seed's [4, 128]: XBLOCK=1),
  outer ones (contiguous along x) take the widest XBLOCK keeping the tile under 4096.
- looped reduction: inner XBLOCK=1 x R0_BLOCK up to 2048; outer XBLOCK=32 x R0_BLOCK=64, so
  every row of the tile reads 32 contiguous elements and a wide matrix still gives many programs.
- warps: a warp per 128 elements of the tile, 2 to 8 (Inductor's `_num_warps`).
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy
from mind.ir.symbols import IntLike, as_int_like

#: rows up to this many elements reduce in registers (Inductor's persistent-reduction limit)
PERSISTENT_MAX = 1024
#: the widest R0_BLOCK of a looped reduction
MAX_R_BLOCK = 2048


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


def pointwise_config(xnumel: int, ynumel: int | None = None) -> LaunchConfig:
    if ynumel is None:
        blocks = {"XBLOCK": min(1024, next_power_of_2(xnumel))}
    else:
        blocks = {
            "YBLOCK": min(64, next_power_of_2(ynumel)),
            "XBLOCK": min(64, next_power_of_2(xnumel)),
        }
    elements = 1
    for b in blocks.values():
        elements *= b
    warps = _num_warps(elements // 256, 1)
    return LaunchConfig(blocks, max(warps, 4) if elements >= 128 else warps)


def _reduction(xblock: int, rblock: int) -> LaunchConfig:
    warps = _num_warps(xblock * rblock // 128, 2)
    return LaunchConfig({"XBLOCK": xblock, "R0_BLOCK": rblock}, warps)


def persistent_config(xnumel: int, rnumel: int, inner: bool) -> LaunchConfig:
    rblock = next_power_of_2(rnumel)
    budget = 256 if inner else 4096
    fits = [x for x in (1, 8, 32, 128) if x * rblock <= budget and x <= next_power_of_2(xnumel)]
    return _reduction(max(fits, default=1), rblock)


def looped_config(xnumel: int, rnumel: int, inner: bool, max_r_block: int) -> LaunchConfig:
    if inner:
        return _reduction(1, min(max_r_block, next_power_of_2(rnumel)))
    # 32 contiguous columns (a 128-byte line of f32) and 64 rows in flight per program
    return _reduction(min(32, next_power_of_2(xnumel)), min(64, max_r_block))


def grid(config: LaunchConfig, numels: dict[str, IntLike]) -> tuple:
    """x blocks on grid axis 0, y blocks on axis 1 (the kernel's program_id axes); expressions
    over the size symbols when the numels are symbolic."""
    x = cdiv(numels["XBLOCK"], config.blocks["XBLOCK"])
    y = cdiv(numels["YBLOCK"], config.blocks["YBLOCK"]) if "YBLOCK" in config.blocks else 1
    return (x, y, 1)
