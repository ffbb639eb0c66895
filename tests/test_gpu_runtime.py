"""On a CUDA GPU: the lean launch path, parallel compilation and CUDA graphs
(`mode="reduce-overhead"`).

Kernels compile in worker processes and launch through launchers bound when the module loads
(no JIT dispatch per call); recorded
graphs replay and give eager's numbers, for inference and training, across shapes, with inputs
that move; outputs a caller holds stay valid; what cannot be recorded runs unrecorded."""

from __future__ import annotations

import copy
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from mind.runtime import cudagraphs
from mind.runtime.cudagraphs import MindCudaGraphWarning
from programs import ON_GPU, assert_same_step, conv_net, mlp_training_step, no_fallback
from torch._dynamo.utils import counters
from triton.runtime.jit import JITFunction

pytestmark = [*ON_GPU, pytest.mark.usefixtures("isolated_runtime")]


@pytest.fixture
def replays(monkeypatch):
    """How many times a recording replayed, and how many recordings were made."""
    counts = {"replays": 0, "recordings": 0}
    replay, record = cudagraphs.Recording.replay, cudagraphs.CudaGraphs.record

    def counted_replay(self, args):
        counts["replays"] += 1
        return replay(self, args)

    def counted_record(self, recordings, args):
        counts["recordings"] += 1
        return record(self, recordings, args)

    monkeypatch.setattr(cudagraphs.Recording, "replay", counted_replay)
    monkeypatch.setattr(cudagraphs.CudaGraphs, "record", counted_record)
    return counts


def gelu_norm(x, w):
    return F.layer_norm(F.gelu(x @ w), (x.shape[-1],)) * 2


def test_launches_skip_triton_dispatch_after_load(monkeypatch):
    """Every launch of a compiled call goes through the bound launcher, not `JITFunction.run`
    (which specializes and looks up its cache on each launch)."""
    x, w = torch.randn(64, 256, device="cuda"), torch.randn(256, 256, device="cuda")
    compiled = torch.compile(gelu_norm, backend="mind")
    with no_fallback():
        compiled(x, w)
    calls = []
    run = JITFunction.run
    monkeypatch.setattr(
        JITFunction, "run", lambda self, *a, **k: calls.append(self) or run(self, *a, **k)
    )
    for _ in range(3):
        out = compiled(x, w)
    torch.testing.assert_close(out, gelu_norm(x, w), rtol=1e-4, atol=1e-4)
    assert calls == []


def long_softmax(x):
    """Rows of 256 KiB: a cooperative kernel, whose grid is sized from its binary."""
    return torch.softmax(x * 2, -1)


@pytest.mark.parametrize(
    "fn, shapes, kernel",
    [
        (gelu_norm, [(64, 256), (256, 256)], "triton_per_"),
        (long_softmax, [(1024, 65536)], "triton_coop_"),
    ],
)
def test_a_new_process_binds_its_kernels_from_their_launch_records(
    fn, shapes, kernel, tmp_path, monkeypatch
):
    """A second process (the loader's modules and Dynamo reset, the caches on disk kept) binds
    every kernel from the launch record the first process left: Triton's JIT runs for none
    (no specialization, key or cache lookup) and the numbers are eager's. A record damaged in
    between is not bound from: its kernel compiles, and its record is written again."""
    from mind.runtime import loader

    args = [torch.randn(*shape, device="cuda") for shape in shapes]
    with no_fallback():
        torch.compile(fn, backend="mind")(*args)
    records = sorted((tmp_path / "cache" / "launches").rglob("*.json"))
    assert any(f'"name": "{kernel}' in record.read_text() for record in records)
    calls, run = [], JITFunction.run
    monkeypatch.setattr(
        JITFunction, "run", lambda self, *a, **k: calls.append(self) or run(self, *a, **k)
    )

    def new_process():
        monkeypatch.setattr(loader, "_MODULES", {})
        torch._dynamo.reset()
        counters.clear()
        with no_fallback():
            out = torch.compile(fn, backend="mind")(*args)
        torch.testing.assert_close(out, fn(*args), rtol=1e-4, atol=1e-4)

    new_process()
    assert calls == [] and counters["mind_compile"]["recorded"] == len(records)
    intact = records[0].read_text()
    records[0].write_text(intact.replace('"cubin": "', '"cubin": "AAAA'))
    new_process()
    assert (
        len({id(kernel) for kernel in calls}) == 1
        and counters["mind_compile"]["recorded"] == len(records) - 1
    )
    assert records[0].read_text() == intact


def test_kernels_compile_in_worker_processes(tmp_path, monkeypatch):
    """Workers started with an empty Triton cache fill it with every kernel of a module, and
    the loading process's own compile finds them there (the same cache keys): it adds no file
    to the cache."""
    from mind.parser import parse
    from mind.passes import run_pipeline
    from mind.runtime import compile_pool
    from mind.runtime.compile_pool import exec_source
    from mind.runtime.launch import deferred, target_of
    from mind.target.triton import emit

    text = (
        Path(__file__).parent.parent / "lit_tests" / "triton" / "load_time.scheduled"
    ).read_text()
    source = emit(run_pipeline(parse(text), "to-triton"))
    path = tmp_path / "module.py"
    path.write_text(source)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.setenv("MIND_COMPILE_WORKERS", "2")
    monkeypatch.setattr(compile_pool, "_POOL", None)  # a pool of its own, with that cache
    try:
        with deferred() as bindings:
            exec_source(source, str(path), {"__name__": "module"})
        pool = compile_pool.pool()
        target = target_of(bindings[0].device)
        for worker in pool.workers:
            assert worker.ready.wait(120)
        for binding in bindings:  # the workers compile everything: nothing is left here
            assert (
                pool.workers[0].compile(("module", source, str(path), binding.spec(), target))
                is not None
            )
        assert len(list((tmp_path / "triton").rglob("*.cubin"))) == 2
        made = set((tmp_path / "triton").rglob("*"))
        for binding in bindings:  # here, each is found in Triton's cache: no new file
            binding.compile()
        assert set((tmp_path / "triton").rglob("*")) == made
    finally:
        compile_pool._POOL.shutdown()


def test_a_training_graph_compiles_its_forward_kernels_while_its_backward_lowers(monkeypatch):
    """AOTAutograd hands mind the forward, then at once the backward (its cache is on): the
    forward's kernels are submitted to the compile pool before the backward's passes run and
    waited for after them; the step gives eager's numbers."""
    from mind.runtime.compile_pool import Batch

    from mind import backend

    events = []
    generate, wait = backend.generate, Batch.wait

    def passes(graph, *args):
        events.append(("passes", graph.symbol.rsplit("_", 1)[-1]))
        return generate(graph, *args)

    def waited(batch, *args, **kwargs):
        events.append(("waited", "forward" if "_forward_" in batch.module else "backward"))
        return wait(batch, *args, **kwargs)

    monkeypatch.setattr(backend, "generate", passes)
    monkeypatch.setattr(Batch, "wait", waited)
    step, model, reference, x, y = mlp_training_step("cuda")
    with no_fallback():
        loss = torch.compile(step, backend="mind")(model, x, y)
    assert_same_step(loss, step, model, reference, x, y, rtol=1e-4, atol=1e-4)
    assert events == [
        ("passes", "forward"),
        ("passes", "backward"),
        ("waited", "forward"),
        ("waited", "backward"),
    ]


def test_misaligned_input_takes_the_jit_path_and_stays_right():
    """A kernel bound for aligned inputs, given a view 4 bytes into its storage."""
    base = torch.randn(1 + 64 * 256, device="cuda")
    compiled = torch.compile(lambda x: (x * 2).relu() + 1, backend="mind")
    aligned = base[: 64 * 256].view(64, 256)
    misaligned = base[1:].view(64, 256)
    assert misaligned.data_ptr() % 16
    with no_fallback():
        for x in (aligned, misaligned, aligned):
            torch.testing.assert_close(compiled(x), (x * 2).relu() + 1)


def test_reduce_overhead_replays_and_matches_eager(replays):
    x, w = torch.randn(64, 256, device="cuda"), torch.randn(256, 256, device="cuda")
    compiled = torch.compile(gelu_norm, backend="mind", mode="reduce-overhead")
    with no_fallback():
        outs = [compiled(x * i, w) for i in range(5)]
    for i, out in enumerate(outs):  # all held at once: none was overwritten
        torch.testing.assert_close(out, gelu_norm(x * i, w), rtol=1e-4, atol=1e-4)
    # call 1 warms up, 2 records, 3 records again (2's output is held), 4 and 5 run unrecorded
    assert replays == {"replays": 2, "recordings": 2}


def test_outputs_released_let_one_recording_serve_every_call(replays):
    x, w = torch.randn(64, 256, device="cuda"), torch.randn(256, 256, device="cuda")
    compiled = torch.compile(gelu_norm, backend="mind", options={"cudagraphs": True})
    with no_fallback():
        for i in range(6):
            torch.testing.assert_close(
                compiled(x + i, w), gelu_norm(x + i, w), rtol=1e-4, atol=1e-4
            )
    assert replays == {"replays": 5, "recordings": 1}


def test_training_step_records_forward_and_backward(replays):
    step, model, reference, x, y = mlp_training_step("cuda")
    compiled = torch.compile(step, backend="mind", mode="reduce-overhead")
    with no_fallback():
        for _ in range(4):
            model.zero_grad()
            reference.zero_grad()
            loss = compiled(model, x, y)
            assert_same_step(loss, step, model, reference, x, y, rtol=1e-4, atol=1e-4)
    assert replays["recordings"] >= 2  # a forward and a backward
    assert replays["replays"] >= 4


def test_an_input_the_graph_overwrites_is_copied_back_after_each_replay(replays):
    """A replay reads a user's input from the recording's copy of it; the graph overwrites it
    there (an in-place op on an input, kept in the graph), so the replay copies it back."""

    def accumulate(x, y):
        x.mul_(2).add_(y)
        return y * 3

    x, y = torch.randn(64, device="cuda"), torch.randn(64, device="cuda")
    want = x.clone()
    compiled = torch.compile(accumulate, backend="mind", mode="reduce-overhead")
    with no_fallback():
        for _ in range(4):
            compiled(x, y)
            want.mul_(2).add_(y)
            torch.testing.assert_close(x, want)
    assert replays["replays"] >= 2


def test_batch_norm_running_stats_under_cuda_graphs(replays):
    """Batch norm's statistics kernel stores its running stats into the module's buffers, which
    recordings read (and overwrite) in place: every replayed step updates them as eager does."""
    model, x = conv_net(device="cuda")
    reference = copy.deepcopy(model)
    compiled = torch.compile(model, backend="mind", mode="reduce-overhead")
    with no_fallback():
        for _ in range(4):
            compiled(x).sum().backward()
            reference(x).sum().backward()
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                got, want = getattr(model.bn, name), getattr(reference.bn, name)
                torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4, msg=name)
    assert replays["replays"] >= 4


def test_backward_reads_views_of_parameters_in_place(monkeypatch):
    """The transposed weight a backward reads is a view of a parameter: it stays put, so the
    recording binds it rather than copying it before every replay; x and the loss's gradient
    are copied."""
    copied = []
    replay = cudagraphs.Recording.replay

    def spied(self, args):
        copied.extend(args[i] for i in self.copied)
        return replay(self, args)

    monkeypatch.setattr(cudagraphs.Recording, "replay", spied)
    model = torch.nn.Linear(64, 64, device="cuda")
    compiled = torch.compile(
        lambda x: model(x).relu().sum(), backend="mind", mode="reduce-overhead"
    )
    x = torch.randn(8, 64, device="cuda", requires_grad=True)
    with no_fallback():
        for _ in range(4):
            x.grad = None
            compiled(x).backward()
    got = x.grad
    x.grad = None
    model(x).relu().sum().backward()
    torch.testing.assert_close(got, x.grad)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    views = [a for a in copied if a.untyped_storage().data_ptr() in params]
    assert copied
    assert not views, [(type(a).__name__, tuple(a.shape), a.stride()) for a in views]


def test_new_shapes_record_up_to_the_bound(replays):
    compiled = torch.compile(
        lambda x: torch.softmax(x, -1) * 2,
        backend="mind",
        dynamic=True,
        options={"cudagraphs": True, "cudagraph_max_shapes": 2},
    )
    with no_fallback():
        for rows in (8, 8, 8, 16, 16, 16, 32, 32, 32):
            x = torch.randn(rows, 64, device="cuda")
            torch.testing.assert_close(compiled(x), torch.softmax(x, -1) * 2)
    # shapes 8 and 16: warm-up, record, replay; shape 32 is past the bound
    assert replays == {"replays": 4, "recordings": 2}


def test_parameters_are_read_in_place_and_a_new_one_records_again(replays):
    model = torch.nn.Linear(64, 64, device="cuda")
    compiled = torch.compile(lambda x: model(x).relu(), backend="mind", mode="reduce-overhead")
    x = torch.randn(8, 64, device="cuda")
    with no_fallback(), torch.no_grad():
        for _ in range(3):
            torch.testing.assert_close(compiled(x), model(x).relu())
        model.weight.mul_(2)  # in place: the recording sees it
        torch.testing.assert_close(compiled(x), model(x).relu())
    assert replays["recordings"] == 1


def test_a_cpu_input_runs_unrecorded():
    compiled = torch.compile(lambda x, c: x * c.cuda(), backend="mind", mode="reduce-overhead")
    x, c = torch.randn(8, device="cuda"), torch.full((8,), 3.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            torch.testing.assert_close(compiled(x, c), x * 3)
    reasons = [str(w.message) for w in caught if issubclass(w.category, MindCudaGraphWarning)]
    assert reasons and "cpu" in reasons[0]


def test_a_cpu_scalar_is_recorded_once_per_value():
    """A 0-d CPU tensor (as Dynamo passes a Python float under dynamic shapes, or a scale a
    model keeps on the CPU) is a kernel's scalar argument: recordings are keyed by its value."""
    compiled = torch.compile(lambda x, s: x * s + 1, backend="mind", mode="reduce-overhead")
    x = torch.randn(8, device="cuda")
    with no_fallback(), warnings.catch_warnings():
        warnings.simplefilter("error", MindCudaGraphWarning)
        for value in (3.0, 3.0, 3.0, 4.0, 4.0):
            torch.testing.assert_close(compiled(x, torch.tensor(value)), x * value + 1)
    assert dict(counters["mind_cudagraphs"]) == {"warm-up": 2, "record": 2, "replay": 1}


def test_training_replays_while_the_last_output_is_held():
    """A training loop that keeps the last step's output (`out = model(x)`) and whose backward
    reads what the forward's recording saved: forward and backward each alternate between two
    recordings, and every step after them replays (a recording holds no reference to the
    inputs it reads in place, so it does not keep another recording busy)."""
    _, model, reference, x, _ = mlp_training_step("cuda")
    compiled = torch.compile(model, backend="mind", mode="reduce-overhead")
    with no_fallback():
        for _ in range(8):
            model.zero_grad(set_to_none=True)
            out = compiled(x)
            (out.float() ** 2).mean().backward()
    (reference(x).float() ** 2).mean().backward()
    for p, q in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)
    assert dict(counters["mind_cudagraphs"]) == {"warm-up": 2, "record": 4, "replay": 10}


def test_output_that_is_an_input_is_the_callers_tensor(replays):
    compiled = torch.compile(lambda x, y: (x, y * 2), backend="mind", mode="reduce-overhead")
    for _ in range(3):
        x, y = torch.randn(8, device="cuda"), torch.randn(8, device="cuda")
        a, b = compiled(x, y)
        assert a.data_ptr() == x.data_ptr()
        torch.testing.assert_close(b, y * 2)


def test_replays_hand_out_the_recordings_tensors_and_autograd_takes_gradients_over(monkeypatch):
    """A replay hands out the tensors the capture wrote (no tensor is made per output and
    call), and autograd takes a gradient over as the parameter's `.grad`, with no copy: the
    recording's memory, which the next step's backward replays into once the loop dropped it."""
    recordings = []
    settle = cudagraphs.Recording.settle
    monkeypatch.setattr(
        cudagraphs.Recording, "settle", lambda self: settle(recordings.append(self) or self)
    )
    model = torch.nn.Linear(64, 64, device="cuda")
    reference = copy.deepcopy(model)
    compiled = torch.compile(model, backend="mind", mode="reduce-overhead")
    x = torch.randn(8, 64, device="cuda")
    with no_fallback():
        for step in range(5):
            model.zero_grad(set_to_none=True)
            reference.zero_grad(set_to_none=True)
            out = compiled(x)
            handed = any(out is t for r in recordings for t in r.tensors)
            assert handed == (step >= 1), step  # step 0 warms up
            (out * out).sum().backward()
            (reference(x) ** 2).sum().backward()
            for p, q in zip(model.parameters(), reference.parameters(), strict=True):
                torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4)
            del out
    memory = {t.untyped_storage().data_ptr() for r in recordings for t in r.tensors}
    assert {p.grad.untyped_storage().data_ptr() for p in model.parameters()} <= memory
    assert dict(counters["mind_cudagraphs"]) == {"warm-up": 2, "record": 2, "replay": 6}
