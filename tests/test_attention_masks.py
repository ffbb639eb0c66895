"""The attention-masks pass end to end: masks made from sizes alone are simplified before
tracing (the aten graph shows it), the compiled results match eager's, in a training step too,
and every other mask reaches SDPA as it was."""

import logging
import re

import pytest
import torch
import torch.nn.functional as F
from mind.passes import attention_masks
from mind.passes.attention_masks import classify

import mind

B, H, L, D = 2, 4, 8, 16


def all_true(q, k, v):
    """transformers' bidirectional mask without an attention_mask: every key index >= 0."""
    keys = torch.arange(k.shape[-2], device=q.device)
    mask = (keys >= 0)[None, None, None, :].expand(q.shape[0], -1, q.shape[-2], -1)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def causal(q, k, v):
    """Llama's causal-and-padding mask with no padding."""
    idx = torch.arange(q.shape[-2], device=q.device)
    mask = (idx[None, :] <= idx[:, None]) & torch.ones(
        q.shape[-2], dtype=torch.bool, device=q.device
    )
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask[None, None])


def additive_causal(q, k, v):
    mask = torch.full((q.shape[-2], k.shape[-2]), torch.finfo(q.dtype).min).triu(1)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def banded(q, k, v):
    mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril(2)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def padded(q, k, v, pad):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=pad[:, None, None, :])


def inputs(*extra):
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(B, H, L, D, generator=gen) for _ in range(3)] + list(extra)


def sdpa_line(fn, args) -> str:
    (graph,) = mind.capture(fn, *args, stage="aten").ops
    (line,) = [line for line in str(graph).splitlines() if "dot_product" in line]
    return line


@pytest.mark.parametrize(
    "fn, want",
    [
        (all_true, r"\(%\w+, %\w+, %\w+\) :"),
        (causal, r"\(%\w+, %\w+, %\w+, 0.0, true\) :"),
        (additive_causal, r"\(%\w+, %\w+, %\w+, 0.0, true\) :"),
        (banded, r"{attn_mask = %\w+} :"),
    ],
)
def test_masks_of_sizes_alone_are_simplified_and_match_eager(fn, want):
    args = inputs()
    assert re.search(want, sdpa_line(fn, args))
    torch._dynamo.reset()
    got = torch.compile(fn, backend="mind")(*args)
    torch.testing.assert_close(got, fn(*args))


def written_through_a_view(q, k, v):
    """Dynamo's graph writes the mask through a view: its own node computes zeros."""
    mask = torch.zeros(q.shape[-2], k.shape[-2])
    mask[:, 4:].fill_(float("-inf"))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def filled_in_place(q, k, v):
    mask = torch.zeros(q.shape[-2], k.shape[-2])
    mask.masked_fill_(torch.ones_like(mask, dtype=torch.bool).triu(1), float("-inf"))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


@pytest.mark.parametrize("fn", [written_through_a_view, filled_in_place])
def test_a_mask_written_in_place_stays(fn):
    args = inputs()
    assert re.search(r"{attn_mask = %\w+} :", sdpa_line(fn, args))
    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(fn, backend="mind")(*args), fn(*args))


def test_a_mask_read_from_an_input_stays():
    pad = torch.tensor([[True] * L, [True] * (L - 3) + [False] * 3])
    args = inputs(pad)
    assert re.search(r"{attn_mask = %\w+} :", sdpa_line(padded, args))
    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(padded, backend="mind")(*args), padded(*args))


@pytest.mark.parametrize("on", [True, False])
def test_the_option_turns_the_pass_on_and_off(on, caplog):
    args = inputs()
    torch._dynamo.reset()
    compiled = torch.compile(all_true, backend="mind", options={"attention_masks": on})
    with caplog.at_level(logging.INFO, logger="mind.passes"):
        torch.testing.assert_close(compiled(*args), all_true(*args))
    said = [r.getMessage() for r in caplog.records if "mask" in r.getMessage()]
    assert said == (
        ["%scaled_dot_product_attention: attn_mask %mask is all true: dropped"] if on else []
    )


def test_a_mask_spanning_more_than_the_bound_is_not_run(monkeypatch):
    """The causal mask's subgraph spans 64 elements (an 8 x 8 comparison); its broadcast to the
    batch adds none."""
    args = inputs()
    monkeypatch.setattr(attention_masks, "MAX_ELEMENTS", 63)
    assert re.search(r"{attn_mask = %\w+} :", sdpa_line(causal, args))
    monkeypatch.setattr(attention_masks, "MAX_ELEMENTS", 64)
    assert re.search(r", 0.0, true\) :", sdpa_line(causal, args))


def test_a_training_step_through_a_simplified_mask_matches_eager():
    def step(fn, args):
        leaves = [a.clone().requires_grad_() for a in args]
        out = fn(*leaves)
        (out * torch.linspace(-1, 1, out.numel()).view(out.shape)).sum().backward()
        return [out.detach()] + [a.grad for a in leaves]

    args = inputs()
    torch._dynamo.reset()
    got = step(torch.compile(causal, backend="mind"), args)
    for g, w in zip(got, step(causal, args), strict=True):
        torch.testing.assert_close(g, w)


@pytest.mark.parametrize(
    "mask, want",
    [
        (torch.ones(1, 1, 1, 5, dtype=torch.bool), "all"),
        (torch.zeros(5, 5), "all"),
        (torch.ones(5, 5, dtype=torch.bool).tril(), "causal"),
        (torch.ones(5, 5, dtype=torch.bool).tril().expand(3, 2, 5, 5), "causal"),
        (torch.ones(1, 1, 5, dtype=torch.bool).expand(3, 5, 5), "all"),
        (torch.full((5, 5), float("-inf")).triu(1), "causal"),
        (torch.full((5, 5), -1e4).triu(1), None),  # -1e4 is a bias, not a mask
        (torch.ones(5, 5, dtype=torch.bool).tril(-1), None),  # the diagonal masked too
        (torch.ones(5, dtype=torch.int64), None),  # not a mask SDPA takes
        (torch.ones(3, 3, dtype=torch.bool), None),  # not of the attention's sizes
    ],
)
def test_classify(mask, want):
    assert classify(mask, 5, 5) == want


def test_a_dump_holds_the_fx_graph_after_the_pass(tmp_path, monkeypatch):
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    torch._dynamo.reset()
    torch.compile(causal, backend="mind")(*inputs())
    (after,) = tmp_path.glob("graph*.01.attention-masks.fx")
    text = after.read_text().splitlines()
    (line,) = [line for line in text if "fx.call_function @torch._C._nn.scaled_dot" in line]
    assert "{is_causal = true}" in line and "attn_mask" not in line


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("fn", [all_true, causal])
def test_on_the_gpu_a_simplified_mask_takes_a_fused_kernel(fn):
    """In bf16 on CUDA, SDPA with these masks would be the math decomposition (bmm, softmax,
    bmm in f32); without them, a fused kernel (flash, cuDNN or efficient attention)."""
    args = [t.to("cuda", torch.bfloat16) for t in inputs()]
    (graph,) = mind.capture(fn, *args, stage="aten").ops
    text = str(graph)
    assert "aten.bmm" not in text and "_scaled_dot_product_" in text
    torch._dynamo.reset()
    got = torch.compile(fn, backend="mind")(*args)
    torch.testing.assert_close(got, fn(*args), atol=2e-2, rtol=2e-2)
