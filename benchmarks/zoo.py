"""The models of `python3 -m benchmarks.models`: random weights from configs (nothing downloads),
at a full size for the GPU and a tiny one (`--small`) for CPU smoke runs.

Dropout is off everywhere, so that a training step is deterministic and a compiled one can be
checked against eager. transformers, timm and torchvision are imported when a model is built, so
that the rest of `benchmarks/` works without them (they are the `bench` extra).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

Size = dict[str, int]


@dataclass(frozen=True)
class Model:
    name: str
    what: str  # library and class, for the report
    build: Callable[[Size], nn.Module]
    inputs: Callable[[Size, torch.Generator], tuple[torch.Tensor, ...]]
    full: Size
    small: Size

    def size(self, small: bool) -> Size:
        return self.small if small else self.full


def tokens(size: Size, gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    return (torch.randint(0, size["vocab"], (size["batch"], size["seq"]), generator=gen),)


def images(size: Size, gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    shape = (size["batch"], 3, size["image"], size["image"])
    return (torch.randn(shape, generator=gen),)


def gpt2(s: Size) -> nn.Module:
    from transformers import GPT2Config, GPT2Model

    config = GPT2Config(
        n_layer=s["layers"], n_embd=s["width"], n_head=s["heads"], vocab_size=s["vocab"],
        n_positions=s["seq"], bos_token_id=0, eos_token_id=0,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False,
    )  # fmt: skip
    return GPT2Model(config)


def bert(s: Size) -> nn.Module:
    from transformers import BertConfig, BertModel

    config = BertConfig(
        num_hidden_layers=s["layers"], hidden_size=s["width"], num_attention_heads=s["heads"],
        intermediate_size=s["ffn"], vocab_size=s["vocab"], max_position_embeddings=s["seq"],
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    return BertModel(config, add_pooling_layer=False)


def llama(s: Size) -> nn.Module:
    from transformers import LlamaConfig, LlamaModel

    config = LlamaConfig(
        num_hidden_layers=s["layers"], hidden_size=s["width"], num_attention_heads=s["heads"],
        num_key_value_heads=s["kv_heads"], intermediate_size=s["ffn"], vocab_size=s["vocab"],
        max_position_embeddings=s["seq"], bos_token_id=0, eos_token_id=0, pad_token_id=0,
        use_cache=False,
    )  # fmt: skip
    return LlamaModel(config)


def resnet(s: Size) -> nn.Module:
    from torchvision.models.resnet import BasicBlock, ResNet

    return ResNet(BasicBlock, [s["blocks"]] * 4, num_classes=s["classes"])


def vit(s: Size) -> nn.Module:
    from timm.models.vision_transformer import VisionTransformer

    return VisionTransformer(
        img_size=s["image"], patch_size=s["patch"], embed_dim=s["width"], depth=s["layers"],
        num_heads=s["heads"], num_classes=s["classes"],
    )  # fmt: skip


def mlp(s: Size) -> nn.Module:
    """A token MLP in plain torch: what the harness's own tests run where the extra is absent."""
    return nn.Sequential(
        nn.Embedding(s["vocab"], s["width"]),
        nn.LayerNorm(s["width"]),
        nn.Linear(s["width"], s["ffn"]),
        nn.GELU(approximate="tanh"),
        nn.Linear(s["ffn"], s["width"]),
    )


def cnn(s: Size) -> nn.Module:
    """A ResNet-like stack in plain torch: a stem, then stages that halve the image and double
    the width, each a convolution, batch norm and ReLU; pooling, a classifier. What the harness's
    own tests train where torchvision is absent: in bf16, batch norm's backward over few values
    (the last stage's) puts eager's own gradients far from exact, as in ResNet."""
    w, stages = s["width"], s["stages"]
    layers = [nn.Conv2d(3, w, 3, padding=1, bias=False), nn.BatchNorm2d(w), nn.ReLU()]
    for i in range(stages):
        layers += [
            nn.Conv2d(w << i, w << (i + 1), 3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(w << (i + 1)),
            nn.ReLU(),
        ]
    head = [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(w << stages, s["classes"])]
    return nn.Sequential(*layers, *head)


TEXT_SMALL = dict(layers=2, width=32, heads=2, ffn=64, vocab=128, batch=2, seq=8)

MODELS: dict[str, Model] = {
    m.name: m
    for m in (
        Model(
            "gpt2", "transformers GPT2Model", gpt2, tokens,
            dict(layers=4, width=768, heads=12, vocab=50257, batch=8, seq=256), TEXT_SMALL,
        ),
        Model(
            "bert", "transformers BertModel (no pooler)", bert, tokens,
            dict(layers=4, width=768, heads=12, ffn=3072, vocab=30522, batch=8, seq=256),
            TEXT_SMALL,
        ),
        Model(
            "llama", "transformers LlamaModel, grouped-query attention", llama, tokens,
            dict(layers=4, width=1024, heads=16, kv_heads=4, ffn=2816, vocab=32000, batch=8,
                 seq=256),
            dict(TEXT_SMALL, heads=4, kv_heads=2),
        ),
        Model(
            "resnet", "torchvision ResNet, BasicBlock", resnet, images,
            dict(blocks=1, classes=1000, batch=32, image=224),
            dict(blocks=1, classes=10, batch=2, image=64),
        ),
        Model(
            "vit", "timm VisionTransformer", vit, images,
            dict(layers=4, width=384, heads=6, patch=16, classes=1000, batch=32, image=224),
            dict(layers=2, width=32, heads=2, patch=8, classes=10, batch=2, image=32),
        ),
        Model(
            "mlp", "torch Embedding, LayerNorm, Linear, GELU, Linear", mlp, tokens,
            dict(width=1024, ffn=4096, vocab=32000, batch=8, seq=256),
            dict(width=32, ffn=64, vocab=128, batch=2, seq=8),
        ),
        Model(
            "cnn", "torch Conv2d, BatchNorm2d, ReLU, Linear", cnn, images,
            dict(width=64, stages=3, classes=1000, batch=32, image=224),
            dict(width=8, stages=3, classes=10, batch=2, image=16),
        ),
    )
}  # fmt: skip

# What a run benchmarks unless told: every model but the plain-torch smoke models.
DEFAULT_MODELS = ("gpt2", "bert", "llama", "resnet", "vit")


def make(model: Model, small: bool, device: str, dtype: torch.dtype, seed: int = 0):
    """(module, inputs) on `device`: the same random weights and inputs in every process
    (built on the CPU from one seed); floating inputs in `dtype`, token ids as they are."""
    torch.manual_seed(seed)
    module = model.build(model.size(small)).to(device=device, dtype=dtype)
    gen = torch.Generator().manual_seed(seed)
    inputs = tuple(
        t.to(device=device, dtype=dtype if t.is_floating_point() else t.dtype)
        for t in model.inputs(model.size(small), gen)
    )
    return module, inputs
