"""Small PyTorch programs that exercise capture and lowering: shared by several test files."""

from __future__ import annotations

import warnings
from contextlib import contextmanager

import pytest
import torch
import torch.nn.functional as F


def _r(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


def seed(a, b, c):
    return ((a + b) * c.relu()).sum(dim=-1)


def views(x):
    return (
        x.view(8, 64).permute(1, 0).contiguous()
        + x.t().reshape(64, 8)[:, 1:7:2].sum()
        + x[1].view(64, 1)
    )


def broadcasting(a, b):
    return a + b * 2.0


def bf16(x):
    return (x.to(torch.bfloat16) * 2).float() + 1


def integers(i):
    return (i + 3) // 2, i % 5, i > 2


def embedding(idx, w):
    return F.embedding(idx, w) * 2


def multiple_outputs(a, b):
    return a + b, a * b, (a - b).amax(dim=0)


def constants(x):
    return x + torch.tensor([1.0, 2.0, 3.0], device=x.device)


def softmax_layer_norm(x):
    return F.layer_norm(torch.softmax(x, dim=-1), (x.shape[-1],))


def reductions(x):
    return x.mean(dim=(0, 2), keepdim=True), x.var(1), x.argmax(-1)


def linear_gelu(x, w, b):
    return F.gelu(F.linear(x, w, b), approximate="tanh")


def cat_where(a, b):
    return torch.where(a > 0, torch.cat([a, b], dim=1)[:, :4], b.clamp(min=-0.5))


PROGRAMS: dict[str, tuple] = {
    "seed": (seed, lambda: (_r(4, 128), _r(4, 128), _r(4, 128))),
    "views": (views, lambda: (_r(8, 64),)),
    "broadcasting": (broadcasting, lambda: (_r(4, 1), _r(1, 8))),
    "bf16": (bf16, lambda: (_r(16, 8),)),
    "integers": (integers, lambda: (torch.randint(-10, 10, (6, 5)),)),
    "embedding": (embedding, lambda: (torch.randint(0, 10, (3, 4)), _r(10, 16))),
    "multiple_outputs": (multiple_outputs, lambda: (_r(5, 6), _r(5, 6))),
    "constants": (constants, lambda: (_r(2, 3),)),
    "softmax_layer_norm": (softmax_layer_norm, lambda: (_r(4, 32),)),
    "reductions": (reductions, lambda: (_r(3, 4, 5),)),
    "linear_gelu": (linear_gelu, lambda: (_r(8, 16), _r(32, 16), _r(32))),
    "cat_where": (cat_where, lambda: (_r(4, 4), _r(4, 4))),
}


def mlp_training_step(device: str = "cpu", batch: int = 4, width: int = 16):
    """A small MLP (Linear, GELU, LayerNorm, Linear, MSE loss): the step function, the model, an
    identical reference model and the inputs, to compare a compiled step with eager."""
    import copy

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(width, 2 * width),
        torch.nn.GELU(),
        torch.nn.LayerNorm(2 * width),
        torch.nn.Linear(2 * width, 8),
    ).to(device)
    reference = copy.deepcopy(model)
    x, y = torch.randn(batch, width, device=device), torch.randn(batch, 8, device=device)

    def step(m, x, y):
        loss = F.mse_loss(m(x), y)
        loss.backward()
        return loss

    return step, model, reference, x, y


class ConvNet(torch.nn.Module):
    """conv-bn-relu-conv, a residual add, relu."""

    def __init__(self, channels: int = 16):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, channels, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(channels)
        self.conv2 = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv1(x)))
        return torch.relu(self.conv2(y) + y)


def conv_net(channels: int = 16, device: str = "cpu", batch: int = 2, size: int = 8):
    """A ConvNet and an input image for it."""
    torch.manual_seed(0)
    return ConvNet(channels).to(device), torch.randn(batch, 3, size, size, device=device)


def assert_same_step(compiled_loss, step, model, reference, x, y, **tol) -> None:
    """Eager's loss and every parameter's gradient, against the compiled step's."""
    torch.testing.assert_close(compiled_loss, step(reference, x, y), **tol)
    for (name, got), want in zip(model.named_parameters(), reference.parameters()):
        torch.testing.assert_close(got.grad, want.grad, msg=name, **tol)


#: the marks of a test that needs a CUDA GPU (skipped without one)
NEEDS_GPU = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
#: the marks of a test module that runs compiled Triton on a CUDA GPU
ON_GPU = [*NEEDS_GPU, pytest.mark.usefixtures("compiled_for_the_gpu")]
#: the "cuda" parameter of a test that runs on the CPU too (it asks for `compiled_for_the_gpu`
#: itself when it gets this one)
CUDA = pytest.param("cuda", marks=NEEDS_GPU)


@contextmanager
def no_fallback():
    """Inside, a graph mind falls back on is an error, not a warning."""
    from mind.backend import MindFallbackWarning

    with warnings.catch_warnings():
        warnings.simplefilter("error", MindFallbackWarning)
        yield


def compile_strictly(fn, *args):
    """Run `fn` compiled by mind, from a fresh Dynamo, with no fallback allowed."""
    torch._dynamo.reset()
    with no_fallback():
        return torch.compile(fn, backend="mind")(*args)
