"""Device-side helpers that generated kernels call as `triton_helpers.<name>`: NaN-propagating
max/min, Python-style integer division, products, argmax/argmin with indices, the math `tl`
lacks, and the f16/bf16 tile product (which Triton's interpreter gets wrong for bf16).

Triton fixes compiled-or-interpreted when `@triton.jit` decorates (triton 3.6 reads
TRITON_INTERPRET then), and libdevice cannot run in the interpreter. So this file is loaded once
per mode (`for_current_mode()`, which generated code calls at import): the compiled copy maps the
math to libdevice, the interpreted copy builds it from `tl` primitives. atan, asin, acos, atan2
and lgamma have no such form and need a GPU.
"""

from __future__ import annotations

import importlib.util
import sys
import types

import triton
import triton.language as tl
from triton import knobs
from triton.language.extra import libdevice
from triton.language.standard import _log2  # a constexpr log2, as Inductor's sort uses it

#: the mode this copy of the module was decorated in
INTERPRET = bool(knobs.runtime.interpret)
_COPIES: dict[bool, types.ModuleType] = {}


def for_current_mode() -> types.ModuleType:
    """These helpers decorated for the interpret setting in force now."""
    mode = bool(knobs.runtime.interpret)
    if mode == INTERPRET:
        return sys.modules[__name__]
    if mode not in _COPIES:
        name = f"{__name__}_{'interpreted' if mode else 'compiled'}"
        spec = importlib.util.spec_from_file_location(name, __file__)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        _COPIES[mode] = module
    return _COPIES[mode]


# -- elementwise, the same in both modes ---------------------------------------------------------
@triton.jit
def maximum(a, b):
    """torch.maximum: NaN wins."""
    pick = a > b
    if a.dtype.is_floating():
        pick |= a != a
    return tl.where(pick, a, b)


@triton.jit
def minimum(a, b):
    pick = a < b
    if a.dtype.is_floating():
        pick |= a != a
    return tl.where(pick, a, b)


@triton.jit
def relu(x):
    return tl.where(x < 0, tl.zeros_like(x), x)


@triton.jit
def floordiv(a, b):
    """Python's a // b (Triton's // truncates toward zero on integers)."""
    if a.dtype.is_floating():
        return tl.floor(a / b)
    q = a // b
    r = a - q * b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), q - 1, q)


@triton.jit
def remainder(a, b):
    """Python's a % b: the sign of the divisor."""
    if a.dtype.is_floating():
        return a - b * tl.floor(a / b)
    r = a % b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


@triton.jit
def sign(x):
    return (x > 0).to(x.dtype) - (x < 0).to(x.dtype)


@triton.jit
def isinf(x):
    return tl.abs(x) == float("inf")


@triton.jit
def isfinite(x):
    return tl.abs(x) < float("inf")


@triton.jit
def signbit(x):
    return (x < 0) | ((x == 0) & (1 / x < 0))


@triton.jit
def hypot(a, b):
    return tl.sqrt(a * a + b * b)


@triton.jit
def copysign(a, b):
    return tl.where(signbit(b), -tl.abs(a), tl.abs(a))


@triton.jit
def trunc(x):
    return tl.where(x < 0, tl.ceil(x), tl.floor(x))


@triton.jit
def round(x):
    """Half to even, as torch.round."""
    r = tl.floor(x + 0.5)
    odd = (r - 2 * tl.floor(r * 0.5)) != 0
    return tl.where(((r - x) == 0.5) & odd, r - 1, r)


# -- reductions along an axis (kept, size 1) -----------------------------------------------------
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


# -- math beyond tl: libdevice when compiled, tl primitives when interpreted ------------------
if INTERPRET:

    @triton.jit
    def dot(a, b):
        """An f16/bf16 tile product in f32 (the interpreter multiplies bf16 bit patterns)."""
        return tl.dot(a.to(tl.float32), b.to(tl.float32), out_dtype=tl.float32)

    @triton.jit
    def expm1(x):
        return tl.exp(x) - 1.0

    @triton.jit
    def log1p(x):
        return tl.log(1.0 + x)

    @triton.jit
    def log10(x):
        return tl.log(x) * 0.4342944819032518

    @triton.jit
    def tan(x):
        return tl.sin(x) / tl.cos(x)

    @triton.jit
    def sinh(x):
        return (tl.exp(x) - tl.exp(-x)) * 0.5

    @triton.jit
    def cosh(x):
        return (tl.exp(x) + tl.exp(-x)) * 0.5

    @triton.jit
    def tanh(x):
        return 2.0 * tl.sigmoid(2.0 * x) - 1.0

    @triton.jit
    def asinh(x):
        return tl.where(x < 0, -1.0, 1.0) * tl.log(tl.abs(x) + tl.sqrt(x * x + 1.0))

    @triton.jit
    def acosh(x):
        return tl.log(x + tl.sqrt(x * x - 1.0))

    @triton.jit
    def atanh(x):
        return 0.5 * tl.log((1.0 + x) / (1.0 - x))

    @triton.jit
    def erfc(x):
        return 1.0 - tl.erf(x)

    @triton.jit
    def pow(a, b):
        magnitude = tl.exp2(b * tl.log2(tl.abs(a)))
        odd = (b - 2.0 * tl.floor(b * 0.5)) == 1.0
        negative = tl.where(b == tl.floor(b), tl.where(odd, -magnitude, magnitude), float("nan"))
        return tl.where(a < 0, negative, magnitude)

else:

    @triton.jit
    def dot(a, b):
        """An f16/bf16 tile product on the tensor cores, accumulated in f32."""
        return tl.dot(a, b, out_dtype=tl.float32)

    @triton.jit
    def expm1(x):
        return libdevice.expm1(x)

    @triton.jit
    def log1p(x):
        return libdevice.log1p(x)

    @triton.jit
    def log10(x):
        return libdevice.log10(x)

    @triton.jit
    def tan(x):
        return libdevice.tan(x)

    @triton.jit
    def sinh(x):
        return libdevice.sinh(x)

    @triton.jit
    def cosh(x):
        return libdevice.cosh(x)

    @triton.jit
    def tanh(x):
        return libdevice.tanh(x)

    @triton.jit
    def asinh(x):
        return libdevice.asinh(x)

    @triton.jit
    def acosh(x):
        return libdevice.acosh(x)

    @triton.jit
    def atanh(x):
        return libdevice.atanh(x)

    @triton.jit
    def erfc(x):
        return libdevice.erfc(x)

    @triton.jit
    def pow(a, b):
        return libdevice.pow(a, b)


@triton.jit
def asin(x):
    return libdevice.asin(x)


@triton.jit
def acos(x):
    return libdevice.acos(x)


@triton.jit
def atan(x):
    return libdevice.atan(x)


@triton.jit
def atan2(a, b):
    return libdevice.atan2(a, b)


@triton.jit
def lgamma(x):
    return libdevice.lgamma(x)
