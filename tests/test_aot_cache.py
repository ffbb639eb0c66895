"""Warm first calls: mind's compiled graphs in AOTAutograd's cache. A new process that compiles
the same program loads every graph without tracing or running a pass, and gets eager's numbers,
gradients included; whatever changes the result (the graph, an option, mind's source, the torch
or Triton version, a constant) misses; a damaged module compiles again; a graph that runs
eagerly is never stored."""

from __future__ import annotations

import io
import itertools
import json
import os
import pickle
import subprocess
import sys
import warnings

import pytest
import torch
import torch.nn.functional as F
import triton
from mind.passes import to_aten
from mind.runtime import cache, loader
from torch._dynamo.utils import counters

from mind import MindFallbackWarning, backend, runtime
from mind.compiled import MindCode
from mind.options import PIPELINE, Options

pytestmark = pytest.mark.usefixtures("isolated_runtime")


def mlp(x, w1, w2):
    return (F.gelu(x @ w1).softmax(-1) @ w2).tanh()


def mlp_inputs():
    torch.manual_seed(0)
    x = torch.randn(8, 16)
    return x, torch.randn(16, 32, requires_grad=True), torch.randn(32, 4, requires_grad=True)


class Compiles:
    """One compile of `fn` as a new process would: Dynamo and the loaded modules forgotten, only
    the disk left. Counts AOTAutograd's cache hits and misses and the graphs mind generated."""

    def __init__(self, monkeypatch):
        self.generated: list[str] = []
        generate = backend.generate

        def counting(graph, *args):
            self.generated.append(graph.symbol)
            return generate(graph, *args)

        monkeypatch.setattr(backend, "generate", counting)
        self.monkeypatch = monkeypatch

    def __call__(self, fn, *inputs, backward: bool = False, **options):
        self.monkeypatch.setattr(loader, "_MODULES", {})
        self.monkeypatch.setattr(backend, "_GRAPH_NAMES", (f"graph{i}" for i in itertools.count()))
        torch._dynamo.reset()
        counters.clear()
        self.generated.clear()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out = torch.compile(fn, backend="mind", **options)(*inputs)
            if backward:
                out.sum().backward()
        self.warned = [str(w.message) for w in caught if w.category is MindFallbackWarning]
        self.hits = counters["aot_autograd"]["autograd_cache_hit"]
        self.misses = counters["aot_autograd"]["autograd_cache_miss"]
        return out


def grads(inputs) -> list[torch.Tensor]:
    out = [t.grad for t in inputs if t.requires_grad]
    for t in inputs:
        t.grad = None
    return out


def test_a_warm_compile_loads_forward_and_backward_and_matches_eager(monkeypatch):
    compiles, inputs = Compiles(monkeypatch), mlp_inputs()
    mlp(*inputs).sum().backward()
    want = grads(inputs)
    cold = compiles(mlp, *inputs, backward=True)
    assert compiles.misses == 1 and compiles.generated == ["graph0_forward", "graph0_backward"]
    torch.testing.assert_close(grads(inputs), want)
    warm = compiles(mlp, *inputs, backward=True)
    assert (compiles.hits, compiles.misses, compiles.generated, compiles.warned) == (1, 0, [], [])
    torch.testing.assert_close(warm, cold)
    torch.testing.assert_close(grads(inputs), want)


def test_aotautograd_tells_on_trace_only_when_it_traces(monkeypatch):
    """The backend starts its compile workers from `on_trace`: a graph loaded from the cache
    compiles nothing, and starts none."""
    traced = []
    aten_graphs = to_aten.aten_graphs

    def recording(*args, on_trace=None, **kwargs):
        return aten_graphs(*args, on_trace=lambda: traced.append(len(traced)), **kwargs)

    monkeypatch.setattr(to_aten, "aten_graphs", recording)
    compiles, inputs = Compiles(monkeypatch), mlp_inputs()
    compiles(mlp, *inputs, backward=True)
    assert traced == [0] and compiles.misses == 1
    compiles(mlp, *inputs, backward=True)
    assert traced == [0] and compiles.hits == 1


WARM_PROCESS = """
import json, sys
import torch
import mind.backend as backend
from torch._dynamo.utils import counters
sys.path.insert(0, sys.argv[1])
from test_aot_cache import grads, mlp, mlp_inputs

generated = []
generate = backend.generate
backend.generate = lambda graph, *a: generated.append(graph.symbol) or generate(graph, *a)
inputs = mlp_inputs()
mlp(*inputs).sum().backward()
want = grads(inputs)
torch.compile(mlp, backend="mind")(*inputs).sum().backward()
errors = [(g - w).abs().max().item() for g, w in zip(grads(inputs), want)]
rules = "mind.passes.aten_rules" in sys.modules  # made with the decomposition table
row = {"generated": generated, "errors": errors, "rules": rules, **counters["aot_autograd"]}
print(json.dumps(row))
"""


def test_a_warm_process_runs_no_pass_and_gets_eagers_gradients(tmp_path):
    """The real thing: two processes sharing only the caches on disk. The warm one traces
    nothing, so it makes no decomposition table either."""
    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path / "triton"))
    args = [sys.executable, "-c", WARM_PROCESS, os.path.dirname(__file__)]
    runs = []
    for _ in range(2):
        proc = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    cold, warm = runs
    assert cold["generated"] and cold["autograd_cache_saved"] == 1 and cold["rules"]
    assert warm["generated"] == [] and warm["autograd_cache_hit"] == 1 and not warm["rules"]
    assert max(cold["errors"] + warm["errors"]) < 1e-4


@pytest.mark.parametrize(
    "change",
    ["the graph", "an option", "mind's source", "torch's version", "Triton's version", "none"],
)
def test_what_changes_the_result_misses(monkeypatch, change):
    compiles, inputs = Compiles(monkeypatch), mlp_inputs()
    fn, options = mlp, {}
    with torch.no_grad():
        compiles(fn, *inputs)
        if change == "the graph":
            fn = lambda x, w1, w2: mlp(x, w1, w2) * 2  # noqa: E731
        elif change == "an option":
            options = {"options": {"pipeline": PIPELINE.replace(",online-softmax", "")}}
        elif change == "mind's source":
            monkeypatch.setattr(cache, "mind_fingerprint", lambda: "edited")
        elif change == "torch's version":
            monkeypatch.setattr(torch, "__version__", torch.torch_version.TorchVersion("9.9.9"))
        elif change == "Triton's version":
            monkeypatch.setattr(triton, "__version__", "9.9.9")
        torch.testing.assert_close(compiles(fn, *inputs, **options), fn(*inputs))
    hit = change == "none"
    assert (compiles.hits, compiles.misses, bool(compiles.generated)) == (hit, not hit, not hit)


def test_mind_s_source_means_every_compiler_package_loaded_or_not():
    """A process asks the caches before passes, codegen and the analyses load (they load on
    first use): the fingerprint must still hash them. It hashed only the packages loaded, so
    an edited analysis/phases.py served the module compiled before the edit."""
    code = "from mind.runtime import cache; print(*cache.compiler_sources(), sep='\\n')"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    names = {os.path.relpath(p, root) for p in run.stdout.split()}
    wanted = {"analysis/phases.py", "codegen/cooperative.py", "passes/lowerings/scatter.py"}
    assert wanted | {"parser/mind.lark", "runtime/cache.py", "mind/backend.py"} <= names
    assert not any(n.startswith("tools/") for n in names)


def test_the_tag_holds_the_values_of_the_graphs_constants():
    """AOTAutograd keys a Dynamo graph's tensor attributes by their metadata only."""

    def graph_with(value: float) -> torch.fx.GraphModule:
        root = torch.nn.Module()
        root.register_buffer("c", torch.full((3,), value))
        graph = torch.fx.Graph()
        x = graph.placeholder("x")
        graph.output(graph.call_function(torch.add, (x, graph.get_attr("c"))))
        return torch.fx.GraphModule(root, graph)

    tags = {backend.cache_tag(graph_with(v), Options(), cuda=False) for v in (1, 1, 2)}
    assert len(tags) == 2


def test_a_damaged_module_compiles_again_and_is_repaired(monkeypatch):
    compiles, inputs = Compiles(monkeypatch), mlp_inputs()
    with torch.no_grad():
        want = compiles(mlp, *inputs)
        (module,) = runtime.cache_dir().glob("??/*.py")
        module.write_text(module.read_text().replace("XBLOCK", "YBLOCK", 1))
        torch.testing.assert_close(compiles(mlp, *inputs), want)
        assert compiles.generated == ["graph0_forward"] and not compiles.warned
        torch.testing.assert_close(compiles(mlp, *inputs), want)
        assert compiles.hits == 1 and not compiles.generated


def test_a_graph_that_runs_eagerly_is_not_stored(monkeypatch):
    def failing(graph, *args):
        raise RuntimeError("generation failed on purpose")

    compiles, inputs = Compiles(monkeypatch), mlp_inputs()
    monkeypatch.setattr(backend, "generate", failing)
    with torch.no_grad():
        for _ in range(2):
            torch.testing.assert_close(compiles(mlp, *inputs), mlp(*inputs))
            assert compiles.hits == 0 and len(compiles.warned) == 1


def test_a_loaded_graph_whose_first_call_fails_runs_aotautograds_graph(monkeypatch):
    compiles, inputs = Compiles(monkeypatch), mlp_inputs()
    with torch.no_grad():
        compiles(mlp, *inputs)
        load = runtime.load

        def failing_load(*args, **kwargs):
            program = load(*args, **kwargs)

            def call(args):
                raise RuntimeError("first call failed on purpose")

            monkeypatch.setattr(program, "call", call)
            return program

        monkeypatch.setattr(runtime, "load", failing_load)
        torch.testing.assert_close(compiles(mlp, *inputs), mlp(*inputs))
    assert compiles.hits == 1 and len(compiles.warned) == 1 and "on purpose" in compiles.warned[0]


def scaled(x):
    return x * torch.tensor([1.0, 2.0, 3.0], device=x.device) + 1


class RefusingTensors(pickle.Pickler):
    """Pickles as torch 2.11's AOTAutograd cache does under the compile's fake mode, where a GPU
    tensor fails ("Please convert all Tensors to FakeTensors"): any tensor fails."""

    def persistent_id(self, obj):
        if isinstance(obj, torch.Tensor):
            raise pickle.PicklingError(f"a tensor in the entry: {tuple(obj.shape)}")


def test_a_graph_with_a_tensor_constant_is_stored_without_tensors(monkeypatch):
    """The ATen graph kept for the eager fallback holds a lifted `torch.tensor([...])`: stored
    as bytes of its own, and real (not fake) again when a loaded graph's first call fails."""
    stored = []
    prepare = MindCode.prepare_for_serialization

    def refusing_tensors(code):
        prepare(code)
        RefusingTensors(io.BytesIO()).dump(code)
        stored.append(code)

    monkeypatch.setattr(MindCode, "prepare_for_serialization", refusing_tensors)
    compiles, x = Compiles(monkeypatch), torch.randn(4, 3)
    compiles(scaled, x)
    assert len(stored) == 1 and compiles.misses == 1
    load = runtime.load

    def failing_load(*args, **kwargs):
        program = load(*args, **kwargs)
        monkeypatch.setattr(program, "call", lambda args: 1 / 0)
        return program

    monkeypatch.setattr(runtime, "load", failing_load)
    torch.testing.assert_close(compiles(scaled, x), scaled(x))
    assert compiles.hits == 1 and "division by zero" in compiles.warned[0]


def test_dumping_runs_every_pass_even_when_the_cache_holds_the_graph(monkeypatch, tmp_path):
    compiles, inputs = Compiles(monkeypatch), mlp_inputs()
    with torch.no_grad():
        compiles(mlp, *inputs)
        monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path / "dump"))
        compiles(mlp, *inputs)
    assert compiles.generated == ["graph0_forward"] and compiles.hits == 0
    assert len(list((tmp_path / "dump").glob("graph0_forward.*.py"))) == 1


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.usefixtures("compiled_for_the_gpu")
def test_on_the_gpu_a_warm_compile_loads_runs_and_replays(monkeypatch, mode):
    """GPU kernels compiled (in the worker pool) from the loaded modules, and recorded as CUDA
    graphs when the mode asks: three training steps give eager's gradients."""
    compiles = Compiles(monkeypatch)
    inputs = [t.detach().cuda().requires_grad_(t.requires_grad) for t in mlp_inputs()]
    mlp(*inputs).sum().backward()
    want = grads(inputs)
    for _ in range(2):  # cold, then warm
        compiles(mlp, *inputs, backward=True, mode=mode)
        compiled = torch.compile(mlp, backend="mind", mode=mode)
        for _ in range(3):
            grads(inputs)
            compiled(*inputs).sum().backward()
        torch.testing.assert_close(grads(inputs), want)
    assert (compiles.hits, compiles.generated, compiles.warned) == (1, [], [])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.usefixtures("compiled_for_the_gpu")
def test_on_the_gpu_a_graph_with_a_tensor_constant_loads_warm(monkeypatch):
    """Under torch 2.11 a GPU constant in the stored ATen graph kept the graph out of the cache."""
    compiles, x = Compiles(monkeypatch), torch.randn(4, 3, device="cuda")
    with torch.no_grad():
        compiles(scaled, x)
        torch.testing.assert_close(compiles(scaled, x), scaled(x))
    assert (compiles.hits, compiles.generated, compiles.warned) == (1, [], [])
