"""Scatters end to end against eager: scatter, scatter_add, scatter_reduce, index_put and
index_add run as mind's own kernels (a copy, then a scatter kernel that stores or adds
atomically), on CPU through Triton's interpreter; what Inductor keeps in ATen stays there."""

from __future__ import annotations

import copy

import pytest
import torch
from programs import no_fallback

pytestmark = pytest.mark.usefixtures("isolated_runtime")


def compiled(fn, *args, dynamic=None, tmp_path, monkeypatch):
    """`fn(*args)` compiled by mind (no fallback allowed) and the source of every module it
    generated."""
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    with no_fallback():
        out = torch.compile(fn, backend="mind", dynamic=dynamic)(*args)
    return out, "\n".join(p.read_text() for p in sorted(tmp_path.glob("*.py")))


def _unique_rows(n: int, rows: int, cols: int) -> torch.Tensor:
    """An index of `rows` x `cols` into a dim of `n`, no two rows alike in a column (a plain
    scatter whose result does not depend on which duplicate wins)."""
    return torch.stack([torch.randperm(n)[:rows] for _ in range(cols)], dim=1)


def _dupes(n: int, *shape: int) -> torch.Tensor:
    """An index full of duplicates (each position hit several times)."""
    return torch.randint(0, n, shape) % max(1, n // 2)


#: name -> (fn, inputs, what the scatter kernel must hold)
CASES = {
    "scatter_dim0": (
        lambda x, i, s: x.scatter(0, i, s),
        lambda: (torch.randn(8, 5), _unique_rows(8, 4, 5), torch.randn(6, 5)),
        "tl.store(",
    ),
    "scatter_dim1_value": (
        lambda x, i: x.scatter(1, i, 2.5),
        lambda: (torch.randn(4, 7), _unique_rows(7, 3, 4).t().contiguous()),
        "tl.store(",
    ),
    "scatter_add_dupes": (
        lambda x, i, s: x.scatter_add(0, i, s),
        lambda: (torch.randn(8, 16), _dupes(8, 12, 16), torch.randn(12, 16)),
        "tl.atomic_add(",
    ),
    "scatter_add_dim_last_3d": (
        lambda x, i, s: x.scatter_add(-1, i, s),
        lambda: (torch.randn(2, 3, 9), _dupes(9, 2, 3, 20), torch.randn(2, 3, 20)),
        "tl.atomic_add(",
    ),
    "scatter_add_int32": (
        lambda x, i, s: x.scatter_add(1, i, s),
        lambda: (
            torch.randint(-5, 5, (3, 6), dtype=torch.int32),
            _dupes(6, 3, 10),
            torch.randint(-5, 5, (3, 10), dtype=torch.int32),
        ),
        "tl.atomic_add(",
    ),
    "scatter_add_f16": (
        lambda x, i, s: x.scatter_add(0, i, s),
        lambda: (torch.randn(6, 4).half(), _dupes(6, 5, 4), torch.randn(5, 4).half()),
        "tl.atomic_add(",
    ),
    "scatter_reduce_sum": (
        lambda x, i, s: x.scatter_reduce(0, i, s, "sum"),
        lambda: (torch.randn(10), _dupes(10, 30), torch.randn(30)),
        "tl.atomic_add(",
    ),
    "scatter_reduce_sum_exclude_self": (
        lambda x, i, s: x.scatter_reduce(1, i, s, "sum", include_self=False),
        lambda: (torch.randn(3, 10), _dupes(10, 3, 7), torch.randn(3, 7)),
        "tl.atomic_add(",
    ),
    "scatter_add_0d_self": (
        lambda x, i, s: x.scatter_add(0, i, s),
        lambda: (torch.tensor(1.5), torch.tensor([0, 0, 0]), torch.randn(3)),
        "tl.atomic_add(",
    ),
    "scatter_add_0d_index": (
        lambda x, i, s: x.scatter_add(0, i, s),
        lambda: (torch.zeros(4), torch.tensor(2), torch.tensor(5.0)),
        "tl.atomic_add(",
    ),
    "index_put_accumulate_negative": (
        lambda x, i, v: torch.index_put(x, (i,), v, accumulate=True),
        lambda: (torch.randn(6, 4), torch.tensor([0, -1, 5, -6, 2, 2, -4]), torch.randn(7, 4)),
        "tl.atomic_add(",
    ),
    "index_put_unique": (
        lambda x, i, v: torch.index_put(x, (i,), v),
        lambda: (torch.randn(6, 4), torch.tensor([4, -1, 0]), torch.randn(3, 4)),
        "tl.store(",
    ),
    "index_put_broadcast_indices_and_slice": (
        lambda x, a, b, v: torch.ops.aten.index_put(x, [a, None, b], v, True),
        lambda: (
            torch.randn(5, 3, 7),
            torch.randint(-5, 5, (4, 1)),
            torch.randint(0, 7, (2,)),
            torch.randn(2, 3),  # broadcast to [4, 2, 3]
        ),
        "tl.atomic_add(",
    ),
    "index_put_adjacent_indices": (
        lambda x, a, b, v: torch.ops.aten.index_put(x, [None, a, b], v, True),
        lambda: (torch.randn(2, 5, 6), _dupes(5, 4), _dupes(6, 4), torch.randn(2, 4)),
        "tl.atomic_add(",
    ),
    "index_add_alpha": (
        lambda x, i, s: x.index_add(1, i, s, alpha=2),
        lambda: (torch.randn(3, 5), torch.tensor([0, 4, 4, 1, 0, 0]), torch.randn(3, 6)),
        "tl.atomic_add(",
    ),
    "setitem_mask_scalar": (
        lambda x: torch.index_put(x, (x > 0,), torch.tensor(-1.0), accumulate=True),
        lambda: (torch.randn(5, 3),),
        "tl.where(",
    ),
    "bf16_scatter": (
        lambda x, i, s: x.scatter(0, i, s),
        lambda: (torch.randn(8, 5).bfloat16(), _unique_rows(8, 4, 5), torch.randn(4, 5).bfloat16()),
        "tl.store(",
    ),
    "noncontiguous_inputs": (
        lambda x, i, s: x.t().scatter_add(1, i.t(), s[:, ::2]),
        lambda: (torch.randn(9, 4), _dupes(9, 5, 4), torch.randn(4, 10)),
        "tl.atomic_add(",
    ),
}


#: duplicates add up in another order than eager's: an f16 sum may differ in its last bit
TOLERANCE = {torch.float16: {"rtol": 1e-2, "atol": 1e-2}}


@pytest.mark.parametrize("name", CASES)
def test_matches_eager_in_own_kernels(name, tmp_path, monkeypatch):
    fn, make, holds = CASES[name]
    torch.manual_seed(0)
    inputs = make()
    out, source = compiled(fn, *inputs, tmp_path=tmp_path, monkeypatch=monkeypatch)
    expected = fn(*inputs)
    torch.testing.assert_close(out, expected, **TOLERANCE.get(expected.dtype, {}))
    assert out.stride() == expected.stride()
    assert holds in source
    assert "torch.ops.aten" not in source  # no ATen call: the scatter is mind's kernel


#: what Inductor keeps in ATen (and why): a fallback call in mind's module, the right answer
ATEN = {
    "prod": (lambda x, i, s: x.scatter_reduce(0, i, s, "prod"), torch.float32),
    "amax": (lambda x, i, s: x.scatter_reduce(0, i, s, "amax"), torch.float32),
    "mean": (lambda x, i, s: x.scatter_reduce(0, i, s, "mean"), torch.float32),
    "int64_sum": (lambda x, i, s: x.scatter_add(0, i, s), torch.int64),
}


@pytest.mark.parametrize("name", ATEN)
def test_what_inductor_keeps_in_aten(name, tmp_path, monkeypatch):
    fn, dtype = ATEN[name]
    inputs = (torch.randn(6, 3).to(dtype), _dupes(6, 5, 3), torch.randn(5, 3).to(dtype))
    out, source = compiled(fn, *inputs, tmp_path=tmp_path, monkeypatch=monkeypatch)
    torch.testing.assert_close(out, fn(*inputs))
    assert "tl.atomic_add(" not in source and "torch.ops.aten." in source


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, i, s: x.index_add(1, i, s),
        lambda x, i, s: x.scatter_add(1, i.expand(s.shape), s),
        lambda x, i, s: x.t().index_put((i,), s.t(), accumulate=True).t(),
    ],
    ids=["index_add", "scatter_add", "index_put"],
)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "f16"])
def test_a_16_bit_accumulation_on_cpu_adds_in_f32(fn, dtype, tmp_path, monkeypatch):
    """On CPU eager accumulates 16-bit floats in f32; Triton's interpreter has no bf16 atomics
    and rounds each f16 addition (a GPU's atomics round so too, as eager's CUDA kernels: see
    the GPU test), where Inductor runs a bf16 scatter in ATen: mind adds into an f32 copy and
    rounds once. ATen's `index_put_` on a CPU, which a decomposed `index_add` becomes, rounds
    each addition to bf16: the program fuzzer's 257 values summed into one element came out
    1.0 off the exact 24.6; an f16 `index_add` of 1031 values, 45 off 1694. Here every row's
    257 values add up within one rounding of the exact sum."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, 1, generator=gen).to(dtype)
    s = (torch.randn(4, 257, generator=gen) + 0.1).to(dtype)
    i = torch.zeros(257, dtype=torch.long)
    out, source = compiled(fn, x, i, s, tmp_path=tmp_path, monkeypatch=monkeypatch)
    exact = fn(x.double(), i, s.double())
    assert "tl.atomic_add(" in source and "torch.ops.aten" not in source
    assert out.dtype == dtype
    ulp = torch.finfo(dtype).eps / 2  # one rounding
    assert ((out.double() - exact).abs() <= exact.abs() * ulp + 1e-6).all()


def test_deterministic_mode_runs_scatters_in_aten(tmp_path, monkeypatch):
    """As Inductor: torch.use_deterministic_algorithms keeps every scatter in ATen (atomics
    land in any order); the pointwise work around it stays mind's."""
    fn = lambda x, i, s: x.scatter_add(0, i, s).sin()  # noqa: E731
    inputs = (torch.randn(8, 4), _dupes(8, 6, 4), torch.randn(6, 4))
    previous = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        out, source = compiled(fn, *inputs, tmp_path=tmp_path, monkeypatch=monkeypatch)
    finally:
        torch.use_deterministic_algorithms(previous)
    torch.testing.assert_close(out, fn(*inputs))
    assert "aten.scatter_add.default" in source and "tl.atomic_add(" not in source
    assert "def triton_poi_fused_sin_0(" in source


def test_dynamic_shapes_compile_once(tmp_path, monkeypatch):
    """`dynamic=True`: one compiled graph (sizes as symbols) serves three shapes."""
    fn = lambda x, i, s: x.index_add(0, i, s) * 2  # noqa: E731
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    compiled_fn = torch.compile(fn, backend="mind", dynamic=True)
    with no_fallback():
        for n, m in ((8, 5), (11, 9), (6, 13)):
            inputs = (torch.randn(n, 3), _dupes(n, m), torch.randn(m, 3))
            torch.testing.assert_close(compiled_fn(*inputs), fn(*inputs))
    sources = [p.read_text() for p in tmp_path.glob("*.py")]
    assert len(sources) == 1 and "tl.atomic_add(" in sources[0]


def test_out_of_bounds_index_raises(monkeypatch):
    """A scatter's index is checked where Inductor checks it: the kernel asserts, that call
    reruns eagerly and raises as eager does (negative indices too: scatter does not wrap them),
    and the graph stays compiled."""
    fn = lambda x, i, s: x.scatter_add(0, i, s)  # noqa: E731
    for bad in (8, -1):
        torch._dynamo.reset()
        inputs = (torch.zeros(8), torch.tensor([0, bad]), torch.ones(2))
        with pytest.raises(RuntimeError):
            fn(*inputs)
        with pytest.raises(RuntimeError), no_fallback():
            torch.compile(fn, backend="mind")(*inputs)


#: a scatter of one element a row into a fill: a scalar, or values of a tensor
INTO_FILLS = {
    "value": lambda x, i: torch.full_like(x, 0.5).scatter(-1, i, -2.0) * x,
    "tensor": lambda x, i: torch.zeros_like(x).scatter(1, i, x[:, :1] * 3) + x,
}


@pytest.mark.parametrize("name", INTO_FILLS)
def test_a_scatter_into_a_fill_is_a_select(name, tmp_path, monkeypatch):
    """`zeros.scatter(dim, index, v)` with one index a row (a loss's one-hot): one kernel that
    selects v where the index picks the position, fused with what uses it; none fills a buffer
    or writes through it."""
    fn = INTO_FILLS[name]
    x, i = torch.randn(6, 9), torch.randint(0, 9, (6, 1))
    out, source = compiled(fn, x, i, tmp_path=tmp_path, monkeypatch=monkeypatch)
    torch.testing.assert_close(out, fn(x, i))
    assert source.count("@triton.jit") == 1 and "tl.where(" in source


def test_cross_entropy_gradients_with_ignored_targets():
    """Cross entropy's backward scatters -1 into zeros at each target (a select, above); rows
    whose target is ignore_index get no gradient."""
    torch.manual_seed(0)
    logits = torch.randn(8, 33, requires_grad=True)
    target = torch.randint(0, 33, (8,))
    target[[1, 5]] = -100
    want = logits.detach().clone().requires_grad_()
    torch.nn.functional.cross_entropy(want, target).backward()
    torch._dynamo.reset()
    with no_fallback():
        torch.compile(torch.nn.functional.cross_entropy, backend="mind")(logits, target).backward()
    torch.testing.assert_close(logits.grad, want.grad)
    assert not logits.grad[[1, 5]].any()


# -- training: the backward of gather, index_select and embedding scatters ---------------------
class Lookup(torch.nn.Module):
    """Embedding, index_select and gather of parameters: their gradients are scatters."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Embedding(10, 4, padding_idx=0)
        self.weight = torch.nn.Parameter(torch.randn(7, 4))
        self.scale = torch.nn.Parameter(torch.randn(5, 6))

    def forward(self, tokens, rows, cols):
        a = self.table(tokens).sum(1)
        b = torch.index_select(self.weight, 0, rows)
        c = torch.gather(self.scale, 1, cols)
        return (a * b).sum() + c.pow(2).sum()


def test_training_step_backward_scatters(tmp_path, monkeypatch):
    torch.manual_seed(0)
    model = Lookup()
    reference = copy.deepcopy(model)
    tokens = torch.tensor([[1, 2, 2, 0], [3, 3, 3, 9], [0, 0, 1, 5]])
    rows, cols = torch.tensor([6, 0, 6]), torch.randint(0, 6, (5, 8))

    def step(m):
        loss = m(tokens, rows, cols)
        loss.backward()
        return loss

    loss, source = compiled(step, model, tmp_path=tmp_path, monkeypatch=monkeypatch)
    torch.testing.assert_close(loss, step(reference))
    for (name, got), want in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(got.grad, want.grad, msg=name)
    backward = "\n".join(p.read_text() for p in tmp_path.glob("*backward*.py"))
    assert backward.count("tl.atomic_add(") == 3  # embedding, index_select, gather
    assert "torch.ops.aten" not in backward
