"""The built-in example: the seed program through every stage, printed as IR text, then the
emitted Python, then torch.compile(backend="mind") checked against eager."""

from __future__ import annotations

import itertools

import torch

import mind
from mind.ir.core import Module
from mind.options import PIPELINE
from mind.passes.manager import make_pass
from mind.target.triton import emit


def seed(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    return ((a + b) * c.relu()).sum(dim=-1)


def stages(module: Module) -> tuple[list[str], Module]:
    """Runs to-aten and the default pipeline (read, never restated here) and returns one
    printed stage per dialect: the IR as the last pass into that dialect left it."""
    printed: list[str] = []
    passes = [make_pass(name) for name in ("to-aten", *PIPELINE.split(","))]
    for dialect, group in itertools.groupby(passes, key=lambda p: p.output):
        names = []
        for p in group:
            module = p.run(module)
            names.append(p.name)
        printed.append(f"// ===== {dialect} (after {', '.join(names)}) =====\n{module}")
    return printed, module


def main() -> None:
    a, b, c = (torch.randn(4, 128) for _ in range(3))
    module = mind.capture(seed, a, b, c)
    print(f"// ===== fx =====\n{module}")
    printed, module = stages(module)
    print("\n".join(printed))
    print(f"# ===== emitted Python =====\n{emit(module)}")
    torch.testing.assert_close(torch.compile(seed, backend="mind")(a, b, c), seed(a, b, c))
    print("torch.compile(seed, backend='mind') matches eager")


if __name__ == "__main__":
    main()
