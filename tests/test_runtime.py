"""The runtime: generated modules cached on disk by content, written atomically, imported once per
process, run by Triton's interpreter on CPU tensors; kernel failures name the kernel and its IR."""

from __future__ import annotations

import os

import pytest
import torch
import triton.language as tl
from mind.runtime import KernelError, load, loader
from triton import knobs
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction

#: what the code generator emits for the seed program `((a + b) * c.relu()).sum(dim=-1)`
SEED_SOURCE = """\
import torch
import triton
import triton.language as tl


@triton.jit
def triton_per_fused_add_mul_relu_sum_0(in_ptr0, in_ptr1, in_ptr2, out_ptr0, RBLOCK: tl.constexpr):
    x0 = tl.program_id(0)
    r1 = tl.arange(0, RBLOCK)
    a = tl.load(in_ptr0 + (r1 + 128 * x0))
    b = tl.load(in_ptr1 + (r1 + 128 * x0))
    c = tl.load(in_ptr2 + (r1 + 128 * x0))
    tl.store(out_ptr0 + x0, tl.sum((a + b) * tl.maximum(c, 0.0), 0))


def call(args):
    arg0_1, arg1_1, arg2_1 = args
    args.clear()
    buf0 = torch.empty_strided((4,), (1,), device=arg0_1.device, dtype=torch.float32)
    triton_per_fused_add_mul_relu_sum_0[(4,)](arg0_1, arg1_1, arg2_1, buf0, RBLOCK=128)
    return (buf0,)
"""
#: the same program with a kernel Triton rejects
BROKEN_SOURCE = SEED_SOURCE.replace("tl.maximum(c, 0.0)", "tl.no_such_op(c)")


def seed(a, b, c):
    return ((a + b) * c.relu()).sum(dim=-1)


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MIND_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(loader, "_MODULES", {})
    return tmp_path / "cache"


def test_kernel_runs_on_cpu_tensors():
    """...and leaves Triton's language as it found it, for the CUDA kernels of the process."""
    before = [dict(vars(owner)) for owner in (tl, tl.core, tl.standard, tl.tensor)]
    a, b, c = (torch.randn(4, 128) for _ in range(3))
    (out,) = load(SEED_SOURCE, "graph0_forward", interpret=True).call([a, b, c])
    torch.testing.assert_close(out, seed(a, b, c))
    after = [dict(vars(owner)) for owner in (tl, tl.core, tl.standard, tl.tensor)]
    for old, new in zip(before, after):
        assert [name for name in old if old[name] is not new.get(name)] == []
    assert vars(tl.tensor).keys() == before[-1].keys()


def test_same_source_is_one_file_imported_once(fresh_cache, monkeypatch):
    module = load(SEED_SOURCE, "graph0_forward", interpret=True)
    assert load(SEED_SOURCE, "graph0_forward", interpret=True) is module
    path = module.__file__
    assert path.startswith(str(fresh_cache)) and open(path).read() == SEED_SOURCE
    stamp = os.stat(path).st_mtime_ns
    monkeypatch.setattr(loader, "_MODULES", {})  # a new process: found on disk, not rewritten
    again = load(SEED_SOURCE, "other_name", interpret=True)
    assert again is not module and again.__file__ == path
    assert os.stat(path).st_mtime_ns == stamp
    assert load(BROKEN_SOURCE, "graph0_forward", interpret=True).__file__ != path


def test_write_is_atomic_and_a_failed_write_loads_from_memory(fresh_cache, monkeypatch):
    def crash(src, dst):
        raise OSError("disk full")

    a, b, c = (torch.randn(4, 128) for _ in range(3))
    with monkeypatch.context() as patch:
        patch.setattr(os, "replace", crash)
        module = load(SEED_SOURCE, "graph0_forward", interpret=True)
        torch.testing.assert_close(module.call([a, b, c])[0], seed(a, b, c))
    assert module.__file__.startswith("<mind-generated ")
    assert [p for p in fresh_cache.rglob("*") if p.is_file()] == []
    monkeypatch.setattr(loader, "_MODULES", {})
    path = load(SEED_SOURCE, "graph0_forward", interpret=True).__file__
    assert [p for p in fresh_cache.rglob("*") if p.is_file() and "__pycache__" not in str(p)] == [
        fresh_cache / path
    ]


def test_unwritable_cache_compiles_in_memory(tmp_path, monkeypatch):
    (tmp_path / "a_file").write_text("")
    monkeypatch.setenv("MIND_CACHE_DIR", str(tmp_path / "a_file" / "cache"))
    a, b, c = (torch.randn(4, 128) for _ in range(3))
    module = load(SEED_SOURCE, "graph0_forward", interpret=True)
    torch.testing.assert_close(module.call([a, b, c])[0], seed(a, b, c))


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: text.replace("tl.maximum(c, 0.0)", "tl.maximum(c, 1.0)"),  # valid, wrong
        lambda text: text[: len(text) // 2],  # truncated
        lambda text: "\x00garbage",
    ],
    ids=["edited", "truncated", "garbage"],
)
def test_a_damaged_module_file_is_rewritten_not_trusted(fresh_cache, monkeypatch, damage):
    path = load(SEED_SOURCE, "graph0_forward", interpret=True).__file__
    with open(path, "w") as f:
        f.write(damage(SEED_SOURCE))
    monkeypatch.setattr(loader, "_MODULES", {})  # a new process
    a, b, c = (torch.randn(4, 128) for _ in range(3))
    module = load(SEED_SOURCE, "graph0_forward", interpret=True)
    torch.testing.assert_close(module.call([a, b, c])[0], seed(a, b, c))
    assert module.__file__ == path and open(path).read() == SEED_SOURCE


def test_interpret_is_chosen_per_load_and_the_knob_restored(monkeypatch):
    monkeypatch.setattr("mind.runtime.cache.device_key", lambda interpret: str(interpret))
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    compiled = load(SEED_SOURCE, "g", interpret=False)
    assert isinstance(compiled.triton_per_fused_add_mul_relu_sum_0, JITFunction)
    assert knobs.runtime.interpret and os.environ["TRITON_INTERPRET"] == "1"
    monkeypatch.delenv("TRITON_INTERPRET")
    interpreted = load(SEED_SOURCE, "g", interpret=True)
    assert isinstance(interpreted.triton_per_fused_add_mul_relu_sum_0, InterpretedFunction)
    assert not knobs.runtime.interpret and "TRITON_INTERPRET" not in os.environ


def test_kernel_error_shows_source_and_origin(tmp_path):
    origin = tmp_path / "graph0_forward.triton"
    origin.write_text("// the IR\ntriton.kernel @triton_per_fused_add_mul_relu_sum_0\n")
    module = load(BROKEN_SOURCE, "graph0_forward", str(origin), interpret=True)
    with pytest.raises(KernelError) as info:
        module.call([torch.randn(4, 128) for _ in range(3)])
    text = info.value.render()
    assert text.startswith(f"{origin}:2:16: error: Triton failed on kernel ")
    assert "'triton_per_fused_add_mul_relu_sum_0'" in text
    assert "no_such_op" in str(info.value.__cause__)
    assert "kernel source:\n@triton.jit\ndef triton_per_fused_add_mul_relu_sum_0(" in text
    assert "    tl.store(out_ptr0 + x0, tl.sum((a + b) * tl.no_such_op(c), 0))" in text


def test_kernels_that_assert_bind_with_debug_in_the_loader_and_the_workers(tmp_path, monkeypatch):
    """A kernel with a device assert is `@triton.jit(debug=True)`; the loader's binding and a
    compile worker's (which runs the module's kernels alone) compile it with Inductor's options,
    the same ones (Triton's cache key), and a kernel without asserts with neither; every kernel
    with libdevice keeping denormals."""
    from pathlib import Path

    from mind.parser import parse
    from mind.passes import run_pipeline
    from mind.runtime import compile_job, compile_pool
    from mind.runtime.launch import DEBUG_OPTIONS, EAGER_MATH_OPTIONS, deferred
    from mind.target.triton import emit

    from mind.options import PIPELINE

    lit = Path(__file__).resolve().parent.parent / "lit_tests" / "triton"
    text = (lit / "gather_assert.aten").read_text().replace("cpu", "cuda:0")
    source = emit(run_pipeline(parse(text), PIPELINE))
    path = tmp_path / "module.py"
    path.write_text(source)
    compiled = []
    monkeypatch.setattr(
        compile_job, "compile_for", lambda k, spec, t: compiled.append((k.__name__, k.debug, spec))
    )
    with knobs.runtime.scope():
        knobs.runtime.interpret = False
        with deferred() as bindings:
            compile_pool.exec_source(source, str(path), {"__name__": "module"})
        for binding in bindings:  # as a worker does, from the source and the binding's spec
            compile_job.compile_kernel("module", source, str(path), binding.spec(), None)
    loader_options = {b.name: b.options for b in bindings}
    assert {name: spec.options for name, _, spec in compiled} == loader_options
    (asserting,) = [name for name in loader_options if "embedding" in name]
    assert [name for name, debug, _ in compiled if debug] == [asserting]
    assert loader_options[asserting].items() >= DEBUG_OPTIONS.items()
    assert all("debug" not in o for name, o in loader_options.items() if name != asserting)
    assert all(o.items() >= EAGER_MATH_OPTIONS.items() for o in loader_options.values())


def test_cuda_graphs_count_how_each_call_went():
    """Without CUDA (CPU inputs) the second call, which would record, disables CUDA graphs with
    a warning; every call is counted by outcome, as the model benchmark reports them."""
    from mind.runtime.cudagraphs import CudaGraphs, MindCudaGraphWarning
    from torch._dynamo.utils import counters

    counters.clear()
    graphs = CudaGraphs(lambda args: [args[0] * 2], "g", set(), lambda a: a[0].shape, 8, 2)
    x = torch.ones(3)
    assert graphs([x])[0].tolist() == [2.0, 2.0, 2.0]
    with pytest.warns(MindCudaGraphWarning, match="graph 'g' runs without CUDA graphs: an input"):
        graphs([x])
    graphs([x])
    assert dict(counters["mind_cudagraphs"]) == {"warm-up": 1, "unrecorded: disabled": 2}


def test_a_module_runs_from_bytecode_checked_against_its_source(tmp_path):
    """Bytecode is written beside the module once; an edited module never runs it stale."""
    from importlib.util import cache_from_source

    from mind.runtime.compile_pool import exec_source

    path = tmp_path / "module.py"
    pyc = tmp_path / cache_from_source(str(path))
    for value in (1, 2):  # the same size, within the same second
        source = f"VALUE = {value}\n"
        path.write_text(source)
        namespace: dict = {}
        exec_source(source, str(path), namespace)
        assert namespace["VALUE"] == value and pyc.exists()


RECORDED_INPUTS = """loops.graph @g(%a: f32[4][1]cuda:0, %s: f32[][]cpu, %m: i64[2][1]meta) {
  %buf0 = loops.pointwise : f32[4][1]cuda:0 {
    %0 = loops.load(%a, p0) : f32
    %1 = loops.load(%s, 0) : f32
    %2 = loops.mul(%0, %1) : f32
    loops.yield(%2)
  }
  loops.output(%buf0)
}"""


def test_what_a_cuda_graph_records():
    """A 0-d CPU tensor (read by value) and a meta tensor (a fused attention's philox seed: no
    memory) leave a graph recordable; a CPU tensor with elements in a dim does not."""
    from mind.parser import parse

    from mind.backend import _unrecordable

    assert _unrecordable(parse(RECORDED_INPUTS).ops[0]) is None
    on_cpu = RECORDED_INPUTS.replace("%s: f32[][]cpu", "%s: f32[2][1]cpu")
    assert _unrecordable(parse(on_cpu).ops[0]) == "'%s' is on cpu"


GATHERS = """aten.graph @g(%a: f32[6, 4][4, 1]cuda:0, %i: i64[3][1]cuda:0, %m: b8[6][1]cuda:0) {
  %index = aten.index.Tensor(%a, [%i]) : f32[3, 4][4, 1]cuda:0
  %masked = aten.index.Tensor(%a, [%m]) : f32[u0, 4][4, 1]cuda:0
  aten.output(%index, %masked)
}"""


def test_a_gather_records_unless_its_size_depends_on_data():
    """`aten.index.Tensor` is tagged as having a data-dependent shape; with integer indices its
    size is known, and only a boolean mask's unbacked size (u0) makes a recording wrong."""
    from mind.parser import parse

    from mind.backend import _unrecordable

    masked = parse(GATHERS).ops[0]
    assert (
        _unrecordable(masked)
        == "'aten.index.Tensor' syncs with the host or has a data-dependent shape"
    )
    gather = parse(
        GATHERS.replace(
            "  %masked = aten.index.Tensor(%a, [%m]) : f32[u0, 4][4, 1]cuda:0\n", ""
        ).replace("%index, %masked", "%index")
    )
    assert _unrecordable(gather) is None


#: a module of two kernels bound for cuda:0 (nothing here can compile them: tests fake it)
BOUND_SOURCE = """\
import torch
import triton
import triton.language as tl

from mind.runtime.launch import bind

cuda0 = torch.device("cuda", 0)


@triton.jit
def scale0(x_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + i, tl.load(x_ptr + i, i < n) * 2, i < n)


@triton.jit
def scale1(x_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + i, tl.load(x_ptr + i, i < n) * 3, i < n)


scale0_launch = bind(scale0, cuda0, (torch.float32, 3), num_warps=4, num_stages=1, BLOCK=128)
scale1_launch = bind(scale1, cuda0, (torch.float32, 3), num_warps=4, num_stages=1, BLOCK=128)


def call(args):
    (x,) = args
    scale0_launch(1, 1, 1, 0, x, 3)
    scale1_launch(1, 1, 1, 0, x, 3)
    return (x,)
"""


@pytest.fixture
def fake_compiles(monkeypatch):
    """Kernels 'compile' and bind without a GPU: each compile is recorded, each launcher
    records its launches; a kernel named in `failing` fails to bind."""
    from mind.runtime.launch import Binding

    events, failing = [], set()

    def launcher(binding):
        if binding.name in failing:
            raise RuntimeError(f"ptxas rejected {binding.name}")
        return lambda *args: events.append(("launched", binding.name))

    monkeypatch.setattr(Binding, "compile", lambda b: events.append(("compiled", b.name)))
    monkeypatch.setattr(Binding, "launcher", launcher)
    monkeypatch.setattr("mind.runtime.cache.device_key", lambda interpret: str(interpret))
    return events, failing


def test_a_module_loaded_in_an_overlapped_block_binds_at_its_end(fake_compiles):
    """Inside `overlapped`, a load returns with its kernels compiling (the pool's workers take
    them meanwhile); the block's end compiles what is left, here, and binds."""
    from mind.runtime.launch import Binding

    events, _ = fake_compiles
    with loader.overlapped():
        module = load(BOUND_SOURCE, "g", interpret=False)
        assert isinstance(module.scale0_launch, Binding) and events == []
    assert events == [("compiled", "scale0"), ("compiled", "scale1")]
    module.call([torch.zeros(3)])
    assert events[2:] == [("launched", "scale0"), ("launched", "scale1")]


def test_a_module_loaded_at_once_in_an_overlapped_block_binds_before_it_returns(fake_compiles):
    """A caller that runs a module at once (mm-templates timing a template inside the backend's
    overlapped compile) loads it under `at_once`: it comes back bound, not with its launches
    waiting for the block's end (then not callable: "'Tuned' object is not callable")."""
    from mind.runtime import at_once

    events, _ = fake_compiles
    with loader.overlapped():
        with at_once():
            module = load(BOUND_SOURCE, "g", interpret=False)
        assert events == [("compiled", "scale0"), ("compiled", "scale1")]
        module.call([torch.zeros(3)])
    assert events[2:] == [("launched", "scale0"), ("launched", "scale1")]


def test_a_kernel_failing_after_an_overlapped_load_fails_the_first_call(fake_compiles):
    """The module was handed out before its kernels compiled: the one that fails raises its
    KernelError, naming it, when the module's call launches it (as outside a block, the load
    itself raises it); the others are bound."""
    events, failing = fake_compiles
    failing.add("scale1")
    with pytest.raises(KernelError, match="kernel 'scale1'.*\n.*ptxas rejected scale1"):
        load(BOUND_SOURCE, "g", interpret=False)
    with loader.overlapped():
        module = load(BOUND_SOURCE.replace("* 2", "* 4"), "g", interpret=False)
    with pytest.raises(KernelError, match="kernel 'scale1'.*\n.*ptxas rejected scale1") as info:
        module.call([torch.zeros(3)])
    assert "kernel source:\n@triton.jit\ndef scale1(" in str(info.value)
    assert events[-1] == ("launched", "scale0")


def test_kernels_with_launch_records_bind_from_them_without_compiling(fake_compiles, monkeypatch):
    """A process that finds a kernel's launch record (an earlier process bound it through
    torch's launcher) binds it from the record: only the kernel without one compiles."""
    from mind.runtime.cache import remember_launch
    from mind.runtime.launch import Binding
    from torch._dynamo.utils import counters

    events, _ = fake_compiles
    bound, launcher = {}, Binding.launcher
    monkeypatch.setattr(Binding, "launcher", lambda b: bound.update({b.name: b}) or launcher(b))
    load(BOUND_SOURCE, "g", interpret=False)
    assert events == [("compiled", "scale0"), ("compiled", "scale1")]
    assert all(b.record_key is not None and b.kept is None for b in bound.values())
    kept = {"state": {}, "cubin": ""}
    remember_launch(bound["scale0"].record_key, kept)
    loader._MODULES.clear()  # a new process
    counters.clear()
    load(BOUND_SOURCE, "g", interpret=False)
    assert events[2:] == [("compiled", "scale1")]
    assert bound["scale0"].kept == kept and bound["scale1"].kept is None
    assert counters["mind_compile"]["recorded"] == 1


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: text[: len(text) // 2],  # truncated
        lambda text: text.replace('"shared": 0', '"shared": 1'),  # valid, wrong
        lambda text: text.replace('"key": "', '"key": "0'),  # another key's
        lambda text: "\x00garbage",
    ],
    ids=["truncated", "edited", "another-key", "garbage"],
)
def test_a_damaged_launch_record_is_ignored(fresh_cache, damage):
    """A launch record that does not parse, name its key and hash to the hash it holds is not
    bound from: the kernel compiles, and its record is written again."""
    from mind.runtime.cache import launch_key, recall_launch, remember_launch

    key = launch_key("module", "kernel")
    kept = {"state": {"name": "k", "shared": 0}, "cubin": "AAAA"}
    remember_launch(key, kept)
    assert recall_launch(key) == kept
    (path,) = (fresh_cache / "launches").rglob("*.json")
    path.write_text(damage(path.read_text()))
    assert recall_launch(key) is None
    remember_launch(key, kept)
    assert recall_launch(key) == kept


def test_a_launch_key_holds_what_the_compiled_kernel_depends_on(monkeypatch):
    """The module, the kernel's binding, and the environment Triton's own key holds."""
    from mind.runtime import cache

    key = cache.launch_key("module", "kernel")
    assert key != cache.launch_key("module2", "kernel") != cache.launch_key("module", "kernel2")
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "0")
    assert cache.get_cache_invalidating_env_vars() and cache.launch_key("module", "kernel") != key


def test_storages_known_to_stay_put_are_forgotten_once_freed():
    """CUDA graphs bind a storage in place when it is known to stay put. A freed one's address
    may come back under a fresh tensor, so the record holds it weakly, and forgets it at the next
    recording: the record is as large as the storages alive, not every one ever bound."""
    from mind.runtime import cudagraphs

    cudagraphs._stay_put([])
    alive = len(cudagraphs._STAY_PUT)  # what other tests left, alive
    kept, freed = torch.zeros(4), [torch.zeros(4) for _ in range(1000)]
    cudagraphs._stay_put([kept, *freed])
    assert all(cudagraphs._stays_put(t) for t in [kept, *freed])
    del freed
    cudagraphs._stay_put([torch.zeros(4)])
    assert cudagraphs._stays_put(kept) and len(cudagraphs._STAY_PUT) <= alive + 2
