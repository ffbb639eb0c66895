"""The ways to train one model on the ranks of a process group that the distributed benchmark
(`benchmarks.distributed`) and tests (tests/test_distributed.py) compare, and one training step
of each under a backend: eager, or compiled by `torch.compile(backend=...)`.

| strategy | collectives | in the compiled graphs |
|---|---|---|
| `ddp` | DDP's reducer all-reduces gradient buckets; Dynamo's DDPOptimizer splits the model at bucket boundaries | no |
| `ddp-ca` | the whole step compiled, backward by compiled autograd, DDP's Python reducer all-reducing each gradient | yes |
| `fsdp2` | FSDP2 (`fully_shard` on each block and the root): its hooks all-gather parameters and reduce-scatter gradients, eagerly (Dynamo does not trace them) | no |
| `simple-fsdp` | parameters sharded as DTensors, all-gathered in the forward (`redistribute`), gradients reduce-scattered by autograd (torchtitan's SimpleFSDP) | yes |
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
from torch import nn


def ddp(model: nn.Module, mesh, bucket_cap_mb: float = 25) -> nn.Module:
    from torch.nn.parallel import DistributedDataParallel

    device = next(model.parameters()).device
    ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=ids, bucket_cap_mb=bucket_cap_mb)


def fsdp2(model: nn.Module, mesh) -> nn.Module:
    """Each block its own FSDP unit (its parameters gathered around its forward and backward),
    the root the rest."""
    from torch.distributed.fsdp import fully_shard

    for block in getattr(model, "blocks", []):
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


class SimpleFSDP(nn.Module):
    """Every parameter of `module` sharded along dim 0 over `mesh` (a DTensor); the forward
    all-gathers each (`redistribute` to Replicate) and runs `module` with the full tensors, and
    autograd reduce-scatters their gradients back to the shards (the Partial grad placement).
    Compiled, the collectives are in the graph."""

    def __init__(self, module: nn.Module, mesh):
        from torch.distributed.tensor import Shard, distribute_tensor

        super().__init__()
        self.module, self.mesh = module, mesh
        self.names = [name for name, _ in module.named_parameters()]
        self.shards = nn.ParameterList(
            nn.Parameter(distribute_tensor(p.detach(), mesh, [Shard(0)]))
            for _, p in module.named_parameters()
        )

    def forward(self, *args):
        from torch.distributed.tensor import Partial, Replicate

        full = {
            name: shard.redistribute(self.mesh, [Replicate()]).to_local(grad_placements=[Partial()])
            for name, shard in zip(self.names, self.shards)
        }
        return torch.func.functional_call(self.module, full, args)


@dataclass(frozen=True)
class Strategy:
    """How a strategy wraps the model, and how a step is compiled: the model (Dynamo compiles
    its forward, AOTAutograd the backward), or the whole step under compiled autograd with
    Dynamo's config set as `dynamo` says."""

    wrap: Callable[[nn.Module, object], nn.Module]
    whole_step: bool = False
    dynamo: dict = field(default_factory=dict)


STRATEGIES: dict[str, Strategy] = {
    "ddp": Strategy(ddp),
    "ddp-ca": Strategy(
        ddp,
        whole_step=True,
        dynamo={"optimize_ddp": "python_reducer", "compiled_autograd": True},
    ),
    "fsdp2": Strategy(fsdp2),
    "simple-fsdp": Strategy(SimpleFSDP),
}


@contextlib.contextmanager
def dynamo_config(strategy: Strategy) -> Iterator[None]:
    """Dynamo's config as the strategy needs it, restored after."""
    import torch._dynamo

    with torch._dynamo.config.patch(**strategy.dynamo):
        yield


def loss_step(module: nn.Module, *data: torch.Tensor) -> torch.Tensor:
    """Forward, loss, backward: the gradients land in the parameters."""
    loss = module(*data)
    loss.backward()
    return loss.detach()


def training_step(strategy: Strategy, module: nn.Module, backend: str | Callable) -> Callable:
    """`step(*data) -> loss` for the wrapped `module`: eager, or compiled by `backend`. Run it
    inside `dynamo_config(strategy)`."""
    if backend == "eager":
        return lambda *data: loss_step(module, *data)
    if strategy.whole_step:
        compiled = torch.compile(loss_step, backend=backend)
        return lambda *data: compiled(module, *data)
    compiled_module = torch.compile(module, backend=backend)
    return lambda *data: loss_step(compiled_module, *data)
