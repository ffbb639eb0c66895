"""End to end on CPU (Triton's interpreter): every benchmark pattern, at small sizes, through
torch.compile(backend="mind") matches eager with no fallback, and the fused patterns emit exactly
one kernel; a small MLP's training step gives eager's loss and gradients."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from programs import assert_same_step, compile_strictly, mlp_training_step

import mind
from benchmarks.cases import CASES, TOLERANCE, make_inputs

ONE_KERNEL = {
    "gelu_tanh_2^26",
    "layer_norm_128x512",
    "layer_norm_16384x4096",
    "softmax_16384x4096",
    "softmax_1024x65536",
    "rms_norm_bf16_16384x4096",
    "add_transpose_8192x8192",
    "silu_mul_bf16_8192x28672",
    "seed_4x128",
    "seed_16384x4096",
    "column_sum_8192x8192",
}


def kernels(dump: Path) -> list[str]:
    """The kernels of every graph, read from the dumped triton IR."""
    names = []
    for path in sorted(dump.glob("*.triton")):
        names += [
            op.symbol
            for op in mind.parse(path.read_text(), path.name).ops
            if op.name == "triton.kernel"
        ]
    return names


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_pattern_matches_eager(case, tmp_path, monkeypatch):
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    inputs = make_inputs(case, "cpu", small=True)
    got = compile_strictly(case.fn, *inputs)
    want = case.fn(*inputs)
    tol = case.tol or TOLERANCE[want.dtype]
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)
    if case.name in ONE_KERNEL:
        assert len(kernels(tmp_path)) == 1, kernels(tmp_path)


def test_seed_kernel_is_named_like_inductors(tmp_path, monkeypatch):
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    compile_strictly(CASES[0].fn, *make_inputs(CASES[0], "cpu", small=True))
    assert kernels(tmp_path) == ["triton_per_fused_add_mul_relu_sum_0"]


def test_mlp_training_step_matches_eager():
    step, model, reference, x, y = mlp_training_step()
    assert_same_step(compile_strictly(step, model, x, y), step, model, reference, x, y)
