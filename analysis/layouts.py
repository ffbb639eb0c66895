"""The layout of a realized node that nothing fixes (no call or output needs it laid out so):
the order its reads step through memory, as Inductor's `ComputedBuffer.get_fill_order` picks it,
so that a node computed from channels-last buffers is channels-last and one computed from
contiguous buffers contiguous. A read not linear in the loops (a pooling window's floor) steps
memory by its mean step across each loop's range.

A node's reads are those of its body and of the unrealized nodes it inlines, through views, down
to buffers: each one's flat offset, as a function of the node's own loop variables, steps memory
by a stride per dim. The dims are ordered innermost first by how many reads step one more
slowly than the other (`pick_loop_order`), size-1 dims last, ties keeping the contiguous order.
"""

from __future__ import annotations

from fractions import Fraction
from functools import cmp_to_key

from mind.ir.core import Operation
from mind.ir.symbols import IntLike, as_int_like
from mind.ir.types import contiguous_strides

from .loops import element_reads, pvar, pvars, substitute

Strides = tuple[IntLike, ...]


def read_strides(node: Operation) -> Strides:
    """Strides for `node`'s result in the order its reads step memory (contiguous when it reads
    no buffer with static strides)."""
    shape = node.result.type.shape
    if not all(isinstance(n, int) for n in shape):
        return contiguous_strides(shape)
    reads = element_reads(node.result, pvars(0, len(shape)))
    found = [_steps(offset, shape) for _, offset in reads]
    steps = [s for s in found if s is not None]
    if not steps:
        return contiguous_strides(shape)
    return strides_in_order(shape, fill_order(steps, list(shape)))


def _steps(offset: IntLike, shape: tuple[int, ...]) -> list[Fraction] | None:
    """How far `offset` moves per step of each loop across its range, the others at 0: a linear
    offset's strides, a nonlinear one's mean step (a pooling window's `64*floor(p3/2)` moves 32
    a step, where the step from the origin, Inductor's stride hint, sees none). None where
    that depends on sizes only the call knows (symbolic strides)."""
    origin = {pvar(k): 0 for k in range(len(shape))}
    base = substitute(offset, origin)
    found = []
    for k, n in enumerate(shape):
        moved = as_int_like(substitute(offset, {**origin, pvar(k): max(n - 1, 1)}) - base)
        if not isinstance(moved, int):
            return None
        found.append(Fraction(moved, max(n - 1, 1)))
    return found


def fill_order(steps: list[list[int]], sizes: list[int]) -> list[int]:
    """The dims innermost first: a dim goes inside another when more reads step it by less
    (or not at the other), size-1 dims last, later dims first otherwise (Inductor's
    `pick_loop_order`)."""

    def compare(a: int, b: int) -> int:
        if sizes[a] == 1 or sizes[b] == 1:
            return (sizes[a] == 1) - (sizes[b] == 1)
        a_first = sum(sb == 0 or abs(sa) < abs(sb) for sa, sb in ((s[a], s[b]) for s in steps))
        b_first = sum(sa == 0 or abs(sb) < abs(sa) for sa, sb in ((s[a], s[b]) for s in steps))
        if a_first != b_first:
            return -1 if a_first > b_first else 1
        return b - a

    return sorted(reversed(range(len(sizes))), key=cmp_to_key(compare))


def strides_in_order(shape: tuple[IntLike, ...], order: list[int]) -> Strides:
    """Dense strides that lay out dims `order[0]` innermost, then `order[1]`, ..."""
    found: list[IntLike] = [0] * len(shape)
    running: IntLike = 1
    for dim in order:
        found[dim] = running
        running = running * shape[dim]
    return tuple(found)
