"""Combo kernels (passes/combo_kernels.py, codegen/combo.py): independent pointwise nodes run as
one kernel, one launch. Against eager through Triton's interpreter, and compiled for an H100 on
this CPU (the interpreter runs a Python `if` on a program id that the compiler might not)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from mind.runtime.compile_pool import exec_source
from mind.runtime.launch import deferred
from mind.tools.mind_translate import translate
from programs import no_fallback
from test_gpu_compile import H100

LIT = Path(__file__).parent.parent / "lit_tests" / "combo_kernels" / "combo.scheduled"


def launches(source: str) -> list[str]:
    """The kernels the emitted `call`s launch, in order."""
    return re.findall(r"^    (triton_\w+)_launch\(", source, re.M)


def test_independent_ops_launch_as_one_kernel(tmp_path, monkeypatch):
    """Four outputs of three shapes, none reading another: one kernel, against eager (the sin
    and the cast read `c` alike, and fuse into one node: three parts)."""

    def fn(a, b, c):
        return a.exp(), b.relu() * 2, c.sin(), (c + 1).to(torch.float16)

    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    args = (torch.randn(100), torch.randn(32, 48), torch.randn(7, 3))
    with no_fallback():
        got = torch.compile(fn, backend="mind")(*args)
    for g, want in zip(got, fn(*args)):
        torch.testing.assert_close(g, want)
    (source,) = [p.read_text() for p in tmp_path.glob("*.py")]
    (kernel,) = launches(source)
    assert kernel.startswith("triton_combo_fused_")
    assert source.count("    if ") == 3  # a program range per node


def test_nodes_join_where_they_could_run_and_their_buffers_live_no_longer(tmp_path, monkeypatch):
    """`y` reads the matmul's result, so it runs after the matmul; `z` could run with `x`, but
    moved up past the matmul its buffer would live beside the matmul's: it runs with `y`."""

    def fn(a, b):
        x = a.exp()
        m = a @ a.T
        y = m.relu()
        z = b.cos()
        return x, y, z

    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    args = (torch.randn(8, 8), torch.randn(16))
    with no_fallback():
        got = torch.compile(fn, backend="mind")(*args)
    for g, want in zip(got, fn(*args)):
        torch.testing.assert_close(g, want)
    (source,) = [p.read_text() for p in tmp_path.glob("*.py")]
    assert [k.split("_")[1] for k in launches(source)] == ["poi", "combo"]
    call = source[source.index("def call(") :]
    assert call.index("triton_poi_fused_exp") < call.index("aten_mm_default(")
    assert call.index("aten_mm_default(") < call.index("triton_combo_fused_cos_relu")


def test_combo_kernels_compile_for_the_gpu(tmp_path, monkeypatch):
    """The lit test's graphs, retargeted to cuda:0, through to-triton: each kernel compiles."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    text = LIT.read_text().replace("cpu", "cuda:0")
    for k, chunk in enumerate(text.split("// -----")):
        source = translate(chunk, "combo.scheduled", "combo-kernels,to-triton")
        assert "if (pid >= 1) & (pid < 2):" in source
        path = tmp_path / f"combo{k}.py"
        path.write_text(source)
        with deferred() as bindings:
            exec_source(source, str(path), {"__name__": f"combo{k}"})
        assert any("combo" in b.name for b in bindings)
        for binding in bindings:
            binding.precompile(H100)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_an_optimizer_step_on_the_gpu_matches_eager():
    """AdamW over tensors of many sizes (one past a million elements, one of a single element):
    each combo kernel's parts on their own programs."""
    torch.manual_seed(0)
    sizes = [(1,), (3,), (1000, 1100), (257,), (64, 33), (4096,)]
    params = [torch.randn(s, device="cuda", requires_grad=True) for s in sizes]
    reference = [p.detach().clone().requires_grad_() for p in params]
    for p, q in zip(params, reference):
        p.grad = torch.randn_like(p)
        q.grad = p.grad.clone()
    compiled = torch.optim.AdamW(params, lr=0.01, foreach=True)
    eager = torch.optim.AdamW(reference, lr=0.01, foreach=True)
    step = torch.compile(compiled.step, backend="mind")
    with no_fallback():
        for _ in range(3):
            step()
            eager.step()
    for p, q in zip(params, reference):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-5)
