"""A cooperative kernel's launcher (runtime/cooperative.py), without a GPU: the groups it sizes
from a kernel's occupancy (Triton's compiled kernel, or torch's launcher's object of it, as a
launch record restores), its refusal when a group cannot be resident, the
interpreter's case, and the workspace layout the kernel indexes within what the launcher
allocates. The kernels' numbers are checked on a GPU (test_gpu_kernels.py)."""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest
import sympy
import torch
from mind.ir.symbols import sym
from mind.parser import parse
from mind.passes import run_pipeline
from mind.runtime.cooperative import Cooperation, Resources, blocks_per_sm, resources
from mind.runtime.errors import KernelError
from test_triton_codegen import softmax_body

#: an H100's limits, as torch.cuda.get_device_properties gives them
H100 = SimpleNamespace(
    name="NVIDIA H100 80GB HBM3",
    multi_processor_count=132,
    regs_per_multiprocessor=65536,
    max_threads_per_multi_processor=2048,
    shared_memory_per_multiprocessor=233472,
)


def compiled(regs: int, warps: int, shared: int = 0):
    """Triton's compiled kernel, as far as occupancy goes (its binary loaded)."""
    return SimpleNamespace(n_regs=regs, metadata=SimpleNamespace(num_warps=warps, shared=shared))


def torchs(regs: int, warps: int, shared: int = 0):
    """torch's launcher's object of a compiled kernel, loaded: what a launch record restores."""
    return SimpleNamespace(n_regs=regs, num_warps=warps, shared=shared, cubin_raw=None)


def test_both_kernel_objects_give_the_same_resources():
    assert resources(compiled(93, 4, 512)) == resources(torchs(93, 4, 512)) == (4, 93, 512)
    assert resources(torchs(93, 4, 512)) == Resources(warps=4, registers=93, shared=512)


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
    assert blocks_per_sm(Resources(warps, regs, shared), H100) == expected


def test_groups_fit_the_gpu_and_a_group_too_large_is_refused():
    assert Cooperation(splits=16, partials=2).groups(Resources(4, 64, 0), H100, "k") == 66
    small = SimpleNamespace(**{**vars(H100), "multi_processor_count": 2})
    with pytest.raises(KernelError, match=r"its 32 cooperating programs cannot all be resident"):
        Cooperation(splits=32, partials=2).groups(Resources(4, 64, 0), small, "k")


def test_a_kernel_bound_from_its_launch_record_sizes_its_groups_from_it(monkeypatch):
    """A process that binds a cooperative kernel from its launch record has no Triton compiled
    kernel: its groups come from torch's launcher's object of it, as loaded (128 registers a
    thread: 4 programs an SM, 528 on an H100, 33 groups of 16)."""
    from mind.runtime import launch

    calls = []

    def recorded(name, kept, device, count):
        bound = lambda *args: calls.append(args)  # noqa: E731
        bound.kernel = torchs(128, 4)
        return bound

    monkeypatch.setattr(launch, "recorded_launcher", recorded)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: H100)
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(Cooperation, "_space", lambda self, groups, device: ("ws", "sem"))
    binding = launch.Binding(
        SimpleNamespace(__name__="k"), torch.device("cuda", 0), (torch.float32, 3, torch.float32, torch.int32, 1),
        (), {}, {}, Cooperation(splits=16, partials=2), module_key="m",
    )  # fmt: skip
    assert binding.record_key is not None
    binding.kept = {"state": {}, "cubin": ""}
    binding.launcher()(16, 1000, 1, 0, "x", 3)
    assert calls == [(16, 33, 1, 0, "x", 3, "ws", "sem", 33)]


def test_the_interpreter_runs_groups_of_one_program_only():
    calls = []
    launch = Cooperation(splits=1, partials=3).interpreted(lambda *a: calls.append(a))
    launch(1, 1024, 1, None, "x")
    ((gx, gy, gz, _, x, workspace, semaphores, groups),) = calls
    assert (gx, gy, gz, x, groups) == (1, 1, 1, "x", 1)
    assert workspace.numel() == 2 * 3 and torch.equal(semaphores, torch.zeros(1, dtype=torch.int32))
    with pytest.raises(KernelError, match="runs programs one after another"):
        Cooperation(splits=4, partials=1).interpreted(lambda *a: None)


def test_each_stream_has_its_own_semaphores():
    """Launches on one stream share a workspace and semaphores (made at its first launch);
    another stream's launches, which may run at the same time, get their own."""
    calls = []
    launch = Cooperation(splits=1, partials=1).interpreted(lambda *a: calls.append(a[-3:-1]))
    for stream in (7, 7, 9):
        launch(1, 1, 1, stream)
    first, again, other = calls
    assert all(a is b for a, b in zip(first, again))
    assert not any(a is b for a, b in zip(first, other))


# -- the workspace's layout, as codegen/cooperative.py indexes it and the launcher sizes it -----
def _kernel(body: str, width: int = 65536):
    text = (
        f"scheduled.graph @g(%arg0_1: f32[7, {width}][{width}, 1]cuda:0) {{\n"
        f"  %buf0 = scheduled.node @op0 {{sizes = ([7], [{width}]), device = cuda:0, "
        f'origins = ["softmax"], writes = [(%buf0, c0, {{c0: {7 * width}}})], met = [], '
        f"unmet = []}} : f32[7, {width}][{width}, 1]cuda:0 {{\n{body}\n  }}\n"
        "  scheduled.output(%buf0)\n}\n"
    )
    module = run_pipeline(parse(text), "to-triton")
    kernel = next(op for op in module.ops if op.name == "triton.kernel")
    launch = next(op for op in module.walk() if op.name == "triton.launch")
    return kernel, int(launch.grid[0])


#: the max, then the sum of exp: an exchange each
TWO_EXCHANGES = softmax_body(65536)


def _index_expr(value) -> sympy.Expr:
    """The index expression behind a workspace access (through its broadcast), over names."""
    op = value.owner
    while op.name != "triton.index":
        op = op.operands[0].owner
    return op.expr, {name: v.name for name, v in op.names.items()}


def test_the_workspace_holds_each_partial_apart_for_two_rows_in_flight():
    """Simulated on 3 groups walking 7 rows: every store lands inside the workspace the launcher
    allocates (2 x groups x partials x splits), each exchange loads exactly what its programs
    stored, and no row's stores touch what the row before it (in the same group, or any other
    group's rows) still reads."""
    kernel, splits = _kernel(TWO_EXCHANGES)
    assert kernel.cooperative == 2 and splits == 16
    ops = list(kernel.walk())
    ws = kernel.body.args[-3]
    xslot = next(op for op in ops if op.name == "triton.index" and op.result.name == "xslot")
    stores = [op for op in ops if op.name == "triton.store" and op.ptr is ws]
    loads = [op for op in ops if op.name == "triton.load" and op.ptr is ws]
    assert len(stores) == len(loads) == 2
    groups, rows, size = 3, 7, 2 * 3 * kernel.cooperative * splits

    def evaluate(op, xoffset, xgroup, lane):
        expr, names = _index_expr(op.offset)
        slot = xslot.expr.subs(
            {sym("xoffset"): xoffset, sym("xgroup"): xgroup, sym("xgroups"): groups}
        )
        values = {"xslot": slot, "xgroups": groups, "r0_pid": lane, "r0_parts": lane}
        return int(expr.subs({sym(n): values[v] for n, v in names.items()}))

    reads: dict[tuple, set] = {}  # (group, row) -> what its exchanges read
    for g in range(groups):
        for row in range(g, rows, groups):
            for store, load in zip(stores, loads):
                written = {evaluate(store, row, g, s) for s in range(splits)}
                read = {evaluate(load, row, g, s) for s in range(splits)}
                assert len(written) == splits and written == read
                assert all(0 <= i < size for i in written)
                reads.setdefault((g, row), set()).update(read)
    for (g, row), indices in reads.items():
        concurrent = [(g, row + groups)] + [(h, r) for h, r in reads if h != g]
        for other in concurrent:
            assert not indices & reads.get(other, set()), (g, row, other)
