"""Compiled distributed training on this machine: 2 ranks on the gloo backend, CPU tensors
(mind's kernels run in Triton's interpreter), the same two processes for every test (ranks.py),
each step checked against the same step run eagerly, gradients included (the workers are in
distributed_steps.py); the distributed benchmark's CPU smoke run under torchrun. What needs no
process group: DTensor placements in IR text, the benchmark's overlap arithmetic. On GPUs
(marked gpu): the functional collectives on NCCL, and the benchmark on 2 GPUs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import distributed_steps as steps
import pytest
import torch
import torch.distributed as dist
from ranks import Ranks

from benchmarks.common import CACHE_DIRS
from benchmarks.parallel import STRATEGIES

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(
    not (dist.is_available() and dist.is_gloo_available()), reason="needs torch.distributed, gloo"
)

WORKERS = [
    steps.ddp_step,
    steps.ddp_compiled_autograd_step,
    steps.fsdp2_step,
    steps.simple_fsdp_step,
    steps.functional_collectives,
    steps.interpreted_collectives,
]


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    group = Ranks(tmp_path_factory.mktemp("ranks"))
    yield group
    group.close()


@pytest.mark.parametrize("worker", WORKERS, ids=lambda w: w.__name__)
def test_on_two_ranks_matches_eager(worker, ranks):
    ranks.run(worker)


def test_dtensor_placements_print_and_parse_back():
    from mind.dialects.pyobjects import from_attr, to_attr
    from mind.ir.attributes import format_attr
    from torch.distributed.tensor import Partial, Replicate, Shard

    placements = [Shard(1), Replicate(), Partial("avg")]
    attr = to_attr(placements, {})
    assert format_attr(attr) == (
        "[@torch.distributed.tensor.Shard(1), @torch.distributed.tensor.Replicate(), "
        '@torch.distributed.tensor.Partial("avg")]'
    )
    assert from_attr(attr, {}) == placements


def test_overlap_is_the_time_both_run():
    from benchmarks.distributed import length, overlap, union

    assert union([(3, 5), (0, 2), (1, 4), (7, 8)]) == [(0, 5), (7, 8)]
    comm, compute = [(0, 10), (20, 30)], [(5, 25), (28, 40)]
    assert length(comm) == 20
    assert overlap(comm, compute) == 5 + 5 + 2
    assert overlap(compute, comm) == 12
    assert overlap(comm, [(10, 20)]) == 0


def run_benchmark(tmp_path: Path, *args: str) -> tuple[list[dict], str]:
    """`torchrun -m benchmarks.distributed` on 2 ranks with `args`: its rows and its output."""
    out = tmp_path / "bench.json"
    env = {k: v for k, v in os.environ.items() if k not in CACHE_DIRS}
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
        "-m", "benchmarks.distributed", "--size", "tiny", "--batch", "2", "--steps", "1",
        "--warm-up", "0", "--json", str(out), "--caches", str(tmp_path / "caches"), *args,
    ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-5000:]
    return json.loads(out.read_text())["rows"], done.stdout


def test_benchmark_smoke_run_on_cpu(tmp_path):
    """benchmarks.distributed under torchrun, 2 ranks on gloo: FSDP2, eager and mind, mind's
    cell checked against eager (no timing is asserted). One strategy: the tests above train
    each through the same `parallel` steps; this is the script, its launch and its table."""
    args = ("--device", "cpu", "--backends", "eager,mind", "--strategies", "fsdp2")
    rows, stdout = run_benchmark(tmp_path, *args)
    assert [(r["strategy"], r["backend"]) for r in rows] == [("fsdp2", "eager"), ("fsdp2", "mind")]
    for row in rows:
        assert "error" not in row and row["ok"] and row["step_ms"] > 0, row
        assert not row["fallbacks"], row
    assert "| fsdp2 | mind |" in stdout


@pytest.mark.parametrize("world", [1, 2])
@pytest.mark.usefixtures("compiled_for_the_gpu")
@pytest.mark.gpu
def test_functional_collectives_on_gpus_with_nccl(world, tmp_path):
    """The compiled function of functional collectives on CUDA, its kernels compiled by Triton,
    its collectives on NCCL: one rank on one GPU, or two."""
    if torch.cuda.device_count() < world:
        pytest.skip(f"needs {world} CUDA devices")
    ranks = Ranks(tmp_path, world=world, backend="nccl")
    try:
        ranks.run(steps.functional_collectives, "cuda")
    finally:
        ranks.close()


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA devices")
def test_benchmark_on_two_gpus(tmp_path):
    """The benchmark's every cell on 2 GPUs (NCCL), the tiny model: none fails, each matches
    eager, and the profiler saw NCCL kernels (the overlap is measured; its value is not
    asserted)."""
    rows, _ = run_benchmark(tmp_path, "--device", "cuda")
    assert len(rows) == len(STRATEGIES) * 3
    for row in rows:
        assert "error" not in row and row["ok"], row
        assert row["comm_ms"] > 0 and row["overlap"] is not None, row
