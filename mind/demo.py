"""The built-in example: the seed program through every stage, printed as IR text, then the
emitted Python, then torch.compile(backend="mind") checked against eager."""

from __future__ import annotations

import torch

import mind
from mind.options import PIPELINE
from mind.passes.manager import make_pass
from mind.target.triton import emit

#: the pipeline in stages: the passes that end at each printed stage
STAGES = (
    ("to-aten",),
    ("lower",),
    ("realize", "inline"),
    ("schedule", "fuse", "merge-loops", "online-softmax"),
    ("to-triton",),
)


def seed(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    return ((a + b) * c.relu()).sum(dim=-1)


def main() -> None:
    assert ",".join(n for s in STAGES[1:] for n in s) == PIPELINE
    a, b, c = (torch.randn(4, 128) for _ in range(3))
    module = mind.capture(seed, a, b, c)
    print(f"// ===== fx =====\n{module}")
    for names in STAGES:
        for name in names:
            module = make_pass(name).run(module)
        print(f"// ===== {module.dialect} (after {', '.join(names)}) =====\n{module}")
    print(f"# ===== emitted Python =====\n{emit(module)}")
    torch.testing.assert_close(torch.compile(seed, backend="mind")(a, b, c), seed(a, b, c))
    print("torch.compile(seed, backend='mind') matches eager")


if __name__ == "__main__":
    main()
