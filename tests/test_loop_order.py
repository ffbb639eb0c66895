"""Loop reordering for fusion (analysis/loop_order.py, passes/fuse.py): the orders that strides
propose, joins through a permutation (of a flat loop's pieces too), and end to end on CPU (Triton's interpreter) against eager:
nodes that iterate the same elements in different orders become one kernel, with static and
symbolic sizes, and a training step whose weight and bias gradients are column sums."""

from __future__ import annotations

import copy

import pytest
import sympy
import torch
from mind.analysis.iteration import Reorder, join
from mind.analysis.loop_order import _split, matching_order, strides
from mind.analysis.loops import simplify_with_ranges
from mind.ir.symbols import Mod, sym
from programs import no_fallback
from test_e2e_patterns import kernels

import mind

p0, p1, p2, s0, s1 = (sym(n) for n in ("p0", "p1", "p2", "s0", "s1"))


def test_strides_of_linear_indexes_only():
    assert strides(16 * p0 + p1 + 3, 2) == (16, 1)
    assert strides(p0 * s1 + p1, 2) == (s1, 1)
    assert strides(p1, 2) == (0, 1)
    assert strides(mind.ir.symbols.as_int_like(p0 % 16), 1) is None
    assert strides(p0 * s1 + p0 + 2 * s0 * p1 + s0, 2) == (s1 + 1, 2 * s0)
    assert strides(sympy.Integer(7), 2) == (0, 0)
    assert strides(p0 * p1 + p1, 2) is None
    assert strides(p0**2, 1) is None
    assert strides(16 * sympy.floor(p0 / 16) + p1, 2) is None
    assert strides(s0 * (p0 + p1), 2) is None


def test_matching_order_pairs_loops_by_stride():
    # a row-major [8, 16] pointwise node against a column reduction x=[16] (stride 1), r=[8]
    assert matching_order([8, 16], 16 * p0 + p1, [16, 8], p0 + 16 * p1) == (1, 0)
    # the reduction's stored result, read broadcast over the rows: the rows take its r loop
    assert matching_order([8, 16], p1, [16, 8], p0) == (1, 0)
    # one reduction loop is two of the pointwise node's: [2, 4, 16] against x=[16], r=[8]
    assert matching_order([2, 4, 16], 64 * p0 + 16 * p1 + p2, [16, 8], p0 + 16 * p1) == (2, 0, 1)
    # ... and the other way round: [8, 16] against x=[16], r=[2, 4]
    assert matching_order([8, 16], 16 * p0 + p1, [16, 2, 4], p0 + 64 * p1 + 16 * p2) == (1, 0)
    assert matching_order([s0, s1], p0 * s1 + p1, [s1, s0], p0 + p1 * s1) == (1, 0)
    # strides that pair with nothing, or a loop that is not linear: no order
    assert matching_order([4, 4], 12 - 4 * p0 + p1, [4, 4], 4 * p0 + p1) is None
    assert matching_order([8, 16], 16 * p0 + p1, [128], p0 % 16) is None


@pytest.mark.parametrize(
    "dim, point",
    [((2, 64), 16), ((1, 16), 16), ((1, 16), 4), ((4, 8), 8), ((4, 8), 6), ((-2, 8), -4),
     ((-2, 8), 4), ((3, 12), 9), ((1, 12), 24), ((0, 8), 2), ((16, 2), 32), ((2, 3), 4)],
)  # fmt: skip
def test_splitting_a_loop_on_integers_is_the_symbolic_split(dim, point):
    """Static sizes take integer arithmetic, symbolic ones sympy's: the same pieces."""
    symbolic = _split(tuple(sympy.Integer(n) for n in dim), sympy.Integer(point))
    assert _split(dim, point) == symbolic
    assert all(type(n) is int for piece in _split(dim, point) or [] for n in piece)


def test_join_through_a_permutation():
    shared = join(([16], [8]), ([8, 16], []), Reorder(1, (8, 16), (1, 0)))
    assert shared.sizes == ([16], [8])
    assert shared.first == {p0: p0, p1: p1}
    assert shared.second == {p0: p1, p1: p0}  # the old rows run in r, the old columns in x
    assert shared.reorder.describe(([8, 16], [])) == "reordered to (p1, p0)"
    shared = join(([2, 4, 16], []), ([16], [8]), Reorder(0, (2, 4, 16), (2, 0, 1)))
    assert shared.sizes == ([16], [2, 4])
    assert shared.first == {p0: p1, p1: p2, p2: p0}
    assert shared.second == {p0: p0, p1: 4 * p1 + p2}
    unchanged, swapped = Reorder(1, (6, 16), (0, 1)), Reorder(1, (6, 16), (1, 0))
    assert join(([16], [6]), ([6, 16], []), unchanged) is None  # as they are: no nest
    assert join(([16], [6]), ([6, 16], []), swapped).sizes == ([16], [6])


def test_join_through_pieces_of_a_flat_loop():
    cut = Reorder(1, (8, 16), (1, 0))
    shared = join(([16], [8]), ([128], []), cut)
    assert shared.sizes == ([16], [8]) and shared.second == {p0: p0 + 16 * p1}
    assert cut.describe(([128], [])) == "cut to [8, 16] and reordered to (p1, p0)"


def test_ranges_fold_what_pieces_leave_behind():
    ranges = {p0: 16, p1: 8}
    assert simplify_with_ranges(Mod(16 * p1 + p0, 16), ranges) == p0
    assert simplify_with_ranges(sympy.floor((16 * p1 + p0) / 16), ranges) == p1
    assert simplify_with_ranges(Mod(sympy.floor((16 * p1 + p0) / 16), 8), ranges) == p1
    assert simplify_with_ranges(Mod(p0, 8), ranges) == Mod(p0, 8)  # p0 reaches 15
    assert simplify_with_ranges(Mod(p1 * s1 + p0, s1), {p0: s1, p1: s0}) == p0
    assert simplify_with_ranges(sympy.floor((p1 * s1 + p0) / s1), {p0: s1, p1: s0}) == p1


def _transpose_add_sum(x, y):
    z = x.t() + y
    return z, z.sum(0)


def _pointwise_transpose(x):
    y = x.sin()
    return y, y.t().contiguous() * 2


#: each compiles to one kernel only with a node's loops reordered; shapes for two calls
PROGRAMS = {
    "column_softmax": (lambda x: torch.softmax(x * 2.0, dim=0), [[(16, 24)], [(20, 12)]]),
    "column_sum_broadcast": (lambda x: x - x.sum(0), [[(16, 24)], [(9, 13)]]),
    "column_sum_3d": (lambda x: x.exp() / x.exp().sum((0, 1)), [[(3, 5, 8)], [(4, 6, 10)]]),
    "transpose_add_sum": (_transpose_add_sum, [[(24, 16), (16, 24)], [(7, 5), (5, 7)]]),
    "pointwise_transpose": (_pointwise_transpose, [[(16, 24)], [(6, 10)]]),
    # a flat view of the result: one loop over both dims, cut where its Mod takes it apart
    "flat_view": (lambda x: (x - x.sum(0)).view(-1) * 2, [[(16, 24)], [(9, 13)]]),
    "flat_view_transposed": (lambda x: (x.t() - x.sum(1)).reshape(-1), [[(16, 24)], [(9, 13)]]),
}


@pytest.mark.usefixtures("isolated_runtime")
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
@pytest.mark.parametrize("name", PROGRAMS)
def test_reordered_fusion_is_one_kernel_and_matches_eager(name, dynamic, tmp_path, monkeypatch):
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    fn, calls = PROGRAMS[name]
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="mind", dynamic=dynamic)
    gen = torch.Generator().manual_seed(0)
    with no_fallback():
        for shapes in calls if dynamic else calls[:1]:
            inputs = [torch.randn(s, generator=gen) for s in shapes]
            torch.testing.assert_close(compiled(*inputs), fn(*inputs))
    assert len(kernels(tmp_path)) == 1, kernels(tmp_path)


@pytest.mark.usefixtures("isolated_runtime")
def test_training_step_fuses_the_bias_gradient_with_its_producer(capsys):
    """Linear, LayerNorm, GELU, Linear over a [3, 5, 16] batch: a linear's bias gradient is a
    column sum over the batch dims of the row-major gradient GELU's backward computes; with the
    GELU backward's loops reordered they are one kernel. Loss and every gradient match eager."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(16, 24), torch.nn.LayerNorm(24), torch.nn.GELU(), torch.nn.Linear(24, 8)
    )
    with torch.no_grad():  # weights and biases away from LayerNorm's ones and zeros
        for p in model[1].parameters():
            p.normal_()
    reference = copy.deepcopy(model)
    x, g = torch.randn(3, 5, 16, requires_grad=True), torch.randn(3, 5, 8)
    x_ref = x.detach().clone().requires_grad_()

    def step(m, x):
        loss = (m(x) * g).sum()
        loss.backward()
        return loss

    torch._dynamo.reset()
    mind.set_logs("fusion")
    try:
        with no_fallback():
            loss = torch.compile(step, backend="mind")(model, x)
    finally:
        mind.set_logs("")
    torch.testing.assert_close(loss, step(reference, x_ref))
    torch.testing.assert_close(x.grad, x_ref.grad)
    for (name, got), want in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(got.grad, want.grad, msg=name)
    fusion = [x for x in capsys.readouterr().err.splitlines() if "reordered" in x]
    assert any(x.startswith("[mind.fusion] @graph0_backward: remark: ") for x in fusion), fusion
