"""Compiled optimizer steps: what `optimizer.step()` traces to.

- The foreach ops (`foreach=True`, the default on a GPU) become each tensor's ops
  (passes/aten_rules/foreach.py), and each parameter's update fuses into kernels: no ATen
  foreach call is left. The parameters' updates then run as combo kernels
  (passes/combo_kernels.py): fewer launches than parameters.
- The copies into the parameters and the optimizer's state come last, each after every copy
  whose value reads what it overwrites (passes/lower.py). Where two read each other's (a Nesterov
  step's gradient and momentum buffer), one copies from its value computed before the copies.
- Dynamo writes Inductor's `prims.fma` for `addcmul_`; it lowers to a multiply and an add.

Against eager, on CPU tensors; Adam's steps differ from eager's as much as Inductor's do."""

from __future__ import annotations

import copy
import re

import pytest
import torch
from programs import no_fallback

pytestmark = pytest.mark.usefixtures("isolated_runtime")

OPTIMIZERS = {
    "adamw": (torch.optim.AdamW, {"lr": 0.01, "weight_decay": 0.1}),
    "adam-amsgrad": (torch.optim.Adam, {"lr": 0.01, "amsgrad": True}),
    "sgd-momentum": (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9}),
    "sgd-nesterov": (torch.optim.SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": True}),
    "rmsprop-centered": (torch.optim.RMSprop, {"lr": 0.01, "momentum": 0.5, "centered": True}),
    "asgd": (torch.optim.ASGD, {"lr": 0.1}),  # `_foreach_maximum` of a number
    "nadam": (torch.optim.NAdam, {"lr": 0.01}),
}


def steps(name: str, foreach: bool, tmp_path, monkeypatch) -> tuple[float, str]:
    """Three steps compiled and three eager from the same start: the largest difference of the
    parameters after them, and the emitted Python."""
    cls, kwargs = OPTIMIZERS[name]
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(10, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
    reference = copy.deepcopy(model)
    optimizer = cls(model.parameters(), foreach=foreach, **kwargs)
    eager = cls(reference.parameters(), foreach=foreach, **kwargs)
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    step = torch.compile(optimizer.step, backend="mind")
    with no_fallback():
        for _ in range(3):
            x = torch.randn(3, 10)
            for m in (model, reference):
                m.zero_grad()
                m(x).square().sum().backward()
            step()
            eager.step()
    source = "\n".join(p.read_text() for p in sorted(tmp_path.glob("*.py")))
    apart = max(
        (p - q).abs().max().item() for p, q in zip(model.parameters(), reference.parameters())
    )
    return apart, source


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_a_foreach_step_fuses_each_parameters_update(name, tmp_path, monkeypatch):
    apart, source = steps(name, True, tmp_path, monkeypatch)
    assert apart < (1e-4 if "adam" in name else 1e-5)
    assert "_foreach_" not in source and "@triton.jit" in source
    launches = re.findall(r"^    triton_\w+_launch\(", source, re.M)
    assert "triton_combo_fused_" in source and len(launches) < 4  # the model's four tensors


@pytest.mark.parametrize("name", ["sgd-momentum", "sgd-nesterov"])
def test_a_step_for_each_parameter_in_turn_matches_eager(name, tmp_path, monkeypatch):
    apart, _ = steps(name, False, tmp_path, monkeypatch)
    assert apart < 1e-6


def test_copies_into_inputs_wait_for_the_copies_that_read_them():
    """The momentum buffer's copy is AOTAutograd's first, and the parameter's value reads it."""
    from mind.passes.lower import input_writes_ordered

    buf, param, grad = torch.zeros(4), torch.zeros(4), torch.ones(4)
    step = lambda b, p, g: (b.mul_(0.9).add_(g), p.add_(b, alpha=-0.1))  # noqa: E731
    traced = list(aten_graph(step, buf, param, grad).body.ops)
    before, after = ([op.args[0] for op in ops if op.name == "aten.copy_.default"]
                     for ops in (traced, input_writes_ordered(traced)))  # fmt: skip
    assert after == before[::-1]  # the buffer's (AOTAutograd's first) after the parameter's


def aten_graph(fn, *args):
    import mind

    (graph,) = mind.capture(fn, *args, stage="aten").ops
    return graph


@pytest.mark.parametrize("mark_grads", [False, True])
def test_cuda_graphs_read_the_state_and_marked_gradients_in_place(mark_grads, monkeypatch):
    """Dynamo marks an optimizer's parameters and state as static addresses, AOTAutograd lists
    them as static inputs, and a recording reads those in place; gradients are copied in
    before each replay unless `mark_static_address` marks them too (README, CUDA graphs)."""
    import mind.backend

    seen = []
    read = mind.backend._static_inputs

    def spy(graph):
        seen.append((graph, read(graph)))
        return seen[-1][1]

    monkeypatch.setattr(mind.backend, "_static_inputs", spy)
    params = [torch.nn.Parameter(torch.randn(4, 3)) for _ in range(2)]
    for p in params:
        p.grad = torch.randn_like(p)
        if mark_grads:
            torch._dynamo.mark_static_address(p.grad)
    optimizer = torch.optim.AdamW(params, foreach=True)
    torch.compile(optimizer.step, backend="mind", mode="reduce-overhead")()
    graph, static = seen[-1]
    assert len(graph.body.args) == 10  # parameters, gradients, two moments, step counts
    assert len(static) == (10 if mark_grads else 8)
