"""Cooperation between the programs of one launch (a cooperative kernel's group)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def group_barrier(sem, count: tl.constexpr):
    """Wait until `count` programs have come to the i32 semaphore `sem`, which holds the round's
    arrivals in its low 31 bits and a round bit on top: the round's last arrival zeroes the
    arrivals and flips the bit, which the others wait to see flip. It is left ready for the next
    round, so it is zeroed once, not per launch. Arrival releases this program's stores and
    acquires the others' (acq_rel), the wait acquires. The programs must all be resident at once
    (a cooperative kernel's launcher sizes its grid so)."""
    tl.debug_barrier()
    arrived = tl.atomic_add(sem, 1, sem="acq_rel")
    if (arrived & 0x7FFFFFFF) == count - 1:
        tl.atomic_add(sem, 2**31 - count, sem="release")  # -count, and the top bit flips
    else:
        now = tl.atomic_add(sem, 0, sem="acquire")
        while (now ^ arrived) >= 0:  # the top bit as it was when this program arrived
            now = tl.atomic_add(sem, 0, sem="acquire")
    tl.debug_barrier()
