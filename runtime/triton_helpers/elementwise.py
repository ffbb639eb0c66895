"""Elementwise helpers, the same in both modes: NaN-propagating max/min, Python-style integer
division, signs and negation that keep -0.0, rounding and float decomposition."""

from __future__ import annotations

import triton
import triton.language as tl


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
