"""What each rank runs in tests/test_distributed.py: compiled training steps and collectives,
each checked on the rank against the same program run eagerly (gradients included)."""

from __future__ import annotations

import copy
import re
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from programs import no_fallback

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `benchmarks`, a plain folder

from benchmarks import parallel  # noqa: E402
from benchmarks.gpt import GPT, TINY, batch  # noqa: E402

TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}


class CountingBackend:
    """mind's backend, counting the graphs Dynamo gives it."""

    def __init__(self):
        from mind.backend import mind_backend

        self.backend = mind_backend
        self.graphs = 0

    def __call__(self, gm, example_inputs):
        self.graphs += 1
        return self.backend(gm, example_inputs)


def _local(t: torch.Tensor) -> torch.Tensor:
    """A DTensor's shard (FSDP2 and SimpleFSDP gradients), a plain tensor as it is."""
    return t.to_local() if hasattr(t, "to_local") else t


def train_and_compare(
    name: str, rank: int, backend="mind", wrap=None, steps: int = 2
) -> parallel.Strategy:
    """`steps` SGD steps of strategy `name` compiled by `backend` and eagerly, from the same
    model on the same data (each rank its own): the same loss and gradients at each step."""
    strategy = parallel.STRATEGIES[name]
    mesh = _mesh()
    torch.manual_seed(0)
    model = GPT(TINY)
    data = batch(TINY, 2, seed=rank)
    with parallel.dynamo_config(strategy):  # DDP picks its reducer when it wraps
        compiled, eager = ((wrap or strategy.wrap)(m, mesh) for m in (model, copy.deepcopy(model)))
        runs = [
            parallel.training_step(strategy, m, b)
            for m, b in ((compiled, backend), (eager, "eager"))
        ]
        optimizers = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (compiled, eager)]
        for _ in range(steps):
            with no_fallback():
                loss = runs[0](*data)
            torch.testing.assert_close(loss, runs[1](*data), **TOLERANCE)
            for (p, got), want in zip(compiled.named_parameters(), eager.parameters()):
                torch.testing.assert_close(_local(got.grad), _local(want.grad), msg=p, **TOLERANCE)
            for opt in optimizers:
                opt.step()
                opt.zero_grad()
    return strategy


def _mesh():
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh("cpu", (dist.get_world_size(),))


def compiled_modules() -> str:
    """The modules mind generated in this process (its cache keeps them), as one text."""
    from mind.runtime.cache import cache_dir

    return "\n".join(p.read_text() for p in cache_dir().rglob("*.py"))


def calls_collective(sources: str, kind: str) -> bool:
    """Whether `sources` call functional collective `kind`, or its `_out` overload (a CPU
    all_gather's: target/bindings.py)."""
    return re.search(rf"_c10d_functional\.{kind}(_out)?\.default", sources) is not None


def ddp_step(rank: int, world: int) -> None:
    """DDP: Dynamo's DDPOptimizer splits the model at bucket boundaries, each piece a graph."""
    dist._DEFAULT_FIRST_BUCKET_BYTES = 4096  # small buckets: several on a tiny model
    backend = CountingBackend()
    train_and_compare("ddp", rank, backend, wrap=lambda m, mesh: parallel.ddp(m, mesh, 0.02))
    assert backend.graphs > 2, f"DDPOptimizer split the model into {backend.graphs} graphs"


def ddp_compiled_autograd_step(rank: int, world: int) -> None:
    """DDP under compiled autograd with Dynamo's Python reducer: the backward graph all-reduces
    each gradient with functional collectives, in mind's IR."""
    train_and_compare("ddp-ca", rank)
    assert "_c10d_functional.all_reduce.default" in compiled_modules()


def fsdp2_step(rank: int, world: int) -> None:
    """FSDP2: the compiled graphs compute; FSDP's hooks, which Dynamo leaves to run eagerly,
    all-gather parameters and reduce-scatter gradients around them."""
    train_and_compare("fsdp2", rank)


def simple_fsdp_step(rank: int, world: int) -> None:
    """Parameters sharded as DTensors: the forward graph all-gathers them, the backward graph
    reduce-scatters their gradients, in mind's IR."""
    train_and_compare("simple-fsdp", rank)
    sources = compiled_modules()
    for kind in ("all_gather_into_tensor", "reduce_scatter_tensor"):
        assert calls_collective(sources, kind), kind


def _funcol(name: str):
    """A functional collective by its current name (torch 2.14 renamed `*_tensor*` to
    `*_single*`), else by its old one."""
    import torch.distributed._functional_collectives as funcol

    return getattr(funcol, name.replace("_tensor", "_single"), None) or getattr(funcol, name)


def collectives_program(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Every kind of functional collective, with compute between, gradients through the
    differentiable ones (all_gather's backward reduce-scatters, and the other way round)."""
    import torch.distributed._functional_collectives as funcol

    group = dist.group.WORLD
    gathered = _funcol("all_gather_tensor_autograd")(torch.tanh(x), 0, group)
    h = gathered @ w
    scattered = _funcol("reduce_scatter_tensor_autograd")(h.relu(), "sum", 0, group)
    exchanged = funcol.all_to_all_single_autograd(scattered * 2, None, None, group)
    summed = funcol.all_reduce(x.detach().sin(), "sum", group)
    top, low = funcol.all_reduce_coalesced([x.detach(), -x.detach()], "max", group)
    sent = funcol.broadcast(x.detach() + 1, 0, group)
    loss = (exchanged * summed).sum() + (top * low * sent).mean()
    return loss, summed + top


def functional_collectives(rank: int, world: int, device: str = "cpu") -> None:
    """A compiled function calling the functional collectives directly: outputs and gradients
    against eager, every collective in mind's IR."""
    torch.manual_seed(rank)
    x = torch.randn(4, 8, device=device, requires_grad=True)
    w = torch.randn(8, 8, device=device, requires_grad=True)
    x_ref, w_ref = (t.detach().clone().requires_grad_() for t in (x, w))
    with no_fallback():
        got = torch.compile(collectives_program, backend="mind")(x, w)
        got[0].backward()
    want = collectives_program(x_ref, w_ref)
    want[0].backward()
    for g, e in [*zip(got, want), (x.grad, x_ref.grad), (w.grad, w_ref.grad)]:
        torch.testing.assert_close(g, e, **TOLERANCE)
    sources = compiled_modules()
    for kind in ("all_gather_into_tensor", "reduce_scatter_tensor", "all_to_all_single",
                 "all_reduce", "all_reduce_coalesced", "broadcast"):  # fmt: skip
        assert calls_collective(sources, kind), kind


def interpreted_collectives(rank: int, world: int) -> None:
    """The reference evaluators run collectives too: the loops and scheduled interpreters and
    the eager rebuild of the aten graph (what a fallback runs) agree, at every stage."""
    from mind.dialects.aten import export_graph
    from mind.interpreters.loops import evaluate
    from mind.interpreters.scheduled import evaluate as run_scheduled
    from mind.passes import run_pipeline

    import mind

    torch.manual_seed(rank)
    inputs = [torch.randn(4, 8), torch.randn(8, 8)]
    module = mind.capture(collectives_program, *inputs, stage="aten")
    expected = export_graph(module.ops[0])(*inputs)
    loops = run_pipeline(module, "lower,realize,inline")
    scheduled = run_pipeline(loops, "schedule,fuse,merge-loops,reorder-collectives")
    for got in (evaluate(loops.ops[0], inputs), run_scheduled(scheduled.ops[0], inputs)):
        for g, e in zip(got, expected, strict=True):
            torch.testing.assert_close(g, e)
