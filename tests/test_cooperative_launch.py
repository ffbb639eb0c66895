"""A cooperative kernel's launcher (runtime/cooperative.py), without a GPU: the groups it sizes
from a compiled kernel's occupancy, its refusal when a group cannot be resident, and the
interpreter's case. The kernels' numbers are checked on a GPU (test_gpu_kernels.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from mind.runtime.cooperative import Cooperation, blocks_per_sm
from mind.runtime.errors import KernelError

#: an H100's limits, as torch.cuda.get_device_properties gives them
H100 = SimpleNamespace(
    name="NVIDIA H100 80GB HBM3",
    multi_processor_count=132,
    regs_per_multiprocessor=65536,
    max_threads_per_multi_processor=2048,
    shared_memory_per_multiprocessor=233472,
)


def compiled(regs: int, warps: int, shared: int = 0):
    return SimpleNamespace(n_regs=regs, metadata=SimpleNamespace(num_warps=warps, shared=shared))


@pytest.mark.parametrize(
    "regs, warps, shared, expected",
    [
        (64, 4, 0, 8),  # registers: 64 x 128 threads a program
        (93, 4, 0, 5),  # 93 rounds up to 96 a thread (256 a warp)
        (32, 4, 0, 16),  # threads: 2048 / 128
        (32, 4, 100 * 1024, 2),  # shared memory, with 1 KiB the hardware keeps a program
        (255, 32, 0, 0),  # more registers than an SM has: the program cannot run at all
    ],
)
def test_programs_an_sm_follow_cudas_occupancy_rules(regs, warps, shared, expected):
    assert blocks_per_sm(compiled(regs, warps, shared), H100) == expected


def test_groups_fit_the_gpu_and_a_group_too_large_is_refused():
    assert Cooperation(splits=16, partials=2).groups(compiled(64, 4), H100, "k") == 66
    small = SimpleNamespace(**{**vars(H100), "multi_processor_count": 2})
    with pytest.raises(KernelError, match=r"its 32 cooperating programs cannot all be resident"):
        Cooperation(splits=32, partials=2).groups(compiled(64, 4), small, "k")


def test_the_interpreter_runs_groups_of_one_program_only():
    calls = []
    launch = Cooperation(splits=1, partials=3).interpreted(lambda *a: calls.append(a))
    launch(1, 1024, 1, None, "x")
    ((gx, gy, gz, _, x, workspace, semaphores, groups),) = calls
    assert (gx, gy, gz, x, groups) == (1, 1, 1, "x", 1)
    assert workspace.numel() == 2 * 3 and torch.equal(semaphores, torch.zeros(1, dtype=torch.int32))
    with pytest.raises(KernelError, match="runs programs one after another"):
        Cooperation(splits=4, partials=1).interpreted(lambda *a: None)
