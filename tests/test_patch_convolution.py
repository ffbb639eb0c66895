"""A 16-bit convolution whose stride is its kernel (a patch embedding) is a matmul over the
patches, and one with few input channels (a conv net's stem) a matmul over its windows
(passes/aten_rules/convolution.py): the rules equal the library's convolution and its backward
computed exactly and rounded, element for element (within a bf16 unit where windows overlap),
with the library's strides; a patch embedding and a stem compiled by mind run no convolution and
match eager; other convolutions stay the library's."""

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


#: few input channels: (image shape, kernel, stride, padding, bias, which is channels-last): a
#: ResNet stem (7×7, stride 2, padding 3, 3 channels), 1-d with one channel, 3-d with uneven
#: strides and paddings, a channels-last image
WINDOW_CASES = {
    "stem": ((2, 3, 20, 20), (7, 7), (2, 2), (3, 3), False, ""),
    "1d-one-channel": ((2, 1, 30), (5,), (1,), (2,), True, ""),
    "3d": ((1, 2, 6, 7, 5), (3, 3, 2), (1, 2, 1), (1, 0, 1), True, ""),
    "stem-channels-last-image": ((2, 3, 11, 12), (3, 3), (2, 1), (1, 1), True, "x"),
}


def _window_case(name: str):
    shape, kernel, stride, padding, bias, channels_last = WINDOW_CASES[name]
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=gen).bfloat16()
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    w = torch.randn(7, shape[1], *kernel, generator=gen).bfloat16()
    b = torch.randn(7, generator=gen).bfloat16() if bias else None
    rank = len(kernel)
    return x, w, b, (list(stride), list(padding), [1] * rank, False, [0] * rank, 1)


@pytest.mark.parametrize("name", CASES)
def test_the_rule_is_the_librarys_convolution(name):
    _check_rule(*_case(name), input_grad=True, ulps=0)


@pytest.mark.parametrize("name", WINDOW_CASES)
def test_the_few_channel_rule_is_the_librarys_convolution(name):
    """Forward and the weight's (and bias's) gradient; asked for the input's gradient too, the
    backward is the library's."""
    x, w, b, args = _window_case(name)
    _check_rule(x, w, b, args, input_grad=False, ulps=1)
    grad = aten.convolution(x, w, b, *args)
    mask = [True, True, b is not None]
    sizes = None if b is None else [7]
    assert _convolution_backward(grad, x, w, sizes, *args, mask) is NotImplemented


def _check_rule(x, w, b, args, input_grad: bool, ulps: int) -> None:
    """The rule's results against the library's convolution in float64, rounded to the inputs'
    dtype, within `ulps` bf16 units of the largest (the sums of overlapping windows may round in
    another order), and stride for stride against the library's own. Not against the library's
    16-bit values: on a CPU without bf16 instructions its weight gradient rounds partial sums, a
    quarter of its elements a unit off the rounded exact sum."""

    def close(got, exact, library):
        want = exact.to(got.dtype)
        tol = ulps * 2**-7 * want.abs().max().item()
        torch.testing.assert_close(got, want, rtol=0, atol=tol)
        assert got.stride() == library.stride()

    def wide(t):
        return None if t is None else t.double()

    exact_args = (wide(x), wide(w), wide(b))
    library = aten.convolution(x, w, b, *args)
    close(_convolution(x, w, b, *args), aten.convolution(*exact_args, *args), library)
    grad = torch.randn(library.shape, generator=torch.Generator().manual_seed(1)).to(x.dtype)
    sizes = None if b is None else [7]
    mask = [input_grad, True, b is not None]
    libraries = aten.convolution_backward(grad, x, w, sizes, *args, mask)
    exacts = aten.convolution_backward(grad.double(), *exact_args[:2], sizes, *args, mask)
    gots = _convolution_backward(grad, x, w, sizes, *args, mask)
    for got, exact, library in zip(gots, exacts, libraries):
        assert (got is None) == (library is None)
        if library is not None:
            close(got, exact, library)


def test_fp32_patches_are_a_matmul_where_matmuls_keep_fp32(monkeypatch):
    """An fp32 patch embedding is the fp32 matmul (as exact as the library's, which may run in
    TF32); where matmuls may run in TF32 themselves (`set_float32_matmul_precision("high")`), it
    stays the library's. An fp32 stem stays the library's: its rule was measured in 16 bits."""
    x, w, b, args = _case("2d-tails", torch.float32)
    want, got = aten.convolution(x, w, b, *args), _convolution(x, w, b, *args)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    grad = torch.randn(want.shape, generator=torch.Generator().manual_seed(1))
    wants = aten.convolution_backward(grad, x, w, [7], *args, [True, True, True])
    gots = _convolution_backward(grad, x, w, [7], *args, [True, True, True])
    for got, want in zip(gots, wants):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    monkeypatch.setattr(torch, "get_float32_matmul_precision", lambda: "high")
    assert _convolution(x, w, b, *args) is NotImplemented
    stem_x, stem_w, _, stem_args = _window_case("stem")
    assert _convolution(stem_x.float(), stem_w.float(), None, *stem_args) is NotImplemented


def test_what_is_no_patch_embedding_nor_few_channels_stays_the_librarys():
    """With 8 input channels an overlapping stride, padding, groups and a 1×1 kernel: the rules
    leave the convolution to the library."""
    x, w, _, args = _case("2d", torch.float32)
    x16, w16 = x.repeat(1, 3, 1, 1)[:, :8].bfloat16(), w.repeat(1, 3, 1, 1)[:, :8].bfloat16()
    overlapping = ([2, 2], *args[1:])
    padded = (args[0], [1, 1], *args[2:])
    pointwise = ([1, 1], *args[1:])
    for image, weight, conv in [
        (x16, w16, overlapping),
        (x16, w16, padded),
        (x16, w16.reshape(28, 2, 4, 4), (*args[:-1], 4)),
        (x16, w16[:, :, :1, :1], pointwise),
    ]:
        assert _convolution(image, weight, None, *conv) is NotImplemented
        grad = aten.convolution(image, weight, None, *conv)
        mask = [True, True, False]
        assert _convolution_backward(grad, image, weight, None, *conv, mask) is NotImplemented
    assert _convolution(x16, w16, None, *args) is not NotImplemented
    # windows of 3 channels too many to gather (2^28 elements): the library's
    huge = torch.empty(64, 3, 1024, 1024, dtype=torch.bfloat16, device="meta")
    stem = torch.empty(8, 3, 7, 7, dtype=torch.bfloat16, device="meta")
    stem_args = ([2, 2], [3, 3], [1, 1], False, [0, 0], 1)
    assert _convolution(huge, stem, None, *stem_args) is NotImplemented
    assert _convolution(huge[:4], stem, None, *stem_args) is not NotImplemented


def _loss(out: torch.Tensor) -> torch.Tensor:
    """A sum weighted by fixed random numbers (of a normalized output, the sum of squares is
    constant, and its gradients are rounding noise)."""
    weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(2))
    return (out.float() * weights).sum()


def _twins(module: type[nn.Module]) -> tuple[nn.Module, nn.Module]:
    """Two bf16 modules with the same random weights: one to compile, one to run eagerly."""
    torch.manual_seed(0)
    net, ref = module().bfloat16(), module().bfloat16()
    ref.load_state_dict(net.state_dict())
    return net, ref


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
    net, ref = _twins(PatchEmbedding)
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


class Stem(nn.Module):
    """A ResNet's stem: a 7×7 convolution of stride 2 over the 3-channel image, batch norm,
    ReLU, max pooling."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 7, 2, 3, bias=False)
        self.norm = nn.BatchNorm2d(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.max_pool2d(self.norm(self.conv(x)).relu(), 3, 2, 1)


@pytest.mark.usefixtures("isolated_runtime")
def test_a_stem_trains_as_matmuls_and_matches_eager(tmp_path, monkeypatch):
    """The image needs no gradient, so neither pass runs a convolution."""
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    net, ref = _twins(Stem)
    x = torch.randn(2, 3, 30, 30).bfloat16()
    with no_fallback():
        got = torch.compile(net, backend="mind")(x)
    want = ref(x)
    torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)
    _loss(got).backward()
    _loss(want).backward()
    for p, q in zip(net.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=2e-2, atol=2e-2 * q.grad.abs().max().item())
    forward = (tmp_path / "graph0_forward.00.aten").read_text()
    backward = (tmp_path / "graph0_backward.00.aten").read_text()
    assert "aten.unfold.default" in forward and "convolution" not in forward
    assert "aten.mm.default" in backward and "convolution" not in backward
    # the backward gathers the windows again from the image (to_aten._partition), which the
    # forward saves instead of them; so the forward's matmul is a template that gathers them
    saved = forward.split("aten.output")[1]
    assert "%constant_pad_nd" not in saved and "%primals_2" in saved, saved
    assert "aten.unfold.default" in backward
    program = next(tmp_path.glob("graph0_forward.*.py")).read_text().split("def call(")[1]
    assert "triton_tem_fused" in program and "aten_mm" not in program


@pytest.mark.usefixtures("isolated_runtime")
def test_a_stem_in_inference_is_one_template_that_gathers_its_windows(tmp_path, monkeypatch):
    """Nothing saves the windows for a backward, so a Triton matmul template gathers them in its
    k-loop (mm-templates' `gathers`), the padding as masks, with the batch norm and ReLU after
    it: one kernel, and no buffer of windows."""
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    net, ref = _twins(Stem)
    net.eval(), ref.eval()
    x = torch.randn(2, 3, 30, 30).bfloat16()
    with torch.no_grad(), no_fallback():
        got = torch.compile(net, backend="mind")(x)
        want = ref(x)
    torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)
    (source,) = tmp_path.glob("graph0_forward.*.py")
    call = source.read_text().split("def call(")[1]
    launches = [line.split("(")[0].strip() for line in call.splitlines() if "_launch(" in line]
    assert len(launches) == 2, launches  # the stem, then max pooling
    assert launches[0].startswith("triton_tem_fused") and "unfold" in launches[0]
    assert "aten_mm" not in call and "empty_strided_cpu((450, " not in call
