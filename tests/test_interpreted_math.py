"""The math `tl` lacks that the interpreted helpers build from `tl` primitives (atan, atan2, asin,
acos, lgamma; libdevice cannot run in Triton's interpreter): compiled strictly (no fallback) on the
CPU and compared with eager at its default tolerance over dense grids, magnitudes from the
smallest denormal to the largest finite and special values, f32 and f64. Special values must be
eager's exactly, signed zeros included. On a CUDA GPU the same checks run the libdevice copy,
which kernels compile keeping denormals (as eager's CUDA math)."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from programs import CUDA, compile_strictly
from triton.language.semantic import TritonSemantic

pytestmark = pytest.mark.usefixtures("isolated_runtime")

INF, NAN = float("inf"), float("nan")
DTYPES = [torch.float32, torch.float64]


def _magnitudes(dtype: torch.dtype, smallest: float, largest: float) -> torch.Tensor:
    """Positive and negative values spread log-uniformly over [smallest, largest]."""
    x = torch.logspace(math.log10(smallest), math.log10(largest), 600, dtype=torch.float64)
    return torch.cat([x, -x]).to(dtype)


def _every_magnitude(dtype: torch.dtype) -> torch.Tensor:
    info = torch.finfo(dtype)
    return _magnitudes(dtype, info.smallest_normal * info.eps, info.max)


def _near(dtype: torch.dtype, *points: float) -> torch.Tensor:
    """Values within 1e-15 .. 1 of each point, on both sides."""
    step = _magnitudes(dtype, 1e-15, 1.0)
    return torch.cat([point + step for point in points])


def _grid(lo: float, hi: float, dtype: torch.dtype, n: int = 4001) -> torch.Tensor:
    return torch.linspace(lo, hi, n, dtype=torch.float64).to(dtype)


#: the special values checked bit for bit (with their sign) against eager, per function
SPECIAL = {
    "atan": [0.0, -0.0, INF, -INF, NAN],
    "asin": [0.0, -0.0, 1.0, -1.0, 1.5, -1.5, INF, -INF, NAN],
    "acos": [0.0, -0.0, 1.0, -1.0, 1.5, -1.5, INF, -INF, NAN],
    "lgamma": [0.0, -0.0, -1.0, -2.0, -1e10, -(2.0**60), INF, -INF, NAN],
}

#: per function: the inputs compared at eager's tolerance
INPUTS = {
    "atan": lambda d: torch.cat([_grid(-10, 10, d), _every_magnitude(d)]),
    "asin": lambda d: torch.cat([_grid(-1, 1, d), _near(d, -1.0, 0.0, 1.0), _every_magnitude(d)]),
    "acos": lambda d: torch.cat([_grid(-1, 1, d), _near(d, -1.0, 0.0, 1.0), _every_magnitude(d)]),
    "lgamma": lambda d: torch.cat(
        [
            _grid(-20, 20, d, 8001),
            _grid(-4, 4, d, 8001),
            torch.arange(-20, 21, dtype=d) + 0.5,
            torch.arange(1, 40, dtype=d),
            _near(d, 1.0, 2.0, -2.4570247, -2.7476826, -3.1435476, -3.9552986),
            _every_magnitude(d),
        ]
    ),
}

FUNCTIONS = {"atan": torch.atan, "asin": torch.asin, "acos": torch.acos, "lgamma": torch.lgamma}


def _same_bits(got: torch.Tensor, want: torch.Tensor) -> None:
    """Equal values with equal sign bits; NaN where eager has NaN."""
    nan = want.isnan()
    assert torch.equal(got.isnan(), nan), (got, want)
    assert torch.equal(got[~nan], want[~nan]), (got, want)
    assert torch.equal(got[~nan].signbit(), want[~nan].signbit()), (got, want)


def _strictly(fn, *args):
    """Compiled without fallback, and without numpy's warnings of a division by zero or an
    invalid value: the helpers give unselected lanes harmless arguments."""
    with warnings.catch_warnings():
        warnings.filterwarnings("error", "(divide by zero|invalid value)", RuntimeWarning)
        return compile_strictly(fn, *args)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", FUNCTIONS)
def test_unary_against_eager(name, dtype):
    fn = FUNCTIONS[name]
    x = INPUTS[name](dtype)
    special = torch.tensor(SPECIAL[name], dtype=dtype)
    got, got_special = _strictly(lambda x, s: (fn(x), fn(s)), x, special)
    torch.testing.assert_close(got, fn(x), equal_nan=True)
    _same_bits(got_special, fn(special))


def _special_pairs(dtype: torch.dtype, device: str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """Every pair of signed zeros, nonzero finites, infinities and NaN, but for two nonzero
    finites (no special value: atan2 of them is exact only to an ulp)."""
    values = torch.tensor([0.0, -0.0, 2.5, -2.5, INF, -INF, NAN], dtype=dtype, device=device)
    a, b = (t.flatten() for t in torch.meshgrid(values, values, indexing="ij"))
    ordinary = (a != 0) & a.isfinite() & (b != 0) & b.isfinite()
    return a[~ordinary], b[~ordinary]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_atan2_against_eager(dtype):
    """Every quadrant on a dense grid and over every magnitude; the special pairs bit for
    bit."""
    torch.manual_seed(0)
    grid = _grid(-5, 5, dtype, 201)
    a, b = (t.flatten() for t in torch.meshgrid(grid, grid, indexing="ij"))
    wide = _every_magnitude(dtype)
    a = torch.cat([a, wide, wide[torch.randperm(wide.numel())]])
    b = torch.cat([b, wide[torch.randperm(wide.numel())], wide])
    sa, sb = _special_pairs(dtype)
    got, got_special = _strictly(lambda a, b, sa, sb: (a.atan2(b), sa.atan2(sb)), a, b, sa, sb)
    torch.testing.assert_close(got, a.atan2(b), equal_nan=True)
    _same_bits(got_special, sa.atan2(sb))


def _pow_special_pairs(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Bases and exponents whose powers are exact: signed zeros, ones, infinities and NaN to
    every exponent, and +-2 to integer ones."""
    bases = torch.tensor([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, INF, -INF, NAN], dtype=dtype)
    powers = [0.0, -0.0, 1.0, 2.0, 3.0, -1.0, -2.0, -3.0, 0.5, -0.5, INF, -INF, NAN]
    a, b = (
        t.flatten() for t in torch.meshgrid(bases, torch.tensor(powers, dtype=dtype), indexing="ij")
    )
    inexact = (a.abs() == 2) & b.isfinite() & (b != b.floor())
    return a[~inexact], b[~inexact]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_pow_against_eager(dtype):
    """Bases over twelve decades, both signs, to exponents in [-4, 4] by eighths (integers
    among them, which negative bases take) at eager's tolerance; C's special pairs bit for bit:
    a ** 0 and 1 ** b are 1 even for NaN and inf, (-1) ** inf is 1, odd powers keep the sign
    of -0 and -inf (0 ** 0 was NaN: the program fuzzer's program 595182)."""
    bases = _magnitudes(dtype, 1e-6, 1e6)
    powers = _grid(-4, 4, dtype, 65)
    a, b = (t.flatten() for t in torch.meshgrid(bases, powers, indexing="ij"))
    sa, sb = _pow_special_pairs(dtype)
    got, got_special = compile_strictly(lambda a, b, sa, sb: (a.pow(b), sa.pow(sb)), a, b, sa, sb)
    torch.testing.assert_close(got, a.pow(b), equal_nan=True)
    _same_bits(got_special, sa.pow(sb))


def _zero_minus(self, x):
    """Unary minus as Triton before 3.8 builds it: 0 - x, which leaves +0.0 positive."""
    zero = self.builder.get_null_value(x.type.scalar.to_ir(self.builder))
    return self.sub(self.tensor(zero, x.type.scalar), x, True)


#: where the kernels run: interpreted with Triton's `-x`, interpreted with `-x` as Triton 3.6
#: builds it, and compiled for a GPU by the Triton installed
RUNS = ["interpreted", "interpreted_zero_minus_x", CUDA]


@pytest.mark.parametrize("run", RUNS)
@pytest.mark.parametrize("dtype", [*DTYPES, torch.bfloat16], ids=str)
def test_signed_zeros_whatever_triton_makes_of_unary_minus(dtype, run, request, monkeypatch):
    """neg, copysign, atan2, a product with -0.0 and a -0.0 constant give eager's sign bits on
    every special pair, whether Triton builds `-x` as a negation or as 0 - x (3.6): kernels and
    helpers negate through `triton_helpers.neg`, and a -0.0 constant is made as +0.0 negated
    (Triton makes any constant equal to 0 its null value, +0.0)."""
    if run == "interpreted_zero_minus_x":
        monkeypatch.setattr(TritonSemantic, "minus", _zero_minus)
    if run == "cuda":
        request.getfixturevalue("compiled_for_the_gpu")
    a, b = _special_pairs(dtype, "cuda" if run == "cuda" else "cpu")

    def fn(a, b):
        return -a, a.copysign(b), a.atan2(b), a * -0.0, torch.where(a > 0, a, -0.0)

    for got, want in zip(compile_strictly(fn, a, b), fn(a, b)):  # (inf * -0.0: numpy warns)
        _same_bits(got, want)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("p", [1, 3, 5])
def test_mvlgamma_against_eager(p, dtype):
    """A sum of lgammas at x - i/2: defined for x > (p - 1) / 2."""
    lo = (p - 1) / 2
    x = torch.cat([_grid(lo + 1e-3, lo + 20, dtype), lo + _magnitudes(dtype, 1e-6, 1e30)[:600]])
    got = _strictly(lambda x: torch.special.multigammaln(x, p), x)
    torch.testing.assert_close(got, torch.special.multigammaln(x, p), equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_precision_computes_in_f32(dtype):
    """f16/bf16 inputs reach the helpers as f32 (the kernels upcast) and round back once."""
    x = _grid(-0.99, 0.99, dtype, 801)
    y = _grid(0.1, 30, dtype, 801)

    def fn(x, y):
        return x.atan(), x.asin(), x.acos(), x.atan2(y), y.lgamma(), (-y).lgamma()

    for got, want in zip(_strictly(fn, x, y), fn(x, y)):
        torch.testing.assert_close(got, want, equal_nan=True)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.usefixtures("compiled_for_the_gpu")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_libdevice_copy_on_the_gpu(dtype):
    """The compiled copy (libdevice) on the same inputs, and signbit read from the bits."""
    xs = {name: INPUTS[name](dtype).cuda() for name in FUNCTIONS}
    a, b = _special_pairs(dtype, "cuda")

    def fn(xs, a, b):
        return [FUNCTIONS[name](x) for name, x in xs.items()] + [a.atan2(b), a.copysign(b)]

    got = compile_strictly(fn, xs, a, b)
    for g, w in zip(got[:-2], fn(xs, a, b)[:-2]):
        torch.testing.assert_close(g, w, equal_nan=True)
    for g, w in zip(got[-2:], fn(xs, a, b)[-2:]):
        _same_bits(g, w)


#: math that the compiled helpers take from libdevice, on inputs where it is about the input or
#: its log: a denormal flushed to zero would show (0 for x, inf or -inf for the log)
DENORMAL_MATH = {
    "expm1": torch.expm1,
    "log1p": torch.log1p,
    "log10": torch.log10,
    "tan": torch.tan,
    "sinh": torch.sinh,
    "tanh": torch.tanh,
    "asinh": torch.asinh,
    "atanh": torch.atanh,
    "asin": torch.asin,
    "atan": torch.atan,
    "atan2": lambda x: torch.atan2(x, torch.ones_like(x)),
    "lgamma": torch.lgamma,
}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.usefixtures("compiled_for_the_gpu")
def test_libdevice_keeps_f32_denormals_on_the_gpu():
    """Kernels compile with libdevice keeping denormals (Triton's default flushes them, and
    Inductor keeps that): every denormal magnitude gives eager's value, to eager's relative
    tolerance and one denormal step (a flushed input is 0 where the value is the input)."""
    info = torch.finfo(torch.float32)
    step = info.smallest_normal * info.eps
    x = _magnitudes(torch.float32, step, info.smallest_normal).cuda()
    got = compile_strictly(lambda x: [fn(x) for fn in DENORMAL_MATH.values()], x)
    wrong = []
    for (name, fn), g in zip(DENORMAL_MATH.items(), got):
        if not torch.allclose(g, fn(x), atol=step, rtol=1.3e-6, equal_nan=True):
            wrong.append(name)
    assert wrong == []
