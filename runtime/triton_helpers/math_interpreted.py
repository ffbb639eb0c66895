"""The math `tl` lacks, for Triton's interpreter: built from `tl` primitives (atan, atan2, asin,
acos and lgamma as rational and Lanczos approximations, evaluated in f64), or for the special
functions (Bessel, erfcx, erfinv) torch's run on the host values. libdevice cannot run in the
interpreter, whose blocks are numpy arrays."""

from __future__ import annotations

import triton
import triton.language as tl

from .elementwise import isfinite, isinf, neg, signbit

#: the special functions (Inductor's Triton set) that compiled helpers take from libdevice, and
#: interpreted ones from torch
ON_HOST = ("i0", "i1", "j0", "j1", "y0", "y1", "erfcx", "erfinv")


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
