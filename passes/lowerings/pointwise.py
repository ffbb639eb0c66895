"""Elementwise ops: one scalar op per element, with broadcasting and torch's type promotion made
explicit (operands are cast to the computation dtype, the result to the op's dtype)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from mind.dialects.torch_types import to_torch
from mind.ir import dtypes as dt
from mind.ir.dtypes import DType

from . import Unsupported, register_lowering
from .common import KIND, is_tensor, operand, promote

aten = torch.ops.aten
ScalarFn = Callable[..., object]


def elementwise(ctx, args: list, compute: DType, fn: ScalarFn):
    """A pointwise node of the op's result type computing `fn(b, *operands)` in `compute`."""
    out = ctx.out

    def body(b, idx):
        return fn(b, *(operand(b, a, idx, compute) for a in args))

    return ctx.pointwise(out.dtype, out.shape, body)


def register_scalar(
    packet, fn: ScalarFn, compute: Callable[[tuple], DType], numbers_rounded: bool = False
) -> None:
    """Lower every overload of `packet` to `fn` over operands cast to `compute(args)`; with
    `numbers_rounded`, a Python number operand first rounded to the result's dtype."""

    @register_lowering(packet, number_self=True)
    def lower(ctx, *args):
        if numbers_rounded:
            args = tuple(_in_dtype(a, ctx.out.dtype) for a in args)
        return elementwise(ctx, list(args), compute(args), fn)


#: ops whose eager kernels, on CPU and CUDA, read a number operand in the tensor's dtype (CUDA's
#: `gpu_kernel_with_scalars` over scalar_t) though they compute in f32: a bf16 remainder by 0.7
#: divides by 0.69921875, and near a multiple of it the result differs by up to the divisor
NUMBERS_ROUNDED = ("fmod", "remainder")


def _in_dtype(x, dtype: DType):
    """A Python float or int operand as `dtype` holds it (bf16: 0.7 is 0.69921875)."""
    if is_tensor(x) or not dtype.is_floating_point or not isinstance(x, (int, float)):
        return x
    return torch.tensor(x, dtype=torch.float64).to(to_torch(dtype)).item()


def promoted(kind) -> Callable[[tuple], DType]:
    return lambda args: promote(args, kind)


def in_result_dtype(args: tuple) -> DType:
    """The result's own dtype, bf16/f16 not upcast: for ops on a float's bits (nextafter)."""
    return promote(args, KIND.DEFAULT, compute=False)


#: ops that leave an integer (or a bool) as it is: they round floats only
ROUNDING = ("floor", "ceil", "round", "trunc")


def _op(name: str) -> ScalarFn:
    if name in ROUNDING:
        return lambda b, x: getattr(b, name)(x) if x.type.dtype.is_floating_point else x
    return lambda b, *xs: getattr(b, name)(*xs)


#: aten packet -> (loops op, promotion kind); unary then binary
SCALAR_TABLE = {
    **{
        n: (n, KIND.INT_TO_FLOAT)
        for n in (
            "exp exp2 expm1 log log2 log10 log1p sqrt rsqrt sin cos tan asin acos atan sinh cosh "
            "tanh asinh acosh atanh sigmoid erf erfc lgamma reciprocal"
        ).split()
    },
    **{n: (n, KIND.DEFAULT) for n in "neg relu floor ceil round trunc sign bitwise_not".split()},
    # special functions with a libdevice form (Inductor's Triton set; the others run in ATen)
    **{
        packet: (name, KIND.INT_TO_FLOAT)
        for packet, name in (
            ("i0", "i0"),
            ("erfinv", "erfinv"),
            ("special_i1", "i1"),
            ("special_modified_bessel_i0", "i0"),
            ("special_modified_bessel_i1", "i1"),
            ("special_bessel_j0", "j0"),
            ("special_bessel_j1", "j1"),
            ("special_bessel_y0", "y0"),
            ("special_bessel_y1", "y1"),
            ("special_erfcx", "erfcx"),
        )
    },
    "sgn": ("sign", KIND.DEFAULT),
    "abs": ("abs", KIND.COMPLEX_TO_FLOAT),
    "square": ("square", KIND.BOOL_TO_LONG),
    **{
        n: (n, KIND.DEFAULT)
        for n in (
            "mul maximum minimum fmod remainder bitwise_and bitwise_or bitwise_xor hypot"
        ).split()
    },
    "floor_divide": ("floordiv", KIND.DEFAULT),
    "bitwise_left_shift": ("lshift", KIND.DEFAULT),
    "bitwise_right_shift": ("rshift", KIND.DEFAULT),
    "atan2": ("atan2", KIND.INT_TO_FLOAT),
    "copysign": ("copysign", KIND.INT_TO_FLOAT),
    "__lshift__": ("lshift", KIND.DEFAULT),
    "__rshift__": ("rshift", KIND.DEFAULT),
}
#: predicates compare in the promoted dtype and give b8
PREDICATES = ("eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isfinite", "signbit")
#: logical ops read every operand as b8
LOGICAL = ("logical_and", "logical_or", "logical_xor", "logical_not")

for _name, (_scalar, _kind) in SCALAR_TABLE.items():
    register_scalar(getattr(aten, _name), _op(_scalar), promoted(_kind), _name in NUMBERS_ROUNDED)
for _overload, _name in ((aten.max.other, "maximum"), (aten.min.other, "minimum")):
    register_scalar(_overload, _op(_name), promoted(KIND.DEFAULT))
register_scalar(aten.nextafter, _op("nextafter"), in_result_dtype)
for _name in PREDICATES:
    register_scalar(getattr(aten, _name), _op(_name), promoted(KIND.DEFAULT))
for _name in LOGICAL:
    register_scalar(getattr(aten, _name), _op(_name), lambda args: dt.b8)


@register_lowering(aten.add, aten.sub, number_self=True)
def add_sub(ctx, x, y, alpha=1):
    """`x + alpha * y` (and `-`); alpha folds away when it is 1."""
    name = ctx.origin

    def fn(b, a, c):
        if alpha != 1:
            c = b.mul(c, b.constant(alpha, c.type.dtype))
        return getattr(b, name)(a, c)

    return elementwise(ctx, [x, y], promote([x, y], KIND.DEFAULT), fn)


_ROUNDING: dict[object, tuple[object, ScalarFn]] = {
    None: (KIND.INT_TO_FLOAT, lambda b, x, y: b.truediv(x, y)),
    "floor": (KIND.DEFAULT, lambda b, x, y: b.floordiv(x, y)),
}


@register_lowering(aten.div, number_self=True)
def div(ctx, x, y, *, rounding_mode=None):
    if rounding_mode == "trunc":
        return _trunc_div(ctx, x, y)
    kind, fn = _ROUNDING[rounding_mode]
    return elementwise(ctx, [x, y], promote([x, y], kind), fn)


def _trunc_div(ctx, x, y):
    """Division rounded toward zero; integers divide exactly in f64 (|x| < 2**53)."""
    compute = promote([x, y], KIND.DEFAULT)
    if compute.is_floating_point:
        return elementwise(ctx, [x, y], compute, lambda b, a, c: b.trunc(b.truediv(a, c)))

    def fn(b, a, c):
        q = b.trunc(b.truediv(b.cast(a, dt.f64), b.cast(c, dt.f64)))
        return b.cast(q, compute)

    return elementwise(ctx, [x, y], compute, fn)


@register_lowering(aten.where)
def where(ctx, cond, x, y):
    return _select(ctx, cond, x, y)


@register_lowering(aten.masked_fill)
def masked_fill(ctx, x, mask, value):
    return _select(ctx, mask, value, x)


def _select(ctx, cond, x, y):
    """`where(cond, x, y)` of the result's dtype, a bf16 or f16 one selected in f32: the select
    is exact either way, and in f32 a value a fused producer computed in f32 passes through
    unrounded (inline), as in Inductor's kernels. A number operand is the result dtype's (0.1
    as bf16 holds it), as eager selects it."""
    out = ctx.out
    compute = dt.upcast(out.dtype)
    x, y = (_in_dtype(v, out.dtype) for v in (x, y))

    def body(b, idx):
        c = operand(b, cond, idx, dt.b8)
        return b.where(c, operand(b, x, idx, compute), operand(b, y, idx, compute))

    return ctx.pointwise(out.dtype, out.shape, body)


@register_lowering(aten.clamp, aten.clamp_min, aten.clamp_max)
def clamp(ctx, x, lo=None, hi=None):
    """`minimum(maximum(x, lo), hi)`; clamp_max's one bound is an upper bound."""
    if ctx.origin == "clamp_max":
        lo, hi = None, lo
    bounds = [(lo, "maximum"), (hi, "minimum")]
    present = [(v, name) for v, name in bounds if v is not None]
    if not present:
        raise Unsupported("clamp without bounds")
    compute = promote([x, *(v for v, _ in present)], KIND.DEFAULT)
    out = ctx.out

    def body(b, idx):
        v = operand(b, x, idx, compute)
        for bound, name in present:
            v = getattr(b, name)(v, operand(b, bound, idx, compute))
        return v

    return ctx.pointwise(out.dtype, out.shape, body)


#: integer exponents of a float whose power is computed by multiplications, under this in
#: magnitude (Inductor's bound): libdevice's pow costs tens of instructions, and `pow(x, 1.0)`
#: (the derivative of `x**2`) is `x`
MULTIPLIED_POWERS = 32


def _integer_power(exponent: int) -> ScalarFn:
    """x**exponent by multiplications (Inductor's pow_recursive): the reciprocal of the power
    for a negative exponent (a float's only: the lowering raises for an integer's)."""

    def fn(b, x):
        if exponent < 0:
            return b.reciprocal(_integer_power(-exponent)(b, x))
        if exponent <= 1:
            return x if exponent else b.constant(1, x.type.dtype)
        half = _integer_power(exponent // 2)(b, x)
        square = b.mul(half, half)
        return b.mul(square, x) if exponent % 2 else square

    return fn


def _multiplied(exponent: object, floating: bool) -> bool:
    """Whether a number exponent's power is computed by multiplications: an integer one, under
    MULTIPLIED_POWERS in magnitude for a float (every non-negative one for an integer: Triton's
    pow takes floats only)."""
    if not isinstance(exponent, int | float) or not float(exponent).is_integer():
        return False
    return abs(exponent) < MULTIPLIED_POWERS if floating else exponent >= 0


@register_lowering(aten.pow, number_self=True)
def pow_(ctx, x, exponent):
    """As Inductor: integer exponents by multiplications, 0.5 as a square root, a float pow
    otherwise; an integer power of a tensor exponent, or a negative one, runs in ATen (which
    raises where eager does: no negative integer powers)."""
    compute = promote([x, exponent], KIND.BOOL_TO_LONG)
    floating = compute.is_floating_point
    if not is_tensor(exponent) and _multiplied(exponent, floating):
        return elementwise(ctx, [x], compute, _integer_power(int(exponent)))
    if not is_tensor(exponent) and floating and exponent == 0.5:
        return elementwise(ctx, [x], compute, lambda b, v: b.sqrt(v))
    if floating:
        return elementwise(ctx, [x, exponent], compute, _op("pow"))
    raise Unsupported("an integer power of a tensor exponent or a negative one")


@register_lowering("torch.ops.prims.fma", number_self=True)
def fma(ctx, x, y, z):
    """Inductor's prim, which Dynamo writes for `addcmul_` (an optimizer step): x * y + z, as its
    eager definition computes it. By name: the module defining it (Inductor's prims) is not
    imported for this."""
    return elementwise(
        ctx, [x, y, z], promote([x, y, z], KIND.DEFAULT), lambda b, u, v, w: b.add(b.mul(u, v), w)
    )


@register_lowering(torch.ops.prims.div, number_self=True)
def prims_div(ctx, x, y):
    """prims' division (torch's references use it, `lcm`): true division for floats, rounded
    toward zero for integers, as C divides."""
    return div(ctx, x, y, rounding_mode=None if ctx.out.dtype.is_floating_point else "trunc")


@register_lowering(aten.frexp, torch.ops.prims.frexp)
def frexp(ctx, x):
    """Two pointwise nodes, the mantissa and the i32 exponent, as Inductor's lowering makes them
    (they fuse into one kernel); f16 and bf16 split in f32, exactly (their subnormals are normal
    there)."""
    compute = dt.upcast(x.type.dtype)

    def part(name: str):
        return lambda b, idx: getattr(b, name)(b.cast(b.load(x, idx), compute))

    return [
        ctx.pointwise(t.dtype, t.shape, part(name))
        for t, name in zip(ctx.outs, ("frexp_mantissa", "frexp_exponent"))
    ]
