"""Launches through torch's C++ launcher (runtime/static_launch.py): which of a launch's
arguments the cubin takes, read from a kernel Triton compiles for an H200 (no GPU needed to
compile), the launch record another process binds it from, and, on a GPU, launches that bypass
Triton's launcher and give eager's numbers."""

from __future__ import annotations

import json

import pytest
import torch
import triton
import triton.language as tl
from mind.runtime.static_launch import arguments, read, record, restore
from programs import no_fallback
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


@triton.jit
def gather(in_ptr0, out_ptr0, xnumel, ks0, XBLOCK: tl.constexpr):
    x = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)
    mask = x < xnumel
    tl.store(out_ptr0 + x, tl.load(in_ptr0 + x * ks0, mask), mask)


#: the parameters of `gather` a launch passes
SIGNATURE = {"in_ptr0": "*fp32", "out_ptr0": "*fp32", "xnumel": "i32", "ks0": "i32"}


def compiled_gather():
    """`gather` compiled for an H100, with `ks0` 1."""
    source = ASTSource(
        gather, {**SIGNATURE, "XBLOCK": "constexpr"}, constexprs={"XBLOCK": 128, "ks0": 1}
    )
    return triton.compile(source, target=GPUTarget("cuda", 90, 32))


def test_a_launch_passes_what_the_cubin_takes():
    """`ks0` is 1 when compiled, so Triton makes it a constant, as it does the constexpr: the
    cubin takes the pointers and `xnumel`, then one null pointer per scratch parameter."""
    signature = SIGNATURE
    kernel = read(compiled_gather())
    types, pick = arguments(kernel, len(signature))
    scratch = len(types) - 3
    assert types == "OOi" + "O" * scratch
    a, b = object(), object()
    assert pick((a, b, 1000, 1)) == (a, b, 1000, *[None] * scratch)
    assert arguments(kernel, 2) is None  # launches that pass too few arguments: not bound


def test_a_launch_record_restores_what_torchs_launcher_read():
    """A kernel's launch record is JSON; restored (in another process), it is torch's kernel
    object as read from the compiled kernel, its cubin included, and binds the same arguments."""
    compiled = compiled_gather()
    kernel = read(compiled)
    kept = json.loads(json.dumps(record(kernel)))
    restored = restore(kept)
    assert type(restored) is type(kernel) and vars(restored) == vars(kernel)
    assert restored.cubin_raw == compiled.asm["cubin"] and restored.name == "gather"
    a, b = object(), object()
    for kernel_ in (kernel, restored):
        types, pick = arguments(kernel_, len(SIGNATURE))
        assert types.startswith("OOi") and pick((a, b, 1000, 1))[:3] == (a, b, 1000)


def test_a_kernel_whose_state_is_not_json_keeps_no_record():
    """What JSON cannot hold as it is (a tuple, an object) is no record: the kernel compiles in
    the next process too, rather than bind from a state that reads back otherwise."""
    kernel = read(compiled_gather())
    kernel.arg_names = tuple(kernel.arg_names)
    assert record(kernel) is None
    kernel.arg_names = list(kernel.arg_names)
    kernel.function = object()
    assert record(kernel) is None


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.usefixtures("isolated_runtime", "compiled_for_the_gpu")
@pytest.mark.parametrize("setting", [None, "0"], ids=["default", "off"])
@pytest.mark.parametrize("rows", [1, 64])
def test_launches_bypass_tritons_launcher_unless_turned_off(rows, setting, monkeypatch):
    """By default every launch after load goes through torch's launcher (Triton's `CudaLauncher`
    is not called); MIND_STATIC_LAUNCHER=0 launches through Triton's. Both give eager's numbers;
    one row makes a size of 1, which Triton specializes."""
    from triton.backends.nvidia.driver import CudaLauncher

    if setting is None:
        monkeypatch.delenv("MIND_STATIC_LAUNCHER", raising=False)
    else:
        monkeypatch.setenv("MIND_STATIC_LAUNCHER", setting)
    fn = lambda x: torch.softmax(x * 2, -1).sum(0) + 1  # noqa: E731
    x = torch.randn(rows, 256, device="cuda")
    compiled = torch.compile(fn, backend="mind")
    with no_fallback():
        compiled(x)
    calls = []
    call = CudaLauncher.__call__
    monkeypatch.setattr(CudaLauncher, "__call__", lambda *a: calls.append(a) or call(*a))
    for _ in range(3):
        torch.testing.assert_close(compiled(x), fn(x), rtol=1e-4, atol=1e-4)
    assert (calls == []) == (setting is None)
