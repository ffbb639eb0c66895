"""The math `tl` lacks, compiled: libdevice's functions, and f16/bf16 tile products on the
tensor cores."""

from __future__ import annotations

import triton
import triton.language as tl
from triton.language.extra import libdevice

from .elementwise import isinf


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
