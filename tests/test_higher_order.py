"""Graphs holding higher-order ops (mind/higher_order.py): `torch.cond`, `while_loop`, compile
regions and flex_attention run as torch runs them, and the ops around them compile as parts of their own,
dumped and checked as any graph, as do a cond's branches; no graph falls back. Against eager, on
CPU tensors."""

import warnings

import pytest
import torch
from programs import no_fallback
from torch._higher_order_ops.while_loop import while_loop

import mind

pytestmark = pytest.mark.usefixtures("isolated_runtime")


def around_cond(p, a, w):
    h = (a @ w).relu()
    out = torch.cond(p.sum() > 0, lambda h: h.sin() * 2, lambda h: h.cos() + 1, (h,))
    return out.sum(1) * 3


def compiled_parts(tmp_path) -> list[str]:
    """The parts mind compiled to kernels: the graphs whose generated module has a kernel."""
    return sorted(
        p.name.split(".")[0] for p in tmp_path.glob("*_part*.py") if "@triton.jit" in p.read_text()
    )


def test_the_ops_around_a_cond_compile_and_either_branch_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    compiled = torch.compile(around_cond, backend="mind")
    with no_fallback():
        for sign in (1, -1):  # one graph serves both branches
            torch.testing.assert_close(compiled(x * sign, x, w), around_cond(x * sign, x, w))
    assert compiled_parts(tmp_path) == [
        "graph0_forward_part0",
        "graph0_forward_part1_false_graph_0",  # the branches compile too
        "graph0_forward_part1_true_graph_0",
        "graph0_forward_part2",
    ]
    assert not list(tmp_path.glob("graph0_forward.*"))  # the whole graph is no graph of mind's


def test_a_training_step_through_a_cond_gives_eagers_gradients(tmp_path, monkeypatch):
    """The backward holds the cond of the branches' backwards: split as the forward is. The
    gradients reach several hundred, summed in another order than eager's: they agree to a few
    units in the last place of the largest, so that is the absolute tolerance (an element near
    zero is off by as much)."""
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    torch.manual_seed(0)
    x = torch.randn(4, 8)
    w, reference = (torch.randn(8, 8).requires_grad_() for _ in range(2))
    with torch.no_grad():
        reference.copy_(w)
    compiled = torch.compile(around_cond, backend="mind")
    with no_fallback():
        for sign in (1, -1):
            compiled(x * sign, x, w).square().sum().backward()
            around_cond(x * sign, x, reference).square().sum().backward()
            scale = reference.grad.abs().max().item()
            torch.testing.assert_close(w.grad, reference.grad, rtol=1e-5, atol=1e-6 * scale)
            w.grad = reference.grad = None
    assert "graph0_backward_part0" in compiled_parts(tmp_path)


def test_a_cond_under_symbolic_sizes():
    compiled = torch.compile(around_cond, backend="mind", dynamic=True)
    with no_fallback():
        for rows in (4, 7):
            x, w = torch.randn(rows, 8), torch.randn(8, 8)
            torch.testing.assert_close(compiled(-x, x, w), around_cond(-x, x, w))


def flattened_around_cond(x, p):
    y = x.reshape(-1) * 2
    z = torch.cond(p, lambda t: t + 1, lambda t: t - 1, (y,))
    return z.unsqueeze(0).permute(1, 0) * 3


def test_a_part_after_a_cond_gets_the_size_symbols_its_inputs_hold_only_in_a_product(
    tmp_path, monkeypatch
):
    """The part after the cond takes a tensor of s0*s1 elements, from which `s0` and `s1`, which
    its kernel takes, cannot be read: the split graph passes them to it as inputs."""
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    compiled = torch.compile(flattened_around_cond, backend="mind", dynamic=True)
    with no_fallback():
        for shape in ((3, 4), (5, 6)):
            x = torch.randn(shape)
            for p in (torch.tensor(True), torch.tensor(False)):
                torch.testing.assert_close(compiled(x, p), flattened_around_cond(x, p))
    (after,) = tmp_path.glob("graph0_forward_part2.00.aten")
    assert ": sym(s" in after.read_text().splitlines()[0]


def test_a_while_loop_between_compiled_ops():
    def fn(a):
        _, out = while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * 2), (torch.tensor(0), a))
        return out.exp() + a

    x = torch.randn(6, 10)
    with no_fallback():
        torch.testing.assert_close(torch.compile(fn, backend="mind")(x), fn(x))


@pytest.mark.skipif(
    not hasattr(torch.compiler, "nested_compile_region"), reason="torch has no compile regions"
)
def test_a_nested_compile_region_compiles_its_body_in_a_training_step(tmp_path, monkeypatch):
    """Its body, called twice, compiles as a graph of its own, as do the backward's; results
    and gradients are eager's."""
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))

    @torch.compiler.nested_compile_region
    def block(x, w):
        return torch.relu(x @ w) * 2 + 1

    fn = lambda x, w: block(block(x, w), w).sum(1)  # noqa: E731
    torch.manual_seed(0)
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    got, want = [x.clone().requires_grad_(), w.clone().requires_grad_()], [x, w]
    want = [t.requires_grad_() for t in want]
    with no_fallback():
        out = torch.compile(fn, backend="mind")(*got)
        out.sum().backward()
    fn(*want).sum().backward()
    torch.testing.assert_close(out, fn(*want))
    for g, r in zip(got, want):
        torch.testing.assert_close(g.grad, r.grad)
    assert any("subgraph" in name for name in compiled_parts(tmp_path))


def test_flex_attention_with_a_score_mod():
    """torch vmaps the score_mod over the scores: it runs as torch runs it."""
    from torch.nn.attention.flex_attention import flex_attention

    def fn(q, k, v):
        bias = lambda s, b, h, i, j: s + (i - j) * 0.1  # noqa: E731
        return flex_attention(q.sin(), k, v, score_mod=bias).cos()

    q, k, v = (torch.randn(1, 2, 16, 8) for _ in range(3))
    with no_fallback(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*flex_attention.*")  # torch's own, eager
        torch.testing.assert_close(torch.compile(fn, backend="mind")(q, k, v), fn(q, k, v))


def test_capturing_a_cond_as_aten_ir_says_the_dialect_holds_no_graphs():
    x = torch.randn(4, 8)
    with pytest.raises(Exception, match="MindError: 'true_graph_0' is a graph, not a tensor"):
        mind.capture(around_cond, x, x, torch.randn(8, 8), stage="aten")
