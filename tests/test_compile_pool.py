"""The compile pool without a GPU: its workers compile for a target they are told (Triton's
front end and ptxas run on any machine), into Triton's on-disk cache, under the keys the loading
process looks up; a worker that becomes ready while a module compiles joins in."""

import dataclasses
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from mind.runtime import compile_job, compile_pool
from mind.runtime.launch import Binding, deferred
from triton.backends.compiler import GPUTarget

#: an H100's: what the workers compile for here
H100 = GPUTarget("cuda", 90, 32)
HEADER = """import triton
import triton.language as tl
"""
KERNEL = """

@triton.jit
def scale{i}(x_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + i, tl.load(x_ptr + i, i < n) * {i}, i < n)
"""
HOST = f"""
{compile_job.HOST}
import torch

from mind.runtime.launch import bind

cuda0 = torch.device("cuda", 0)
"""
BIND = """
scale{i}_launch = bind(scale{i}, cuda0, (torch.float32, 3), num_warps=4, num_stages=1, BLOCK=128)
"""


def module(tmp_path: Path, kernels: int) -> tuple[str, str, list[Binding]]:
    """A module of `kernels` kernels on cuda:0, written to a file; its source, file, bindings."""
    source = HEADER + "".join(KERNEL.format(i=i) for i in range(kernels)) + HOST
    source += "".join(BIND.format(i=i) for i in range(kernels))
    path = tmp_path / "module.py"
    path.write_text(source)
    with deferred() as bindings:
        compile_pool.exec_source(source, str(path), {"__name__": "module"})
    return source, str(path), bindings


def cubins(cache: Path) -> set[str]:
    return {p.relative_to(cache).as_posix() for p in cache.rglob("*.cubin")}


@pytest.fixture
def pool(tmp_path, monkeypatch):
    """A pool of two workers of its own, with an empty Triton cache."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.setenv("MIND_COMPILE_WORKERS", "2")
    monkeypatch.setattr(compile_pool, "_POOL", None)
    pool = compile_pool.pool()
    yield pool
    pool.shutdown()


def test_workers_compile_for_a_target_into_the_cache_the_loader_reads(tmp_path, pool):
    """Each kernel a worker compiles is one cubin; compiling the same bindings here for the same
    target finds them all (the same cache keys) and adds none."""
    source, path, bindings = module(tmp_path, 3)
    assert all(worker.ready.wait(120) for worker in pool.workers)
    for i in range(len(bindings)):
        job = ("module", source, path, bindings[i].spec(), H100)
        assert pool.workers[i % 2].compile(job) is not None
    made = cubins(tmp_path / "triton")
    assert len(made) == len(bindings) == 3
    for binding in bindings:
        binding.precompile(H100)
    assert cubins(tmp_path / "triton") == made


def test_a_worker_that_fails_says_so(tmp_path, pool):
    """A kernel that does not compile answers None (the loader compiles it again and reports
    the error); the worker goes on with the next job, and answers its seconds."""
    source, path, bindings = module(tmp_path, 1)
    broken = source.replace("* 0, i < n)", "* tl.no_such_op(0), i < n)")
    Path(path).write_text(broken)
    assert pool.workers[0].ready.wait(120)
    spec = bindings[0].spec()
    assert pool.workers[0].compile(("module", broken, path, spec, H100)) is None
    Path(path).write_text(source)
    assert pool.workers[0].compile(("module", source, path, spec, H100)) is not None


def test_a_worker_ready_late_joins_the_compile(tmp_path, pool, monkeypatch):
    """The loader starts compiling before any worker is ready (they are still importing torch);
    the workers join as they become ready: the loader's first kernel waits until one did."""
    source, path, bindings = module(tmp_path, 6)
    by_workers = []
    joined = threading.Event()
    worker_compile = compile_pool.Worker.compile

    def counted(worker, job):
        ok = worker_compile(worker, job)
        by_workers.append(job[3].kernel)
        joined.set()
        return ok

    def here(binding):
        assert joined.wait(120), "no worker joined"
        binding.precompile(H100)

    monkeypatch.setattr(compile_pool.Worker, "compile", counted)
    monkeypatch.setattr(Binding, "compile", here)
    monkeypatch.setattr(compile_pool, "target_of", lambda device: H100)
    assert not any(worker.ready.is_set() for worker in pool.workers)
    pool.submit("module", source, path, bindings).wait()
    assert by_workers and len(cubins(tmp_path / "triton")) == len(bindings)


def test_the_log_says_how_long_each_kernel_took_and_which_was_slowest(
    tmp_path, pool, monkeypatch, caplog
):
    """A first call waits at the least for its slowest kernel (a matmul template's compile is
    several times a pointwise kernel's): the launch channel names it, with each kernel's seconds
    as the worker that compiled it answered them."""
    source, path, bindings = module(tmp_path, 3)
    assert all(worker.ready.wait(120) for worker in pool.workers)
    monkeypatch.setattr(Binding, "compile", lambda binding: binding.precompile(H100))
    monkeypatch.setattr(compile_pool, "target_of", lambda device: H100)
    with caplog.at_level("DEBUG", logger="mind.launch"):
        batch = pool.submit("module", source, path, bindings)
        batch.wait()
    assert sorted(batch.seconds) == [0, 1, 2] and all(s > 0 for s in batch.seconds.values())
    by_workers = [r.getMessage() for r in caplog.records if "compiled by a worker in" in r.message]
    assert len(by_workers) == 3 - batch.here
    slowest = max(batch.seconds, key=batch.seconds.get)
    ms = f"{1e3 * batch.seconds[slowest]:.0f} ms"
    assert f"the slowest, scale{slowest}, {ms}" in caplog.text


def test_workers_take_the_longest_compiles_first(tmp_path):
    """A matmul's kernel first (a template compiles several times longer than a pointwise
    kernel), then the longer sources: the first call does not wait for a long compile that
    started last. Equal guesses keep the module's order."""
    source, path, _ = module(tmp_path, 4)
    long = KERNEL.format(i=1).replace("* 1, i < n)", "* 1 + 2 * 3 + 4, i < n)")
    dot = KERNEL.format(i=3).replace(
        "tl.load(x_ptr + i, i < n) * 3", "tl.dot(tl.load(x_ptr), tl.load(x_ptr))"
    )
    source = source.replace(KERNEL.format(i=1), long).replace(KERNEL.format(i=3), dot)
    Path(path).write_text(source)
    with deferred() as bindings:
        compile_pool.exec_source(source, path, {"__name__": "module"})
    batch = compile_pool.Batch(compile_pool._ALONE, "module", source, path, bindings)
    assert [bindings[i].name for i in batch.todo] == ["scale3", "scale1", "scale0", "scale2"]


def test_a_worker_runs_a_module_once_for_all_its_kernels(tmp_path, monkeypatch):
    """Each job names the module and one kernel; the module's kernels run once."""
    source, path, bindings = module(tmp_path, 3)
    runs, compiled = [], []
    kernels_of = compile_job.kernels_of
    monkeypatch.setattr(compile_job, "kernels_of", lambda s: runs.append(s) or kernels_of(s))
    monkeypatch.setattr(compile_job, "compile_for", lambda k, spec, t: compiled.append(k.__name__))
    for binding in bindings:
        compile_job.compile_kernel("module", source, path, binding.spec(), H100)
    assert len(runs) == 1 and compiled == ["scale0", "scale1", "scale2"]


def test_a_worker_imports_no_torch(tmp_path, monkeypatch):
    """The pool's server and its workers never import torch: a worker compiles a module's
    kernels for a target in a process where importing torch fails, into the cache where the
    loader's bind finds them (Triton's host launcher, asked for, is left to the loader where
    Triton's driver needs torch)."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    source, path, (binding,) = module(tmp_path, 1)
    script = (
        "import pickle, sys\n"
        "from mind.runtime.compile_worker import warm_up\n"
        "warm_up()\n"
        "from mind.runtime import compile_job\n"
        "compile_job.compile_kernel(*pickle.loads(sys.stdin.buffer.read()))\n"
        "try:\n    import torch\nexcept ImportError:\n    print('no torch')\n"
    )
    spec = dataclasses.replace(binding.spec(), launcher=True)
    job = pickle.dumps(("module", source, path, spec, H100))
    run = subprocess.run([sys.executable, "-c", script], input=job, capture_output=True)
    assert run.returncode == 0, run.stderr.decode()
    assert run.stdout.decode().strip() == "no torch"
    made = cubins(tmp_path / "triton")
    assert len(made) == 1
    binding.precompile(H100)
    assert cubins(tmp_path / "triton") == made


def test_precompiling_touches_no_gpu(tmp_path, monkeypatch):
    """What a worker does: nothing asks torch for a device (no CUDA context)."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    _, _, (binding,) = module(tmp_path, 1)
    monkeypatch.setattr(torch.cuda, "device", None)
    monkeypatch.setattr(torch.cuda, "current_device", None)
    binding.precompile(H100)
    assert len(cubins(tmp_path / "triton")) == 1


@pytest.mark.parametrize("setting", [None, "0"], ids=["static", "off"])
def test_precompiling_builds_tritons_launcher_only_where_torchs_is_off(
    tmp_path, monkeypatch, setting
):
    """Triton 3.6 builds a host launcher per signature with a C compiler: a worker builds none
    while kernels launch through torch's launcher, and one per kernel where
    MIND_STATIC_LAUNCHER=0 turns torch's off."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    if setting is None:
        monkeypatch.delenv("MIND_STATIC_LAUNCHER", raising=False)
    else:
        monkeypatch.setenv("MIND_STATIC_LAUNCHER", setting)
    built = []
    monkeypatch.setattr(compile_job, "build_launcher", lambda compiled: built.append(compiled.name))
    _, _, (binding,) = module(tmp_path, 1)
    binding.precompile(H100)
    assert built == ([] if setting is None else ["scale0"])


def test_submitted_kernels_compile_while_the_loader_goes_on(tmp_path, pool, monkeypatch):
    """Once submitted, a module's kernels compile in the workers without the loader waiting
    (it lowers the next graph meanwhile); when it waits, nothing is left to compile here, and
    each binding is handed over to be bound as it was compiled."""
    source, path, bindings = module(tmp_path, 3)
    monkeypatch.setattr(compile_pool, "target_of", lambda device: H100)
    batch = pool.submit("module", source, path, bindings)
    deadline = time.monotonic() + 120
    while len(batch.finished) < len(bindings) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sorted(batch.finished) == [0, 1, 2]
    assert len(cubins(tmp_path / "triton")) == 3
    monkeypatch.setattr(Binding, "compile", lambda b: pytest.fail("compiled again"))
    handed = []
    batch.wait(compiled=handed.append)
    assert batch.here == 0 and sorted(b.name for b in handed) == ["scale0", "scale1", "scale2"]


@pytest.mark.parametrize(
    ("cpus", "setting", "expected"), [(16, None, 15), (2, None, 1), (64, None, 32), (16, "3", 3)]
)
def test_workers_default_to_every_cpu_but_the_loaders(monkeypatch, cpus, setting, expected):
    """One worker per CPU the process may run on, but one for the loader (which compiles too),
    at most 32 (Inductor's limit); `MIND_COMPILE_WORKERS` overrides."""
    monkeypatch.setattr(compile_pool, "_cpus", lambda: cpus)
    if setting is None:
        monkeypatch.delenv("MIND_COMPILE_WORKERS", raising=False)
    else:
        monkeypatch.setenv("MIND_COMPILE_WORKERS", setting)
    assert compile_pool.workers() == expected


def test_the_first_target_waits_for_the_drivers_preparation(monkeypatch):
    """Triton's driver is made in a thread while the first graph compiles (its first use builds
    C utilities); the loader's first target waits for that thread, so the driver is never made
    twice at once."""
    prepared = threading.Event()

    def prepare():
        time.sleep(0.2)
        prepared.set()

    monkeypatch.setattr(compile_pool, "_prepare", prepare)
    monkeypatch.setattr(compile_pool, "target_of", lambda device: prepared.is_set() and H100)
    compile_pool._preparing.cache_clear()
    try:
        assert compile_pool.Pool(0).target("cuda:0") == H100
    finally:
        compile_pool._preparing.cache_clear()


def test_the_kernels_of_every_emitted_module_run_without_torch(tmp_path):
    """What a worker runs of a generated module, its kernels (`compile_job.kernels_of`), needs
    no torch: every module of the triton, combo-kernel and matmul-template lit inputs (templates
    with prologues and epilogues, combo kernels, scans, cooperative and autotuned kernels,
    asserts) defines its kernels in a process where importing torch fails."""
    from mind.parser import parse
    from mind.passes import run_pipeline
    from mind.target.triton import emit

    from mind.options import PIPELINE

    lit = Path(__file__).resolve().parent.parent / "lit_tests"
    after_templates = PIPELINE[PIPELINE.index("realize") :]
    inputs = {
        "triton/*.scheduled": "to-triton{autotune=true}",
        "combo_kernels/*.scheduled": "combo-kernels,to-triton",
        "mm_templates/*.loops": f"mm-templates{{select=template}},{after_templates}",
    }
    sources = {}
    for pattern, pipeline in inputs.items():
        for test in sorted(lit.glob(pattern)):
            for k, part in enumerate(test.read_text().split("// -----")):
                module = run_pipeline(parse(part, str(test)), pipeline)
                kernels = [op.symbol for op in module.ops if op.name == "triton.kernel"]
                sources[f"{test.parent.name}_{test.stem}_{k}"] = (emit(module), kernels)
    assert sum(len(kernels) for _, kernels in sources.values()) > 80
    assert any("combo" in k for _, kernels in sources.values() for k in kernels)
    assert any("_tem_" in k for _, kernels in sources.values() for k in kernels)
    script = (
        "import pickle, sys\n"
        "from mind.runtime import compile_job\n"
        "compile_job.block_torch()\n"
        "for name, (source, kernels) in pickle.loads(sys.stdin.buffer.read()).items():\n"
        "    namespace = compile_job.run_kernels(name, source, name)\n"
        "    assert all(k in namespace for k in kernels), name\n"
        "print('ok')\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], input=pickle.dumps(sources), capture_output=True
    )
    assert run.returncode == 0, run.stderr.decode()[-2000:]
    assert run.stdout.decode().strip() == "ok"


def test_who_compiled_each_kernel_is_counted(tmp_path, pool, monkeypatch):
    """`counters["mind_compile"]`: kernels compiled by the loading process and by the workers,
    as the models benchmark reports a first call's."""
    from torch._dynamo.utils import counters

    source, path, bindings = module(tmp_path, 4)
    monkeypatch.setattr(compile_pool, "target_of", lambda device: H100)
    monkeypatch.setattr(Binding, "compile", lambda b: b.precompile(H100))
    assert all(worker.ready.wait(120) for worker in pool.workers)
    counters["mind_compile"].clear()
    batch = pool.submit("module", source, path, bindings)
    batch.wait()
    assert dict(counters["mind_compile"]) == {"here": batch.here, "workers": 4 - batch.here}
    counters["mind_compile"].clear()
    compile_pool.Pool(0).submit("module", source, path, bindings).wait()
    assert dict(counters["mind_compile"]) == {"here": 4, "workers": 0}
