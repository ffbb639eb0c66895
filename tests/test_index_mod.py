"""Index algebra against integer arithmetic: Mods evaluate correctly where sympy's do not (a Mod
inside a product, which composing a window partition's views with a strided read makes), and
simplifying, substituting and folding by ranges keep every value."""

from __future__ import annotations

import operator

import pytest
import sympy
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from mind.analysis.loops import simplify_index, simplify_with_ranges, substitute
from mind.ir.symbols import Mod, sym
from programs import no_fallback

N, M = sym("p0"), sym("p1")


def test_a_multiple_of_a_mod_is_reduced_by_what_the_outer_modulus_divides():
    assert Mod(2 * Mod(N, 4), 4) == 2 * Mod(N, 2)  # sympy: 2*Mod(p0, 4)
    assert Mod(2 * Mod(N, 4), 8) == 2 * Mod(N, 4)  # sympy: 2*Mod(Mod(p0, 4)**2, 4)
    assert Mod(Mod(2 * N, 8), 4) == 2 * Mod(N, 2)
    assert Mod(Mod(N, 8), 4) == Mod(N, 4)


def _spec(draw, depth: int) -> list:
    """A random index over p0 and p1 as data: terms (coefficient, kind, argument), a kind being a
    variable, a constant, or a Mod or floor division of a smaller index."""
    terms = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["p0", "p1", "const"] + ["mod", "div"] * (depth > 0)))
        arg = draw(st.integers(0, 5)) if kind == "const" else None
        if kind in ("mod", "div"):
            arg = (_spec(draw, depth - 1), draw(st.sampled_from([2, 4, 8, 3, 6])))
        terms.append((draw(st.sampled_from([2, 1, 4, 3])), kind, arg))
    return terms


def _build(spec: list, p0, p1, mod, div):
    """The index `spec` describes over `p0` and `p1`, by `mod` and `div`: sympy's expression
    (symbols, mind's Mod, floor), or its value in integers."""

    def atom(kind, arg):
        if kind in ("mod", "div"):
            inner, k = arg
            return (mod if kind == "mod" else div)(_build(inner, p0, p1, mod, div), k)
        return {"p0": p0, "p1": p1}.get(kind, arg)

    return sum((c * atom(kind, arg) for c, kind, arg in spec), 0)


def _tree(draw, depth: int) -> tuple[sympy.Expr, object]:
    """A random index and a function that computes it in integers."""
    spec = _spec(draw, depth)
    expr = sympy.sympify(_build(spec, N, M, Mod, lambda x, k: sympy.floor(x / k)))
    return expr, lambda n, m: _build(spec, n, m, operator.mod, operator.floordiv)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_nested_index_mods_agree_with_integer_arithmetic(data):
    expr, reference = _tree(data.draw, 3)
    for n in range(0, 17):
        for m in (0, 5, 11):
            got = expr.xreplace({N: sympy.Integer(n), M: sympy.Integer(m)})
            assert int(got) == reference(n, m), (expr, n, m)


@settings(max_examples=200, deadline=None)
@given(st.data(), st.sampled_from([2, 4, 16]), st.sampled_from([1, 3, 8]))
def test_simplified_indexes_keep_their_values(data, n_size, m_size):
    """`simplify_index`, `simplify_with_ranges` (p0 < n_size, p1 < m_size) and `substitute` (p0
    as 4*p1 + p0, a loop cut in pieces) give the same integer at every point."""
    expr, reference = _tree(data.draw, 3)
    ranged = simplify_with_ranges(expr, {N: n_size, M: m_size})
    cut = substitute(expr, {N: 4 * M + N})
    for n in range(n_size):
        for m in range(m_size):
            at = {N: sympy.Integer(n), M: sympy.Integer(m)}
            assert int(sympy.sympify(simplify_index(expr)).xreplace(at)) == reference(n, m)
            assert int(sympy.sympify(ranged).xreplace(at)) == reference(n, m), (expr, ranged)
            assert int(sympy.sympify(cut).xreplace(at)) == reference(4 * m + n, m), (expr, cut)


S = sym("s0")


def _sized_tree(draw, depth: int) -> tuple[sympy.Expr, object]:
    """A random index over p0, p1 and a size s0, Mods and floor divisions by sizes among them
    (s0, 2*s0, 4), as dynamic shapes' reshapes make: the expression and its integer value."""
    divisors = [(S, lambda s: s), (2 * S, lambda s: 2 * s), (sympy.Integer(4), lambda s: 4)]

    def spec(depth: int) -> list:
        terms = []
        for _ in range(draw(st.integers(1, 3))):
            kind = draw(st.sampled_from(["p0", "p1"] + ["mod", "div"] * (depth > 0)))
            arg = (spec(depth - 1), draw(st.integers(0, 2))) if kind in ("mod", "div") else None
            terms.append((draw(st.sampled_from([1, 2, 4])), draw(st.booleans()), kind, arg))
        return terms

    def build(terms, p0, p1, s, symbolic: bool):
        total = 0
        for c, sized, kind, arg in terms:
            if kind in ("mod", "div"):
                inner, d = arg
                divisor = divisors[d][0] if symbolic else divisors[d][1](s)
                x = build(inner, p0, p1, s, symbolic)
                if symbolic:
                    atom = Mod(x, divisor) if kind == "mod" else sympy.floor(x / divisor)
                else:
                    atom = x % divisor if kind == "mod" else x // divisor
            else:
                atom = p0 if kind == "p0" else p1
            total = total + c * (S if symbolic else s) ** int(sized) * atom
        return total

    terms = spec(depth)
    expr = sympy.sympify(build(terms, N, M, None, True))
    return expr, lambda n, m, s: build(terms, n, m, s, False)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_indexes_over_sizes_keep_their_values(data):
    """`k*c*floor(x/c) + k*Mod(x, c)` folds to `k*x` for sizes c and k too, and by ranges
    `floor((c*n + r)/(c*d))` is `floor(n/d)` for r < c: every value stays, for any size."""
    expr, reference = _sized_tree(data.draw, 3)
    simple = simplify_index(expr)
    ranged = simplify_with_ranges(expr, {N: 2 * S, M: 4})
    for s in (1, 2, 3, 5):
        for n in range(2 * s):
            for m in range(4):
                at = {N: sympy.Integer(n), M: sympy.Integer(m), S: sympy.Integer(s)}
                want = reference(n, m, s)
                assert int(sympy.sympify(simple).xreplace(at)) == want, (expr, simple, at)
                assert int(sympy.sympify(ranged).xreplace(at)) == want, (expr, ranged, at)


def test_a_reshape_round_trip_over_sizes_is_the_identity():
    """[s*256] rows split as [s, s1, 256] and joined again, and a flat index split by 16, by s
    and by 4 and joined: what dynamic shapes left in kernels as div and mod chains."""
    s0, s1, x = sym("s0"), sym("s1"), sym("x0")
    split = 256 * s1 * sympy.floor(N / s1 + M / (256 * s1)) + Mod(M, 256)
    split += 256 * Mod(N + sympy.floor(M / 256), s1) + 256 * sympy.floor(Mod(M, 256) / 256)
    assert simplify_with_ranges(split, {N: s0 * s1, M: 256}) == 256 * N + M
    chain = 16 * s1 * Mod(sympy.floor(x / (16 * s1)), 4) + 64 * s1 * sympy.floor(x / (64 * s1))
    assert simplify_index(chain + Mod(x, 16) + 16 * Mod(sympy.floor(x / 16), s1)) == x


@pytest.mark.usefixtures("isolated_runtime")
def test_window_partition_then_strided_merge_matches_eager():
    """Swin's window reverse, then its patch merging (rows and columns two apart, concatenated):
    the merged read composed to `64*Mod(p2, 4)` where `64*Mod(p2, 2)` is right, and read past
    the buffer's end (transformers' Swin gave wrong answers)."""

    def merge(x, w):
        windows = x.view(2, 2, 4, 2, 4, 8).permute(0, 1, 3, 2, 4, 5).reshape(-1, 16, 8) @ w
        x = windows.view(2, 2, 2, 4, 4, 8).permute(0, 1, 3, 2, 4, 5).reshape(2, 8, 8, 8)
        x = (x.view(2, 64, 8) + 1).view(2, 8, 8, 8)
        parts = [x[:, i::2, j::2, :] for j in (0, 1) for i in (0, 1)]
        return torch.cat(parts, -1)

    x, w = torch.randn(2, 8, 8, 8), torch.randn(8, 8)
    with no_fallback():
        got = torch.compile(merge, backend="mind")(x, w)
    torch.testing.assert_close(got, merge(x, w))


class Truncating(int):
    """An int whose // and % round toward zero, as Triton's (C's) do."""

    def __floordiv__(self, other: int) -> Truncating:
        q = abs(int(self)) // abs(int(other))
        return Truncating(q if (self < 0) == (other < 0) else -q)

    def __mod__(self, other: int) -> Truncating:
        return Truncating(int(self) - int(other) * int(self // other))

    def __add__(self, other: int) -> Truncating:
        return Truncating(int(self) + int(other))

    def __sub__(self, other: int) -> Truncating:
        return Truncating(int(self) - int(other))

    def __mul__(self, other: int) -> Truncating:
        return Truncating(int(self) * int(other))

    def __neg__(self) -> Truncating:
        return Truncating(-int(self))

    __radd__, __rmul__ = __add__, __mul__

    def __rsub__(self, other: int) -> Truncating:
        return Truncating(int(other) - int(self))

    def __rfloordiv__(self, other: int) -> Truncating:
        return Truncating(other) // self

    def __rmod__(self, other: int) -> Truncating:
        return Truncating(other) % self


S = sym("s0")


@pytest.mark.parametrize(
    "expr",
    [
        sympy.floor((N * S + S - 1) / S),  # sympy: p0 + floor(-1/s0) + 1
        Mod(N * S + S - 1, S),  # Mod(-1, s0) inside
        sympy.floor((N - 5) / 3),
        Mod(N - 5, S),
        sympy.ceiling(N / 3),
        sympy.ceiling((N - 7) / S),
    ],
    ids=str,
)
def test_an_emitted_index_divides_as_floor_and_mod_under_truncating_division(expr):
    """Triton divides toward zero: a kernel's index whose dividend may be negative is written so
    that it keeps floor's and Mod's values (`x.repeat(2, 1, 1)[..., -1:]` with sizes symbolic
    read `-1 // s0`: 0, not -1). The host wrapper's Python divides as floor does."""
    from mind.target.pyexpr import py_expr

    kernel = py_expr(expr, lambda s: s)
    host = py_expr(expr, lambda s: s, ("min", "max"), truncating=False)
    for n in range(12):
        for s in (1, 2, 3, 5):
            want = int(expr.subs({N: n, S: s}))
            values = {"p0": Truncating(n), "s0": Truncating(s)}
            assert eval(kernel, {}, values) == want, (kernel, n, s)  # noqa: S307 (our own text)
            assert eval(host, {}, {"p0": n, "s0": s}) == want, (host, n, s)  # noqa: S307
