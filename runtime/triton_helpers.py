"""Device-side helpers that generated kernels call as `triton_helpers.<name>`: NaN-propagating
max/min, Python-style integer division, products, argmax/argmin with indices, the math `tl`
lacks, and the f16/bf16 tile product (which Triton's interpreter gets wrong for bf16).

Triton fixes compiled-or-interpreted when `@triton.jit` decorates (triton 3.6 reads
TRITON_INTERPRET then), and libdevice cannot run in the interpreter. So this file is loaded once
per mode (`for_current_mode()`, which generated code calls at import): the compiled copy maps the
math to libdevice, the interpreted copy builds it from `tl` primitives (atan, atan2, asin,
acos and lgamma as rational and Lanczos approximations, evaluated in f64), or for the special
functions (Bessel, erfcx, erfinv) runs torch's on the host values.
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


# A helper that branches on a dtype does so with if/else: Triton's compiler skips the branch
# not taken, but not the code after an `if` that returns (`a // b` of floats does not compile).
@triton.jit
def floordiv(a, b):
    """Python's a // b (Triton's // truncates toward zero on integers)."""
    if a.dtype.is_floating():
        q = tl.floor(a / b)
    else:
        q = a // b
        r = a - q * b
        q = tl.where((r != 0) & ((r < 0) != (b < 0)), q - 1, q)
    return q


@triton.jit
def remainder(a, b):
    """Python's a % b: the sign of the divisor. From C's remainder (`%`, fmod on floats, exact) as
    eager computes it; `a - b * floor(a / b)` rounds the quotient (7.0 % 0.7 gave 0, eager 1.2e-7)
    and loses all digits once a / b passes 2**24."""
    r = a % b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)


@triton.jit
def sign(x):
    """A bool is its own sign (i1 has no subtraction: the interpreter raises)."""
    if x.dtype == tl.int1:
        signed = x
    else:
        signed = (x > 0).to(x.dtype) - (x < 0).to(x.dtype)
    return signed


@triton.jit
def bitwise_not(x):
    """~x. An unsigned x (a bool too) is xor'ed with all ones instead: the interpreter computes
    ~x as x ^ -1, which no unsigned dtype holds (compiled, both are one xor)."""
    if x.dtype.is_int_unsigned():
        flipped = x ^ tl.full(x.shape, (1 << x.dtype.primitive_bitwidth) - 1, x.dtype)
    else:
        flipped = ~x
    return flipped


@triton.jit
def isinf(x):
    return tl.abs(x) == float("inf")


@triton.jit
def isfinite(x):
    return tl.abs(x) < float("inf")


@triton.jit
def signbit(x):
    """The sign bit, -0.0 and -NaN included: read from the bits (no 1 / x, which the
    interpreter would warn of at zero)."""
    if x.dtype.is_floating():
        bits_type: tl.constexpr = tl.core.get_int_dtype(
            bitwidth=x.dtype.primitive_bitwidth, signed=True
        )
        negative = x.to(bits_type, bitcast=True) < 0
    else:
        negative = x < 0
    return negative


@triton.jit
def neg(x):
    """-x with the sign bit flipped, a zero's too: Triton 3.6 builds `-x` as `0 - x`, which
    leaves +0.0 positive (3.8 negates). A product with -1 is exact (it folds to a negation).
    Helpers negate floats through here."""
    if x.dtype.is_floating():
        negated = x * -1.0
    else:
        negated = -x
    return negated


@triton.jit
def hypot(a, b):
    return tl.sqrt(a * a + b * b)


@triton.jit
def copysign(a, b):
    return tl.where(signbit(b), neg(tl.abs(a)), tl.abs(a))


@triton.jit
def nextafter(a, b):
    """torch.nextafter, on the bits in `a`'s own dtype (so one form serves both modes and every
    float): one step away from zero or toward it; from zero, the smallest subnormal of b's sign;
    b where they are equal; NaN where either is."""
    bits_type: tl.constexpr = tl.core.get_int_dtype(
        bitwidth=a.dtype.primitive_bitwidth, signed=True
    )
    x, y = a, b
    if a.dtype.primitive_bitwidth < 32:  # compared in f32, exact (the interpreter's bf16 isn't)
        x, y = a.to(tl.float32), b.to(tl.float32)
    bits = a.to(bits_type, bitcast=True)
    one = (bits == bits).to(bits_type)
    from_zero = tl.where(y > 0, one, (one << (a.dtype.primitive_bitwidth - 1)) | one)
    bits = tl.where((x == 0) | (x != x), one, bits)  # lanes not stepped: no integer overflow
    away = (y > x) == (x > 0)
    stepped = tl.where(x == 0, from_zero, tl.where(away, bits + one, bits - one))
    out = tl.where(x == y, b, stepped.to(a.dtype, bitcast=True))
    return tl.where(x != x, a, tl.where(y != y, b, out))


@triton.jit
def frexp(x):
    """torch.frexp of an f32 or f64 `x`, read from its bits (exact, and one form for both modes:
    the interpreter has no libdevice ilogb/ldexp): x = mantissa * 2**exponent with |mantissa|
    in [0.5, 1); a subnormal is first scaled into the normal range; zeros, infinities and NaN
    keep x, with exponent 0."""
    width: tl.constexpr = x.dtype.primitive_bitwidth
    bits_type: tl.constexpr = tl.core.get_int_dtype(bitwidth=width, signed=True)
    mantissa_bits: tl.constexpr = 52 if width == 64 else 23
    exponent_mask: tl.constexpr = (1 << (width - 1 - mantissa_bits)) - 1
    half: tl.constexpr = exponent_mask // 2 - 1  # the biased exponent of [0.5, 1)
    lift: tl.constexpr = mantissa_bits + 2  # 2**lift makes every subnormal normal
    smallest_normal: tl.constexpr = 2.0 ** (-half)
    subnormal = tl.abs(x) < smallest_normal
    scaled = tl.where(subnormal, tl.where(subnormal, x, 0.0) * (2.0**lift), x)
    bits = scaled.to(bits_type, bitcast=True)
    biased = (bits >> mantissa_bits) & exponent_mask
    exponent = biased - half - tl.where(subnormal, lift, 0)
    kept = bits & ~(exponent_mask << mantissa_bits)
    mantissa = (kept | (half << mantissa_bits)).to(x.dtype, bitcast=True)
    special = (x == 0) | (x != x) | isinf(x)
    return tl.where(special, x, mantissa), tl.where(special, 0, exponent).to(tl.int32)


@triton.jit
def frexp_mantissa(x):
    mantissa, _ = frexp(x)
    return mantissa


@triton.jit
def frexp_exponent(x):
    _, exponent = frexp(x)
    return exponent


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


# -- cooperation between programs ----------------------------------------------------------------
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


# -- math beyond tl: libdevice when compiled, tl primitives when interpreted ------------------
#: the special functions (Inductor's Triton set) that compiled helpers take from libdevice, and
#: interpreted ones from torch
ON_HOST = ("i0", "i1", "j0", "j1", "y0", "y1", "erfcx", "erfinv")

if INTERPRET:

    def _on_host(name: str):
        """The interpreter's helper for scalar op `name`: its torch reference (the loops
        evaluator's) run on the host values. libdevice cannot run in the interpreter, whose
        blocks are numpy arrays, and these functions have no short `tl` form."""

        def helper(x):
            import torch
            from mind.interpreters.loops import SCALAR_FUNCTIONS  # on a call: loads torch
            from triton.runtime.interpreter import TensorHandle

            values = SCALAR_FUNCTIONS[name](torch.tensor(x.handle.data)).numpy()
            return tl.tensor(TensorHandle(values, x.dtype), x.type)

        return helper

    globals().update({name: _on_host(name) for name in ON_HOST})

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
        return (tl.exp(x) - tl.exp(neg(x))) * 0.5

    @triton.jit
    def cosh(x):
        return (tl.exp(x) + tl.exp(neg(x))) * 0.5

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
        """C's pow (eager's on CPU), in f64 and rounded once: |a| ** b as exp2(b * log2|a|) (in
        f32, results far from 1 were up to 38 ulps off); an odd integer power keeps the sign of a
        negative base, -0 and -inf too; a finite negative base to a fraction is NaN. Exactly 1
        where C says so whatever the other operand (NaN, inf, 0 included): a ** 0, 1 ** b,
        (-1) ** +-inf, where exp2 would give NaN (0 * inf)."""
        # (one shape: the interpreter cannot `&` a 0-d condition of a scalar base with a block's)
        x, y = tl.broadcast(a.to(tl.float64), b.to(tl.float64))
        magnitude = tl.exp2(y * tl.log2(tl.abs(x)))
        integer = y == tl.floor(y)
        odd = integer & ((y - 2.0 * tl.floor(y * 0.5)) == 1.0)
        result = tl.where(signbit(x) & odd, neg(magnitude), magnitude)
        result = tl.where((x < 0) & isfinite(x) & ~integer, float("nan"), result)
        one = (y == 0) | (x == 1) | ((x == -1) & isinf(y))
        return tl.where(one, 1.0, result).to(a.dtype)

    # The inverse circular functions and lgamma are evaluated in f64 whatever the input (numpy
    # runs f64 as fast as f32): an f32 result is then rounded once from a value good to about
    # 1e-15. Unselected lanes of a `tl.where` get harmless arguments, so that numpy warns of
    # no division by zero or invalid value for inputs torch answers silently.
    @triton.jit
    def _atan_reduced(a):
        """atan of a >= 0 (or NaN) in f64, Cephes' scheme: above tan(3pi/8) as pi/2 - atan(1/a),
        above 0.66 as pi/4 + atan((a-1)/(a+1)), then r + r^3 P(r^2)/Q(r^2); the rounding of
        pi/2 and pi/4 to f64 added back (MOREBITS)."""
        big = a > 2.41421356237309504880
        mid = (a > 0.66) & ~big
        r = tl.where(big, -1.0, tl.where(mid, a - 1.0, a)) / tl.where(
            big, a, tl.where(mid, a + 1.0, 1.0)
        )
        z = r * r
        p = (
            (((-8.750608600031904122785e-1 * z - 1.615753718733365076637e1) * z
              - 7.500855792314704667340e1) * z - 1.228866684490136173410e2) * z
            - 6.485021904942025371773e1
        )  # fmt: skip
        q = (
            ((((z + 2.485846490142306297962e1) * z + 1.650270098316988542046e2) * z
              + 4.328810604912902668951e2) * z + 4.853903996359136964868e2) * z
            + 1.945506571482613964425e2
        )  # fmt: skip
        zero = tl.zeros_like(a)  # (a where of two Python floats would be f32)
        more_bits = 6.123233995736765886130e-17
        offset = tl.where(big, 1.5707963267948966, tl.where(mid, 0.7853981633974483, zero))
        low = tl.where(big, more_bits, tl.where(mid, 0.5 * more_bits, zero))
        return offset + (r + r * z * p / q + low)

    @triton.jit
    def atan(x):
        """Odd: atan(-x) = -atan(x); a zero gives itself (its sign kept), +-inf gives +-pi/2."""
        x64 = x.to(tl.float64)
        y = _atan_reduced(tl.abs(x64))
        return tl.where(x64 == 0, x64, tl.where(x64 < 0, neg(y), y)).to(x.dtype)

    @triton.jit
    def _atan2(a, b):
        """atan2 in f64, C's quadrants: atan(min/max) of the magnitudes, pi/2 minus it when
        |a| > |b|, pi minus that when b's sign bit is set, a's sign. Both zero: 0 (then pi or
        0, signed); both infinite: pi/4 (then 3pi/4 or pi/4, signed); NaN: NaN."""
        ya = tl.abs(a)
        xb = tl.abs(b)
        hi = tl.maximum(ya, xb)
        lo = tl.minimum(ya, xb)
        both_inf = lo == float("inf")
        t = _atan_reduced(tl.where(both_inf, 1.0, lo) / tl.where(both_inf | (hi == 0), 1.0, hi))
        t = tl.where(ya > xb, 1.5707963267948966 - t, t)
        t = tl.where(signbit(b), 3.141592653589793 - t, t)
        t = tl.where((a != a) | (b != b), float("nan"), t)  # (tl.maximum may drop a NaN)
        return tl.where(signbit(a), neg(t), t)

    @triton.jit
    def atan2(a, b):
        return _atan2(a.to(tl.float64), b.to(tl.float64)).to(a.dtype)

    @triton.jit
    def asin(x):
        """atan2(x, sqrt((1-x)(1+x))): exact steps near +-1, where 1 - x^2 would cancel."""
        x64 = x.to(tl.float64)
        inside = tl.abs(x64) <= 1.0
        x64 = tl.where(inside, x64, 0.0)
        y = _atan2(x64, tl.sqrt((1.0 - x64) * (1.0 + x64)))
        return tl.where(inside, y, float("nan")).to(x.dtype)

    @triton.jit
    def acos(x):
        """2 atan2(sqrt(1-x), sqrt(1+x)): the half angle, accurate near +-1 (pi near -1)."""
        x64 = x.to(tl.float64)
        inside = tl.abs(x64) <= 1.0
        x64 = tl.where(inside, x64, 0.0)
        y = 2.0 * _atan2(tl.sqrt(1.0 - x64), tl.sqrt(1.0 + x64))
        return tl.where(inside, y, float("nan")).to(x.dtype)

    @triton.jit
    def _lgamma_lanczos(y):
        """lgamma(y) for y >= 0.5 in f64, Lanczos' approximation (g = 7, 9 terms, Godfrey's
        coefficients, relative error about 1e-15): with t = y + g - 1/2,
        lgamma(y) = (y - 1/2)(log t - 1) - g + log(sqrt(2 pi) A(y)); written so that
        (y - 1/2) log t - t does not overflow before the result does."""
        a = (
            0.99999999999980993
            + 676.5203681218851 / y
            - 1259.1392167224028 / (y + 1.0)
            + 771.32342877765313 / (y + 2.0)
            - 176.61502916214059 / (y + 3.0)
            + 12.507343278686905 / (y + 4.0)
            - 0.13857109526572012 / (y + 5.0)
            + 9.9843695780195716e-6 / (y + 6.0)
            + 1.5056327351493116e-7 / (y + 7.0)
        )
        t = y + 6.5
        return (y - 0.5) * (tl.log(t) - 1.0) + (tl.log(a) + (0.9189385332046728 - 7.0))

    @triton.jit
    def lgamma(x):
        """log|gamma(x)|, as torch: +inf at 0, at negative integers and at +-inf; NaN gives NaN.
        Lanczos from 1/2; lgamma(x + 1) - log|x| on (-1/2, 1/2) (accurate near 0, where pi x
        would lose a denormal's digits); below, the reflection log(pi / |sin(pi x)|) -
        lgamma(1 - x), sin(pi x) taken at the distance of x from the nearest integer."""
        x64 = x.to(tl.float64)
        pole = (x64 <= 0) & (x64 == tl.floor(x64))
        x64 = tl.where(pole, 1.0, x64)
        reflect = x64 <= -0.5
        near_zero = (x64 > -0.5) & (x64 < 0.5)
        y = tl.where(reflect, 1.0 - x64, tl.where(near_zero, x64 + 1.0, x64))
        lg = _lgamma_lanczos(y)
        xr = tl.where(reflect, x64, 0.5)
        frac = xr - tl.floor(xr)
        sin_pi = tl.sin(3.141592653589793 * tl.minimum(frac, 1.0 - frac))
        reflected = (1.1447298858494002 - tl.log(sin_pi)) - lg
        shifted = lg - tl.log(tl.abs(tl.where(near_zero, x64, 1.0)))
        result = tl.where(pole, float("inf"), tl.where(reflect, reflected, shifted))
        if x.dtype != tl.float64:  # what rounds to inf in f32 is inf (numpy warns of the cast)
            result = tl.where(result >= 3.4028235677973366e38, float("inf"), result)
        return result.to(x.dtype)

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

    @triton.jit
    def _nan_at_infinities(x, y):
        """y, NaN where x is infinite: torch's Bessel functions give NaN there, libdevice the
        limits (as Inductor's Triton overrides correct it)."""
        return tl.where(isinf(x), x - x, y)

    @triton.jit
    def i0(x):
        return _nan_at_infinities(x, libdevice.cyl_bessel_i0(x))

    @triton.jit
    def i1(x):
        return _nan_at_infinities(x, libdevice.cyl_bessel_i1(x))

    @triton.jit
    def j0(x):
        return _nan_at_infinities(x, libdevice.j0(x))

    @triton.jit
    def j1(x):
        return _nan_at_infinities(x, libdevice.j1(x))

    @triton.jit
    def y0(x):
        return _nan_at_infinities(x, libdevice.y0(x))

    @triton.jit
    def y1(x):
        return _nan_at_infinities(x, libdevice.y1(x))

    @triton.jit
    def erfcx(x):
        return libdevice.erfcx(x)

    @triton.jit
    def erfinv(x):
        return libdevice.erfinv(x)
