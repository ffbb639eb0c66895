"""Symbolic sizes end to end: `torch.compile(dynamic=True)` compiles one kernel set that serves
every size (no fallback), its numbers match eager, and the triton IR round-trips."""

from __future__ import annotations

import re
import sys
import warnings

import pytest
import sympy
import torch
from mind.passes import run_pipeline
from mind.target.triton import emit
from programs import no_fallback
from torch._dynamo.utils import counters

import mind


@pytest.fixture(autouse=True)
def isolated(isolated_runtime):
    counters.clear()


def seed(a, b, c):
    return ((a + b) * c.relu()).sum(-1)


def add_relu(x, y):
    return (x + y).relu()


def softmax(x):
    return torch.softmax(x, -1)


def column_sum(x):
    return x.sum(0)


def cat_scaled(x):
    """Index math divides by a symbolic product: `xindex // (2*s1)`."""
    return torch.cat([x, x * 2], 1)


def drop_first_column(x):
    """The slice's result strides hold `Max(1, s1 - 1)`, from torch's own sympy functions."""
    return x[:, 1:] * 2


def with_size(x):
    """A SymInt output comes back as a Python int."""
    return x + 1, x.shape[0] * 2


def silu_halves(x):
    """Chunk sizes are `floor(s1/2 + 1/2)`: torch's FloorDiv, which printed `((s1 + 1)//2)`."""
    a, b = x.chunk(2, -1)
    return torch.nn.functional.silu(a) * b


def first_half(x):
    return x[:, : x.shape[1] // 2] * 2


def row_sum_static(x):
    """A symbolic row count over a static reduction: a persistent reduction."""
    return x.sum(-1)


def float_corrections(x):
    """n - correction with a float correction: `s0 - 1.0`, `s0 - 0.5`, no integer arithmetic."""
    return x.std(-1), x.var(0, correction=0.5)


def size_as_float(x):
    """A SymFloat computed on the host (`sym_float(s0) * 1.0`) fills a tensor: an ATen call."""
    return torch.where(x > 0, x, x.shape[0] * 1.0), x / x.shape[-1] ** 0.5


def transpose_add(x):
    """A 2-D tile over symbolic rows: its y blocks fold over grid axes 1 and 2."""
    return x + x.t()


def scatter_at_offset(x):
    """as_strided_scatter at a storage offset Dynamo makes symbolic (the OpInfo sample's int
    keyword): the offset is a symbol in the scatter's index."""
    return torch.as_strided_scatter(x, x[:2] * 2, (2,), (2,), storage_offset=x.shape[0] - 4)


CASES = [
    (seed, 3, ((4, 128), (6, 2100))),
    (add_relu, 2, ((5, 7), (33, 129))),
    (softmax, 1, ((4, 128), (3, 3000))),
    (column_sum, 1, ((8, 5), (2100, 3))),
    (cat_scaled, 1, ((4, 6), (7, 33))),
    (drop_first_column, 1, ((4, 6), (7, 33))),
    (with_size, 1, ((4, 6), (7, 33))),
    (silu_halves, 1, ((4, 6), (7, 34), (3, 10))),
    (first_half, 1, ((4, 6), (7, 33), (3, 10))),
    (float_corrections, 1, ((4, 6), (7, 33), (3, 10))),
    (size_as_float, 1, ((4, 6), (7, 33), (3, 10))),
    (transpose_add, 1, ((96, 96), (130, 130))),
    (scatter_at_offset, 1, ((6,), (9,))),
]


@pytest.mark.parametrize("fn, arity, shapes", CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_dynamic_matches_eager_without_fallback(fn, arity, shapes):
    compiled = torch.compile(fn, backend="mind", dynamic=True)
    with no_fallback():
        for shape in shapes:
            inputs = [torch.randn(shape) for _ in range(arity)]
            torch.testing.assert_close(compiled(*inputs), fn(*inputs), rtol=1e-4, atol=1e-4)
    assert counters["stats"]["unique_graphs"] == 1  # one symbolic graph served both sizes


def test_static_reduction_over_symbolic_rows_is_persistent():
    compiled = torch.compile(row_sum_static, backend="mind", dynamic=True)
    with no_fallback():
        for rows in (5, 9):
            x = torch.randn(rows, 64)
            torch.testing.assert_close(compiled(x), row_sum_static(x))


def rows_of_quotient(x, y):
    """Rows of `s0//s1` elements: 1 at the size hint (every symbol 8192), 50 and 33 here."""
    return x.view(y.shape[0], -1).sum(1) + y


def test_a_row_of_symbolic_length_is_reduced_whole_at_any_size():
    """A persistent reduction covers its row with R0_BLOCK, chosen for the size hint: for a row
    of symbolic length that block is no bound, so such a row loops. Chosen persistent, rows of
    50 and 33 summed only their first elements."""
    compiled = torch.compile(rows_of_quotient, backend="mind", dynamic=True)
    with no_fallback():
        for rows, length in ((6, 50), (4, 33)):
            x, y = torch.randn(rows * length), torch.randn(rows)
            torch.testing.assert_close(compiled(x, y), rows_of_quotient(x, y))


def test_a_symbolic_graph_chooses_its_blocks_for_the_sizes_it_was_traced_at(tmp_path, monkeypatch):
    """The aten graph records each size symbol's value at tracing (`hints`), and the kernels are
    configured for it, as Inductor's are: a softmax over rows of 24 takes R0_BLOCK 32, not the
    2048 of a row of 8192 (the default hint), which left 98% of each block masked off (a small
    GPT-Neo's call at a second sequence length, recompile included, took 251 s in Triton's
    interpreter, 22 s with hints).
    The looped kernel serves rows of any length. Reading the hints warns of nothing (torch 2.14
    deprecates the shape environment's `var_to_val`)."""
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    compiled = torch.compile(softmax, backend="mind", dynamic=True)
    with no_fallback(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for rows, length in ((5, 24), (3, 3000), (7, 17)):
            x = torch.randn(rows, length)
            torch.testing.assert_close(compiled(x), softmax(x))
    ours = {getattr(m, "__file__", None) for n, m in sys.modules.items() if n.startswith("mind.")}
    assert not [f"{w.filename}:{w.lineno}: {w.message}" for w in caught if w.filename in ours]
    (aten,) = [p.read_text() for p in tmp_path.glob("*_forward.00.aten")]
    (kernels,) = [p.read_text() for p in tmp_path.glob("*_forward.*.to-triton.triton")]
    rows, length = re.search(r"f32\[(s\d+), (s\d+)\]", aten).groups()
    hints = dict(re.findall(r"(s\d+): (\d+)", re.search(r"\{hints = \{(.*?)\}\}", aten)[1]))
    assert hints == {rows: "5", length: "24"}
    assert "R0_BLOCK: 32}" in kernels and "R0_BLOCK: 2048" not in kernels


@pytest.mark.parametrize(
    "mode, scale, sizes",
    [("nearest", 0.29, (100, 13)), ("bilinear", 1.7, (7, 13)), ("area", 0.5, (7, 9))],
)
def test_a_size_computed_in_float_arithmetic_is_a_symbol_bound_on_the_host(mode, scale, sizes):
    """interpolate with a scale factor sizes its output `TruncToInt(scale*ToFloat(s0))`: float
    arithmetic (0.29 * 100 is 28.999...), which no index holds. The value that computes it
    binds a symbol of its own, `h0`, on the host, and a backward reads it from its gradient's
    size: forward and backward compile, and match eager."""
    kw = {"align_corners": False} if mode == "bilinear" else {}

    def fn(x):
        return torch.nn.functional.interpolate(x, scale_factor=scale, mode=mode, **kw) * 2

    compiled = torch.compile(fn, backend="mind", dynamic=True)
    with no_fallback():
        for n in sizes:
            x = torch.randn(2, 3, n, n, requires_grad=True)
            out = compiled(x)
            (grad,) = torch.autograd.grad(out.square().sum(), x)
            expected = fn(x)
            (expected_grad,) = torch.autograd.grad(expected.square().sum(), x)
            torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
            torch.testing.assert_close(grad, expected_grad, rtol=1e-4, atol=1e-4)
    aten = str(mind.capture(fn, torch.randn(2, 3, 9, 9), stage="aten", dynamic=True))
    assert "math.trunc(%mul) : sym(h0)" in aten and "TruncToInt" not in aten
    assert str(mind.parse(aten)) == aten


PIPELINE = "lower,realize,inline,schedule,fuse,merge-loops,to-triton"


def _triton(fn, *inputs):
    aten = mind.capture(fn, *inputs, stage="aten", dynamic=True)
    return run_pipeline(aten, PIPELINE)


@pytest.mark.parametrize("fn, arity, shapes", CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_symbolic_triton_round_trips(fn, arity, shapes):
    module = _triton(fn, *[torch.randn(shapes[0]) for _ in range(arity)])
    assert str(mind.parse(str(module))) == str(module)
    assert emit(mind.parse(str(module))) == emit(module)


@pytest.mark.parametrize("fn", [silu_halves, first_half], ids=lambda f: f.__name__)
def test_every_stage_of_a_symbolic_split_round_trips(fn):
    texts = [
        str(mind.capture(fn, torch.randn(4, 8), stage=s, dynamic=True)) for s in ("fx", "aten")
    ]
    aten = mind.parse(texts[-1])
    run_pipeline(aten, PIPELINE, on_pass=lambda p, module: texts.append(str(module)))
    assert "floor(s" in texts[-1] and "//" not in texts[-1]
    for text in texts:
        assert str(mind.parse(text)) == text


def test_seed_binds_sizes_and_loops_to_the_r0_numel_argument():
    module = _triton(seed, *[torch.randn(4, 128) for _ in range(3)])
    rows, cols = (str(a.type.expr) for a in module.ops[-1].body.args[:2])
    call = emit(module).split("def call")[1]
    assert f"    {rows} = arg0_1\n    {cols} = arg1_1\n" in call
    assert (
        f"_launch({rows}, 1, 1, None, arg2_1, arg3_1, arg4_1, buf0, {rows}, {cols}, {rows}, {cols})"
        in call
    )
    assert f"empty_strided_cpu(({rows},), (1,)" in call
    assert "assert_size_stride" not in call
    source = emit(module)
    assert "    while r0_offset < r0_numel:\n" in source
    # one kernel serves every size: the sizes are unspecialized i64 arguments
    assert "@triton.jit(do_not_specialize=['xnumel', 'r0_numel', " in source
    assert (
        ", (torch.float32, torch.float32, torch.float32, torch.float32, I64, I64, I64, I64)"
        in source
    )


def test_torch_sympy_functions_print_as_sympy_the_grammar_reads():
    from mind.dialects.pyobjects import sympify_symint
    from torch.utils._sympy.functions import FloorDiv, Max, ModularIndexing, PythonMod

    s0 = sympy.Symbol("s0", integer=True, positive=True)
    exprs = [FloorDiv(s0 + 1, 2), ModularIndexing(s0, 4, 3), PythonMod(s0, 5), Max(1, s0 - 1)]
    texts = [str(sympify_symint(e)) for e in exprs]
    assert texts == ["floor(s0/2 + 1/2)", "Mod(floor(s0/4), 3)", "Mod(s0, 5)", "Max(1, s0 - 1)"]
    for text in texts:
        module = mind.parse(f"loops.graph @g(%x: f32[{text}]) {{\n  loops.output()\n}}\n")
        assert str(module.ops[0].body.args[0].type) == f"f32[{text}]"


def ramps(n, step, dtype=None):
    """A bf16 integer ramp and an f32 float one, or both in `dtype`."""
    ints, floats = dtype or torch.bfloat16, dtype or torch.float32
    return torch.arange(-1, n, step, dtype=ints), torch.arange(0.5, n, 0.25 * step, dtype=floats)


def test_a_ramp_over_symbolic_bounds_is_rounded_once():
    """arange with bounds Dynamo makes symbols: `start + step * p0` is computed exactly (an index
    expression, as for constant bounds) and rounded to bf16 once, as the float64 ramp rounds;
    in bf16 itself it rounded `p0` and the product too (Triton's interpreter also casts
    integers to bf16 wrongly). Eager's CPU kernel is no reference: its bf16 ramp is 292 where
    3 * 97 - 1 = 290 is a bf16."""
    compiled = torch.compile(ramps, backend="mind", dynamic=True)
    with no_fallback():
        for n, step in ((1000, 3), (700, 7)):
            for got, exact in zip(compiled(n, step), ramps(n, step, torch.float64)):
                torch.testing.assert_close(got, exact.to(got.dtype), rtol=0, atol=0)


def views_from_the_end(x, i, start):
    picked = torch.select(x, 1, i) * 2
    sliced = x[start:-1:2] + 1
    scattered = torch.select_scatter(x, picked, 1, i)
    return picked, sliced, scattered


def test_views_at_negative_symbolic_positions_count_from_the_end():
    """An index or a start Dynamo makes a symbol (the ints passed in) may be negative: the graph
    wraps it (`i + size`, passes/aten_rules/views.py); unwrapped, the select read before the
    tensor's start and the select_scatter wrote there. The backward's select_scatter too."""
    compiled = torch.compile(views_from_the_end, backend="mind", dynamic=True)
    with no_fallback():
        for size, i, start in ((5, -1, -4), (7, -3, -6), (6, -6, -9)):
            x = torch.randn(size, size, size, requires_grad=True)
            got = compiled(x, i, start)
            want = views_from_the_end(x, i, start)
            for g, w in zip(got, want):
                torch.testing.assert_close(g, w)
            (grad,) = torch.autograd.grad(sum(g.sum() for g in got), x)
            (expected,) = torch.autograd.grad(sum(w.sum() for w in want), x)
            torch.testing.assert_close(grad, expected)


def select_at_item(x, t):
    i = t.item()
    torch._check(i >= -x.shape[1])
    torch._check(i < x.shape[1])
    return torch.select(x, 1, i) * 2, x[i:] + 1


def test_views_at_a_position_read_from_data_run_as_aten_views():
    """An index that `.item()` read (an unbacked symbol) has a sign only the run knows: the
    view runs as ATen's, inside the compiled graph, instead of the graph falling back."""
    x = torch.randn(4, 5)
    compiled = torch.compile(select_at_item, backend="mind")
    with no_fallback(), torch._dynamo.config.patch(capture_scalar_outputs=True):
        for i in (2, -1, -4):
            t = torch.tensor(i)
            for got, want in zip(compiled(x, t), select_at_item(x, t)):
                torch.testing.assert_close(got, want)
