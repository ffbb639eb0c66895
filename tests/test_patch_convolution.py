"""A 16-bit convolution whose stride is its kernel (a patch embedding) is a matmul over the
patches (passes/aten_rules/convolution.py): the rule equals the library's convolution and its
backward, element for element and stride for stride; a patch embedding compiled by mind runs
no convolution and matches eager; other convolutions stay the library's."""

from __future__ import annotations

import pytest
import torch
from mind.passes.aten_rules.convolution import _convolution, _convolution_backward
from programs import no_fallback
from torch import nn

import mind

aten = torch.ops.aten

#: (image shape, kernel, bias, which is channels-last): 1-, 2- and 3-d, tails shorter than a
#: patch, a channels-last image or weight (the library's results are channels-last then)
CASES = {
    "2d": ((2, 3, 8, 8), (4, 4), True, ""),
    "2d-tails": ((2, 3, 10, 9), (4, 3), False, ""),
    "1d-tail": ((2, 5, 13), (4,), True, ""),
    "3d": ((1, 2, 6, 6, 4), (2, 3, 2), True, ""),
    "2d-channels-last-image": ((2, 3, 8, 6), (2, 3), True, "x"),
    "2d-channels-last-weight": ((2, 3, 8, 6), (2, 3), False, "w"),
}


def _case(name: str, dtype: torch.dtype = torch.bfloat16):
    shape, kernel, bias, channels_last = CASES[name]
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=gen).to(dtype)
    w = torch.randn(7, shape[1], *kernel, generator=gen).to(dtype)
    if channels_last:
        x, w = (
            t.to(memory_format=torch.channels_last) if n == channels_last else t
            for n, t in zip("xw", (x, w))
        )
    b = torch.randn(7, generator=gen).to(dtype) if bias else None
    rank = len(kernel)
    return x, w, b, (list(kernel), [0] * rank, [1] * rank, False, [0] * rank, 1)


@pytest.mark.parametrize("name", CASES)
def test_the_rule_is_the_librarys_convolution(name):
    x, w, b, args = _case(name)
    want, got = aten.convolution(x, w, b, *args), _convolution(x, w, b, *args)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert got.stride() == want.stride()
    grad = torch.randn(want.shape, generator=torch.Generator().manual_seed(1)).to(want.dtype)
    sizes = None if b is None else [7]
    mask = [True, True, b is not None]
    wants = aten.convolution_backward(grad, x, w, sizes, *args, mask)
    gots = _convolution_backward(grad, x, w, sizes, *args, mask)
    for got, want in zip(gots, wants):
        assert (got is None) == (want is None)
        if want is not None:
            torch.testing.assert_close(got, want, rtol=0, atol=0)
            assert got.stride() == want.stride()


def test_what_is_no_patch_embedding_stays_the_librarys():
    """fp32 (cuDNN may run it in TF32, a matmul would not), an overlapping stride, padding,
    groups and a 1×1 kernel: the rule leaves the convolution to the library."""
    x, w, _, args = _case("2d", torch.float32)
    x16, w16 = x.bfloat16(), w.bfloat16()
    overlapping = ([2, 2], *args[1:])
    padded = (args[0], [1, 1], *args[2:])
    grouped = (*args[:-1], 3)
    pointwise = ([1, 1], *args[1:])
    for image, weight, conv in [
        (x, w, args),
        (x16, w16, overlapping),
        (x16, w16, padded),
        (x16, w16.view(21, 1, 4, 4), grouped),
        (x16, w16[:, :, :1, :1], pointwise),
    ]:
        assert _convolution(image, weight, None, *conv) is NotImplemented
        grad = aten.convolution(image, weight, None, *conv)
        mask = [True, True, False]
        assert _convolution_backward(grad, image, weight, None, *conv, mask) is NotImplemented
    assert _convolution(x16, w16, None, *args) is not NotImplemented


def _loss(out: torch.Tensor) -> torch.Tensor:
    """A sum weighted by fixed random numbers (of a normalized output, the sum of squares is
    constant, and its gradients are rounding noise)."""
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(2))
    return (out.float() * weights).sum()


class PatchEmbedding(nn.Module):
    """A ViT's patch embedding: patches, a class token before them, a layer norm."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Conv2d(3, 8, 4, 4)
        self.cls = nn.Parameter(torch.randn(1, 1, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.proj(x).flatten(2).transpose(1, 2)
        y = torch.cat([self.cls.expand(y.shape[0], -1, -1), y], 1)
        return nn.functional.layer_norm(y, (8,))


@pytest.mark.usefixtures("isolated_runtime")
def test_a_patch_embedding_trains_as_matmuls_and_matches_eager(tmp_path, monkeypatch):
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    torch.manual_seed(0)
    net = PatchEmbedding().bfloat16()
    ref = PatchEmbedding().bfloat16()
    ref.load_state_dict(net.state_dict())
    x = torch.randn(2, 3, 10, 10).bfloat16()  # a tail of 2 rows and columns, dropped
    xs = [x.clone().requires_grad_() for _ in range(2)]
    with no_fallback():
        got = torch.compile(net, backend="mind")(xs[0])
    want = ref(xs[1])
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    _loss(got).backward()
    _loss(want).backward()
    pairs = [(xs[0].grad, xs[1].grad)]
    pairs += [(p.grad, q.grad) for p, q in zip(net.parameters(), ref.parameters())]
    for a, b in pairs:
        torch.testing.assert_close(a, b, rtol=2e-2, atol=2e-2 * b.abs().max().item())
    forward = (tmp_path / "graph0_forward.00.aten").read_text()
    backward = (tmp_path / "graph0_backward.00.aten").read_text()
    assert "aten.addmm.default" in forward and "convolution" not in forward
    assert backward.count("aten.mm.default") == 2 and "convolution" not in backward
    # the input gradient: the patches' rows put back, zeros where the tail was dropped
    assert "aten.constant_pad_nd.default(" in backward
    assert mind  # the backend is registered by importing mind


@pytest.mark.usefixtures("isolated_runtime")
def test_a_patch_embedding_under_dynamic_shapes_trains_and_matches_eager():
    """Sizes as symbols, a square image first and then one with tails: every graph compiles
    at each size. (The square image's graph types the patch width as torch's fake view makes
    it, `3*floor(s/floor(s/4))**2`, which merge-loops must sample where it is undefined.)"""
    torch.manual_seed(0)
    net = PatchEmbedding().bfloat16()
    fn = torch.compile(net, backend="mind", dynamic=True)
    for shape in [(2, 3, 8, 8), (3, 3, 13, 10)]:
        x = torch.randn(shape).bfloat16()
        with no_fallback():
            got = fn(x)
        _loss(got).backward()
        grad, net.proj.weight.grad = net.proj.weight.grad, None
        want = net(x)
        _loss(want).backward()
        torch.testing.assert_close(got, want, rtol=0, atol=0)
        scale = net.proj.weight.grad.abs().max().item()
        torch.testing.assert_close(grad, net.proj.weight.grad, rtol=2e-2, atol=2e-2 * scale)
        net.zero_grad(set_to_none=True)
