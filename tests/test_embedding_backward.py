"""mind's rule for a 16-bit embedding table's gradient (passes/aten_rules/embedding.py): its sums
are in f32 over the rows the indices touch, and each is rounded once, as in torch's rule, which
sums into an f32 table as large as the embedding. Run as a function, and compiled by mind on the
CPU (Triton's interpreter), it gives the reference's bits: the f32 sums of the kept indices'
rows, rounded; on CUDA, up to the order of its atomic adds. (Eager's CPU kernel sums in bf16 and
is not the reference.)"""

from __future__ import annotations

import pytest
import torch
from mind.passes.aten_rules.embedding import _embedding_dense_backward
from programs import CUDA, no_fallback

aten = torch.ops.aten

#: name -> (dtype, indices' shape, table rows, padding_idx, out-of-range indices planted)
CASES = {
    "bf16_padding": (torch.bfloat16, (4, 16), 1000, 3, False),
    "f16_flat_no_padding": (torch.float16, (50,), 300, -1, False),
    "bf16_padding_row_0_and_out_of_range": (torch.bfloat16, (3, 7), 64, 0, True),
}


@pytest.fixture(params=["cpu", CUDA])
def device(request) -> str:
    if request.param == "cuda":
        request.getfixturevalue("compiled_for_the_gpu")
    return request.param


def _inputs(case: str, device: str):
    dtype, shape, rows, padding_idx, out_of_range = CASES[case]
    gen = torch.Generator().manual_seed(0)
    indices = torch.randint(0, rows // 10, shape, generator=gen)  # many duplicates
    flat = indices.view(-1)
    flat[:3] = padding_idx if padding_idx >= 0 else 1
    if out_of_range:
        flat[3], flat[4] = rows, -5
    grad = torch.randn(*shape, 24, generator=gen).to(dtype)
    return grad.to(device), indices.to(device), rows, padding_idx


def _reference(grad, indices, rows, padding_idx):
    """The kept indices' rows summed in f32, one index after another, then rounded."""
    flat, g = indices.reshape(-1), grad.reshape(indices.numel(), -1).float()
    keep = (flat >= 0) & (flat < rows) & (flat != padding_idx)
    table = torch.zeros(rows, g.shape[1], device=grad.device)
    return table.index_put_((flat[keep],), g[keep], accumulate=True).to(grad.dtype)


@pytest.mark.parametrize("case", CASES)
def test_the_rule_gives_the_f32_sums_rounded(case):
    grad, indices, rows, padding_idx = _inputs(case, "cpu")
    got = _embedding_dense_backward(grad, indices, rows, padding_idx, False)
    assert got.dtype == grad.dtype and got.shape == (rows, 24)
    torch.testing.assert_close(got, _reference(grad, indices, rows, padding_idx), rtol=0, atol=0)
    if padding_idx >= 0:
        assert not got[padding_idx].any()


@pytest.mark.parametrize("case", CASES)
def test_compiled_by_mind_gives_the_f32_sums_rounded(case, device):
    grad, indices, rows, padding_idx = _inputs(case, device)

    def backward(g, i):
        return aten.embedding_dense_backward(g, i, rows, padding_idx, False)

    with no_fallback():
        got = torch.compile(backward, backend="mind", dynamic=False)(grad, indices)
    want = _reference(grad, indices, rows, padding_idx)
    # on CUDA the atomic adds land in any order: an f32 sum's last bits, then its rounding
    tol = 0 if device == "cpu" else 1e-2
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)


def test_a_bf16_embedding_trains_through_the_rule(device):
    """An nn.Embedding's weight gradient in a bf16 training step, against the reference's."""
    torch.manual_seed(0)
    emb = torch.nn.Embedding(500, 32, padding_idx=1).to(device, torch.bfloat16)
    indices = torch.randint(0, 40, (4, 12), device=device)

    def step(i):
        return (emb(i).float() ** 2).sum()

    with no_fallback():
        torch.compile(step, backend="mind")(indices).backward()
    grad = 2 * emb(indices).detach().float()
    want = _reference(grad.to(torch.bfloat16), indices, 500, 1)
    tol = 0 if device == "cpu" else 1e-2
    torch.testing.assert_close(emb.weight.grad, want, rtol=tol, atol=tol)


def test_dynamic_sizes_take_the_rule_under_a_guard(tmp_path, monkeypatch):
    """With symbolic sizes the rule guards on fewer indices than rows: no f32 table as long as
    the gradient's in the aten graph, and the numbers of the f32 sums."""
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    grad, indices, rows, padding_idx = _inputs("bf16_padding", "cpu")

    def backward(g, i):
        return aten.embedding_dense_backward(g, i, rows, padding_idx, False)

    with no_fallback():
        got = torch.compile(backward, backend="mind", dynamic=True)(grad, indices)
    torch.testing.assert_close(got, _reference(grad, indices, rows, padding_idx), rtol=0, atol=0)
    (aten_text,) = [p.read_text() for p in tmp_path.glob("*_forward.00.aten")]
    fulls = [line.rsplit(" : ", 1)[1] for line in aten_text.splitlines() if "aten.full" in line]
    (table,) = [t for t in fulls if t.startswith("bf16[")]  # the gradient, zeros where untouched
    table_rows = table.removeprefix("bf16[").split(",")[0]
    assert not [t for t in fulls if t.startswith(f"f32[{table_rows},")], fulls
