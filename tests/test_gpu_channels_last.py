"""On a CUDA GPU: a conv net compiled by mind runs no cuDNN layout conversion (the activations
stay channels-last from convolution to convolution), and equals eager. Skipped without CUDA."""

from __future__ import annotations

import copy
import re

import pytest
import torch
from programs import ON_GPU, conv_net, no_fallback

pytestmark = ON_GPU


@pytest.mark.parametrize("training", [False, True], ids=["inference", "training"])
def test_no_cudnn_layout_conversion_runs(training):
    """cuDNN converts NCHW tensors with `nchwToNhwcKernel` / `nhwcToNchwKernel`: with the
    activations channels-last, none runs (96 channels: Inductor's rule is on for training too)."""
    net, x = conv_net(channels=96, device="cuda", batch=8, size=32)
    net.train(training)
    reference = copy.deepcopy(net)
    compiled = torch.compile(net, backend="mind")

    def step(model):
        out = model(x)
        if training:
            out.square().sum().backward()
        return out

    with torch.enable_grad() if training else torch.no_grad(), no_fallback():
        for _ in range(2):
            step(compiled)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            got = step(compiled)
            torch.cuda.synchronize()
        want = step(reference)
    converting = {e.name for e in prof.events() if re.search("nchwToNhwc|nhwcToNchw", e.name)}
    assert not converting
    assert any(e.name.startswith("triton_") for e in prof.events())  # (kernels were profiled)
    # (cuDNN's NHWC and NCHW algorithms round apart, in TF32 where it is on)
    torch.testing.assert_close(got, want, rtol=1e-2, atol=1e-2)
