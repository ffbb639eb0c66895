"""On a CUDA GPU: scatters compiled for the device (not interpreted), against eager: atomic adds
in f32 and, from sm90 on, bf16 (an older GPU keeps bf16 accumulation in ATen, as Inductor does),
and a training step whose backward scatters. Skipped without CUDA."""

from __future__ import annotations

import pytest
import torch
from programs import ON_GPU, no_fallback

pytestmark = [*ON_GPU, pytest.mark.usefixtures("isolated_runtime")]


def compiled(fn, *args, tmp_path, monkeypatch):
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    with no_fallback():
        out = torch.compile(fn, backend="mind")(*args)
    return out, "\n".join(p.read_text() for p in sorted(tmp_path.glob("*.py")))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_scatter_add_and_index_put_accumulate(dtype, tmp_path, monkeypatch):
    def fn(x, i, s, j, v):
        return x.scatter_add(0, i, s), x.index_put((j,), v, accumulate=True)

    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(512, 64, device="cuda", generator=gen).to(dtype)
    i = torch.randint(0, 100, (4096, 64), device="cuda", generator=gen)
    s = torch.randn(4096, 64, device="cuda", generator=gen).to(dtype)
    j = torch.randint(-512, 512, (4096,), device="cuda", generator=gen)
    v = torch.randn(4096, 64, device="cuda", generator=gen).to(dtype)
    out, source = compiled(fn, x, i, s, j, v, tmp_path=tmp_path, monkeypatch=monkeypatch)
    want = fn(x.double(), i, s.double(), j, v.double())
    tol = {torch.float32: 1e-4, torch.float16: 5e-2, torch.bfloat16: 2e-1}[dtype]
    for got, w in zip(out, want):
        torch.testing.assert_close(got.double(), w, rtol=tol, atol=tol)
    native = dtype != torch.bfloat16 or torch.cuda.get_device_capability() >= (9, 0)
    assert (source.count("tl.atomic_add(") == 2) == native


def test_embedding_training_step(tmp_path, monkeypatch):
    torch.manual_seed(0)
    table = torch.nn.Embedding(1000, 64).cuda()
    reference = torch.nn.Embedding(1000, 64).cuda()
    reference.load_state_dict(table.state_dict())
    tokens = torch.randint(0, 1000, (32, 128), device="cuda")

    def step(m):
        loss = m(tokens).pow(2).mean()
        loss.backward()
        return loss

    loss, source = compiled(step, table, tmp_path=tmp_path, monkeypatch=monkeypatch)
    torch.testing.assert_close(loss, step(reference))
    torch.testing.assert_close(table.weight.grad, reference.weight.grad, rtol=1e-4, atol=1e-6)
    assert "tl.atomic_add(" in source
