"""Reductions along an axis (kept, size 1), scans and sorts along an axis (the axis kept): the
combine functions `tl.reduce` and `tl.associative_scan` take, argmax/argmin with indices, and a
stable bitonic sort that moves positions along."""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.standard import _log2  # a constexpr log2, as Inductor's sort uses it

from .elementwise import maximum, minimum
from .math import log1p


@triton.jit
def _prod_combine(a, b):
    return a * b


@triton.jit
def prod(x, axis):
    return tl.reduce(x, axis, _prod_combine, keep_dims=True)


@triton.jit
def maximum_with_index(value, index, new_value, new_index):
    """Elementwise best of two (value, index) pairs: the larger value, the smaller index on ties
    and NaN first, as torch.argmax."""
    pick = (new_value > value) | ((new_value == value) & (new_index < index))
    if value.dtype.is_floating():
        pick |= (new_value != new_value) & ((value == value) | (new_index < index))
        pick &= ~((value != value) & (new_value == new_value))
    return tl.where(pick, new_value, value), tl.where(pick, new_index, index)


@triton.jit
def minimum_with_index(value, index, new_value, new_index):
    pick = (new_value < value) | ((new_value == value) & (new_index < index))
    if value.dtype.is_floating():
        pick |= (new_value != new_value) & ((value == value) | (new_index < index))
        pick &= ~((value != value) & (new_value == new_value))
    return tl.where(pick, new_value, value), tl.where(pick, new_index, index)


@triton.jit
def argmax(value, index, axis):
    _, best = tl.reduce((value, index), axis, maximum_with_index, keep_dims=True)
    return best


@triton.jit
def argmin(value, index, axis):
    _, best = tl.reduce((value, index), axis, minimum_with_index, keep_dims=True)
    return best


# -- scans and sorts along an axis (the axis kept) ------------------------------------------------
@triton.jit
def add(a, b):
    return a + b


@triton.jit
def mul(a, b):
    return a * b


@triton.jit
def logaddexp(a, b):
    """log(exp(a) + exp(b)) from the larger operand (exact when the other is -inf); equal
    infinities give themselves (inf - inf would be NaN), NaN gives NaN."""
    hi = maximum(a, b)
    lo = minimum(a, b)
    same_inf = (lo == hi) & ((lo == float("inf")) | (lo == float("-inf")))
    return tl.where(same_inf, lo, hi + log1p(tl.exp(lo - hi)))


@triton.jit
def maximum_with_later_index(value, index, new_value, new_index):
    """cummax's fold of (value, index) pairs, `new_*` from later along the scan: the later pair
    when its value is at least as large (NaN as the largest), as eager takes the latest max."""
    pick = new_value >= value
    if value.dtype.is_floating():
        pick |= new_value != new_value
    return tl.where(pick, new_value, value), tl.where(pick, new_index, index)


@triton.jit
def minimum_with_later_index(value, index, new_value, new_index):
    pick = new_value <= value
    if value.dtype.is_floating():
        pick |= new_value != new_value
    return tl.where(pick, new_value, value), tl.where(pick, new_index, index)


@triton.jit
def last(x, axis: tl.constexpr):
    """The last element along `axis` of a 2-d block, kept with size 1: its bits summed with
    zeros, so that every value (NaN, -0.0, inf) comes through exact."""
    n: tl.constexpr = x.shape[axis]
    bits_type: tl.constexpr = tl.core.get_int_dtype(
        bitwidth=x.dtype.primitive_bitwidth, signed=True
    )
    if axis == 0:
        at_end = tl.arange(0, n)[:, None] == n - 1
    else:
        at_end = tl.arange(0, n)[None, :] == n - 1
    bits = tl.where(at_end, x.to(bits_type, bitcast=True), 0)
    return tl.sum(bits, axis, keep_dims=True).to(bits_type).to(x.dtype, bitcast=True)


@triton.jit
def _belongs_after(a, b, a_index, b_index, numel, descending: tl.constexpr):
    """Whether (a, a_index) sorts after (b, b_index): positions of numel or more (None: no
    such) after all others; then by value, NaN largest; ties by position (a stable sort)."""
    if descending:
        after = a < b
        if a.dtype.is_floating():
            after |= (b != b) & (a == a)
    else:
        after = a > b
        if a.dtype.is_floating():
            after |= (a != a) & (b == b)
    tie = a == b
    if a.dtype.is_floating():
        tie |= (a != a) & (b != b)
    after |= tie & (a_index > b_index)
    if numel is not None:
        a_real = a_index < numel
        b_real = b_index < numel
        after = (b_real & ~a_real) | (a_real & b_real & after)
    return after


@triton.jit
def _sort_exchange(x, index, numel, flip, log_distance: tl.constexpr, descending: tl.constexpr):
    """One step of a bitonic network along the last axis: each lane against the lane
    2**log_distance away; a pair out of order (in reverse order where `flip`) swaps, its index
    with it. Values move as their bits (selected by summing with zeros, exact for any value)."""
    distance: tl.constexpr = 1 << log_distance
    pairs: tl.constexpr = [x.numel // (2 * distance), 2, distance]
    bits_type: tl.constexpr = tl.core.get_int_dtype(
        bitwidth=x.dtype.primitive_bitwidth, signed=True
    )
    second = tl.arange(0, 2)[None, :, None] == 1
    bits = tl.reshape(x.to(bits_type, bitcast=True), pairs)
    ids = tl.reshape(index, pairs)
    a_bits = tl.sum(tl.where(second, 0, bits), 1).to(bits_type)
    b_bits = tl.sum(tl.where(second, bits, 0), 1).to(bits_type)
    a_id = tl.sum(tl.where(second, 0, ids), 1).to(index.dtype)
    b_id = tl.sum(tl.where(second, ids, 0), 1).to(index.dtype)
    flipped = tl.sum(tl.where(second, 0, tl.reshape(flip, pairs)), 1) != 0
    a = a_bits.to(x.dtype, bitcast=True)
    b = b_bits.to(x.dtype, bitcast=True)
    swap = _belongs_after(a, b, a_id, b_id, numel, descending) != flipped
    first_bits = tl.where(swap, b_bits, a_bits)[:, None, :]
    second_bits = tl.where(swap, a_bits, b_bits)[:, None, :]
    first_id = tl.where(swap, b_id, a_id)[:, None, :]
    second_id = tl.where(swap, a_id, b_id)[:, None, :]
    bits = tl.where(second, second_bits, first_bits)
    ids = tl.where(second, second_id, first_id)
    return tl.reshape(bits, x.shape).to(x.dtype, bitcast=True), tl.reshape(ids, index.shape)


@triton.jit
def sort_with_index(x, index, numel, descending: tl.constexpr):
    """Each row of a 2-d block (its last axis, a power of 2 long) sorted stably, NaN largest,
    lanes whose index is numel or more (None: none) last; `index` moves with the values. A
    bitonic network: merges of sorted runs of 2, 4, ... lanes, alternately ascending and
    descending, until the whole row."""
    n: tl.constexpr = x.shape[1]
    stages: tl.constexpr = _log2(n)
    position = tl.broadcast_to(tl.arange(0, n)[None, :], x.shape)
    for stage in tl.static_range(1, stages + 1):
        flip = (position >> stage) & 1
        for step in tl.static_range(stage):
            x, index = _sort_exchange(x, index, numel, flip, stage - 1 - step, descending)
    return x, index
