"""The loops evaluator on hand-written IR: each case is a graph whose meaning is known exactly."""

from __future__ import annotations

import pytest
import sympy
import torch
from mind.dialects.scalar_ops import SCALAR_OPS
from mind.interpreters.loops import SCALAR_FUNCTIONS, evaluate, index_value
from mind.ir.diagnostics import MindError
from mind.ir.printer import print_module
from mind.ir.symbols import Mod, sym
from torch.testing import assert_close
from torch.utils._sympy.functions import FloorDiv, ModularIndexing

import mind

SEED_LOWERED = """
loops.graph @graph0_forward(%arg0_1: f32[4, 128][128, 1]cpu, %arg1_1: f32[4, 128][128, 1]cpu, %arg2_1: f32[4, 128][128, 1]cpu) {
  %add = loops.pointwise {origins = ["add"]} : f32[4, 128]cpu {
    %0 = loops.load(%arg0_1, 128*p0 + p1) : f32
    %1 = loops.load(%arg1_1, 128*p0 + p1) : f32
    %2 = loops.add(%0, %1) : f32
    loops.yield(%2)
  }
  %relu = loops.pointwise {origins = ["relu"]} : f32[4, 128]cpu {
    %0 = loops.load(%arg2_1, 128*p0 + p1) : f32
    %1 = loops.relu(%0) : f32
    loops.yield(%1)
  }
  %mul = loops.pointwise {origins = ["mul"]} : f32[4, 128]cpu {
    %0 = loops.load(%add, [p0, p1]) : f32
    %1 = loops.load(%relu, [p0, p1]) : f32
    %2 = loops.mul(%0, %1) : f32
    loops.yield(%2)
  }
  %buf0 = loops.reduction {reduction_ranges = [128], reduction_type = "sum", origins = ["sum"]} : f32[4][1]cpu {
    %0 = loops.load(%mul, [p0, p1]) : f32
    loops.yield(%0)
  }
  loops.output(%buf0)
}
"""

SEED_INLINED = """
loops.graph @graph0_forward(%arg0_1: f32[4, 128][128, 1]cpu, %arg1_1: f32[4, 128][128, 1]cpu, %arg2_1: f32[4, 128][128, 1]cpu) {
  %buf0 = loops.reduction {reduction_ranges = [128], reduction_type = "sum", origins = ["add", "mul", "relu", "sum"]} : f32[4][1]cpu {
    %0 = loops.load(%arg0_1, 128*p0 + p1) : f32
    %1 = loops.load(%arg1_1, 128*p0 + p1) : f32
    %2 = loops.add(%0, %1) : f32
    %3 = loops.load(%arg2_1, 128*p0 + p1) : f32
    %4 = loops.relu(%3) : f32
    %5 = loops.mul(%2, %4) : f32
    loops.yield(%5)
  }
  loops.output(%buf0)
}
"""

# x.t()[:, 1:5:2] read from a transposed (non-contiguous) input, plus a realized result in
# column-major layout that a second node reads back through flat offsets.
VIEW_AND_REALIZED = """
loops.graph @g(%x: f32[6, 4][1, 6]cpu) {
  %t = loops.view(%x, [p1, p0]) {origins = ["t"]} : f32[4, 6]cpu
  %s = loops.view(%t, [p0, 2*p1 + 1]) {origins = ["slice"]} : f32[4, 2]cpu
  %buf0 = loops.pointwise {origins = ["mul"]} : f32[4, 2][1, 4]cpu {
    %0 = loops.load(%s, [p0, p1]) : f32
    %1 = loops.constant(2.0) : f32
    %2 = loops.mul(%0, %1) : f32
    loops.yield(%2)
  }
  %buf1 = loops.pointwise {origins = ["add"]} : f32[4, 2][2, 1]cpu {
    %0 = loops.load(%buf0, p0 + 4*p1) : f32
    %1 = loops.load(%x, 6*p0 + 2*p1 + 1) : f32
    %2 = loops.add(%0, %1) : f32
    loops.yield(%2)
  }
  loops.output(%buf0, %buf1, %s)
}
"""

# torch.cat([a, b], dim=1) with masked loads; the masked-off lanes index out of range.
MASKED_CAT = """
loops.graph @g(%a: f32[3, 2][2, 1]cpu, %b: f32[3, 5][5, 1]cpu) {
  %cat = loops.pointwise {origins = ["cat"]} : f32[3, 7]cpu {
    %0 = loops.index(p1) : i64
    %1 = loops.constant(2) : i64
    %2 = loops.lt(%0, %1) : b8
    %3 = loops.load(%a, 2*p0 + p1) {mask = %2, other = 0.0} : f32
    %4 = loops.ge(%0, %1) : b8
    %5 = loops.load(%b, 5*p0 + p1 - 2) {mask = %4, other = 0.0} : f32
    %6 = loops.where(%2, %3, %5) : f32
    loops.yield(%6)
  }
  loops.output(%cat)
}
"""

# embedding: out[p0, p1] = w[idx[p0], p1]
INDIRECT = """
loops.graph @g(%idx: i64[5][1]cpu, %w: f32[10, 3][3, 1]cpu) {
  %embedding = loops.pointwise {origins = ["embedding"]} : f32[5, 3]cpu {
    %0 = loops.load(%idx, p0) : i64
    %1 = loops.load(%w, 3*i0 + p1) {indirect = [%0]} : f32
    loops.yield(%1)
  }
  loops.output(%embedding)
}
"""

# argmax over the middle dim, and a bf16 result computed in f32
ARGMAX_BF16 = """
loops.graph @g(%x: bf16[2, 5, 3][15, 3, 1]cpu) {
  %buf0 = loops.reduction {reduction_ranges = [5], reduction_type = "argmax", origins = ["argmax"]} : i64[2, 3][3, 1]cpu {
    %0 = loops.load(%x, 15*p0 + 3*p2 + p1) : bf16
    loops.yield(%0)
  }
  %buf1 = loops.pointwise {origins = ["mul"]} : bf16[2, 5, 3][15, 3, 1]cpu {
    %0 = loops.load(%x, 15*p0 + 3*p1 + p2) : bf16
    %1 = loops.cast(%0) : f32
    %2 = loops.constant(3.0) : f32
    %3 = loops.mul(%1, %2) : f32
    %4 = loops.cast(%3) : bf16
    loops.yield(%4)
  }
  loops.output(%buf0, %buf1, none)
}
"""

EXTERN_FALLBACK = """
loops.graph @g(%x: f32[3, 4][4, 1]cpu, %w: f32[4, 2][2, 1]cpu) {
  %buf0 = loops.extern @aten.mm.default(%x, %w) {origins = ["mm"]} : f32[3, 2][2, 1]cpu
  %buf1, %buf2 = loops.fallback @aten.sort.default(%x, 1) {origins = ["sort"]} : f32[3, 4][4, 1]cpu, i64[3, 4][4, 1]cpu
  %buf3 = loops.constant_tensor @c {data = [1.0, 2.0]} : f32[2][1]cpu
  %buf4 = loops.pointwise {origins = ["add"]} : f32[3, 2][2, 1]cpu {
    %0 = loops.load(%buf0, 2*p0 + p1) : f32
    %1 = loops.load(%buf3, p1) : f32
    %2 = loops.add(%0, %1) : f32
    loops.yield(%2)
  }
  loops.output(%buf4, %buf1, %buf2)
}
"""


def _run(text: str, *inputs: torch.Tensor) -> list:
    module = mind.parse(text)
    assert mind.parse(print_module(module)).__str__() == print_module(module)
    return evaluate(module.ops[0], list(inputs))


def _seed_inputs() -> list[torch.Tensor]:
    return [torch.randn(4, 128) for _ in range(3)]


@pytest.mark.parametrize("text", [SEED_LOWERED, SEED_INLINED], ids=["lowered", "inlined"])
def test_seed(text):
    a, b, c = _seed_inputs()
    (out,) = _run(text, a, b, c)
    assert out.stride() == (1,)
    assert_close(out, ((a + b) * c.relu()).sum(dim=-1))


def test_views_and_realized_layouts():
    x = torch.randn(4, 6).t()  # f32[6, 4] with strides [1, 6]
    buf0, buf1, s = _run(VIEW_AND_REALIZED, x)
    ref = x.t()[:, 1:5:2]
    assert_close(s, ref)
    assert buf0.stride() == (1, 4)
    assert_close(buf0, ref * 2)
    assert_close(buf1, ref * 3)  # memory offset 6*p0 + 2*p1 + 1 of x is x.t()[p0, 2*p1 + 1]


def test_masked_load():
    a, b = torch.randn(3, 2), torch.randn(3, 5)
    (out,) = _run(MASKED_CAT, a, b)
    assert_close(out, torch.cat([a, b], dim=1))


def test_indirect_load():
    idx, w = torch.tensor([3, 0, 9, 3, 1]), torch.randn(10, 3)
    (out,) = _run(INDIRECT, idx, w)
    assert_close(out, torch.nn.functional.embedding(idx, w))


def test_argmax_and_bf16():
    x = torch.randn(2, 5, 3).to(torch.bfloat16)
    arg, scaled, none = _run(ARGMAX_BF16, x)
    assert_close(arg, x.argmax(dim=1), rtol=0, atol=0)
    assert scaled.dtype == torch.bfloat16
    assert_close(scaled, (x.float() * 3).bfloat16(), rtol=0, atol=0)
    assert none is None


def test_extern_fallback_constant():
    x, w = torch.randn(3, 4), torch.randn(4, 2)
    out, values, indices = _run(EXTERN_FALLBACK, x, w)
    assert_close(out, x @ w + torch.tensor([1.0, 2.0]))
    ref = torch.sort(x, 1)
    assert_close(values, ref.values)
    assert_close(indices, ref.indices, rtol=0, atol=0)


P0, P1 = sym("p0"), sym("p1")


@pytest.mark.parametrize(
    "expr",
    [
        sympy.floor(P0 / 3),
        sympy.floor((P0 + 2 * P1) / 4),
        sympy.ceiling(P0 / 4),
        Mod(P0 + P1, 5),
        sympy.Min(P0, 7, P1 + 3),
        sympy.Max(P0 - 9, 0),
        2 * P0**2 - P1,
        FloorDiv(P0, 3),
        ModularIndexing(P0 + P1, 2, 3),
    ],
    ids=str,
)
def test_index_expressions(expr):
    grid = {P0: torch.arange(20).view(20, 1), P1: torch.arange(4).view(1, 4)}
    got = torch.broadcast_to(torch.as_tensor(index_value(expr, grid)), (20, 4))
    want = torch.tensor([[int(expr.subs({P0: a, P1: c})) for c in range(4)] for a in range(20)])
    assert torch.equal(got, want)


def test_every_scalar_op_has_a_torch_function():
    assert set(SCALAR_FUNCTIONS) == set(SCALAR_OPS)


@pytest.mark.parametrize(
    "text, inputs, message",
    [
        (INDIRECT, [torch.tensor([10, 0, 0, 0, 0]), torch.randn(10, 3)], "outside"),
        (INDIRECT, [torch.tensor([0, 0, 0, 0, 0]), torch.randn(3, 10).t()], "strides"),
        (INDIRECT, [torch.randn(5), torch.randn(10, 3)], "must be i64"),
    ],
    ids=["out-of-range", "wrong-strides", "wrong-dtype"],
)
def test_errors(text, inputs, message):
    with pytest.raises(MindError, match=message):
        _run(text, *inputs)
