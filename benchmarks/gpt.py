"""A GPT-style decoder (nanoGPT's layout) for the distributed benchmark and tests: token and
position embeddings, blocks of causal self-attention and a GELU MLP with pre-LayerNorm, a final
LayerNorm and a language-model head; the loss is cross-entropy on the next token. Attention is
written out (scores, causal mask, softmax, weighted sum) so that every compiler compiles the same
ops, with no fused attention kernel of its own."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class GPTConfig:
    vocab: int = 8192
    seq: int = 512
    dim: int = 768
    heads: int = 12
    layers: int = 6


#: a model small enough for CPU tests and the benchmark's CPU smoke run (one block has every
#: kind of op; each more would add compile time, not coverage)
TINY = GPTConfig(vocab=64, seq=8, dim=32, heads=2, layers=1)


class Block(nn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.heads = c.heads
        self.ln1 = nn.LayerNorm(c.dim)
        self.qkv = nn.Linear(c.dim, 3 * c.dim)
        self.proj = nn.Linear(c.dim, c.dim)
        self.ln2 = nn.LayerNorm(c.dim)
        self.fc = nn.Linear(c.dim, 4 * c.dim)
        self.out = nn.Linear(4 * c.dim, c.dim)
        self.register_buffer("mask", torch.ones(c.seq, c.seq, dtype=torch.bool).tril())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        q, k, v = (z.transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        scores = scores.masked_fill(~self.mask[:t, :t], float("-inf"))
        y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, c: GPTConfig):
        super().__init__()
        self.tokens = nn.Embedding(c.vocab, c.dim)
        self.positions = nn.Embedding(c.seq, c.dim)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.layers))
        self.ln = nn.LayerNorm(c.dim)
        self.head = nn.Linear(c.dim, c.vocab, bias=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.tokens(idx) + self.positions(torch.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def batch(c: GPTConfig, size: int, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    """Token ids and next-token targets, from `seed` (each rank its own)."""
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, c.vocab, (size, c.seq + 1), generator=g).to(device)
    return tokens[:, :-1], tokens[:, 1:]
