"""The built-in example: the seed program through every stage mind has, printed as IR text."""

from __future__ import annotations

import torch

import mind
from mind.passes.manager import CONVERSIONS, STAGES, make_pass


def seed(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    return ((a + b) * c.relu()).sum(dim=-1)


def main() -> None:
    from mind.passes import PASSES

    a, b, c = (torch.randn(4, 128) for _ in range(3))
    module = mind.capture(seed, a, b, c)
    print(f"// ===== fx =====\n{module}")
    for stage in STAGES[:-1]:
        names = CONVERSIONS[stage]
        if not all(n in PASSES for n in names):
            print(f"// (stages after {stage} are not built yet)")
            break
        for name in names:
            module = make_pass(name).run(module)
        print(f"// ===== {module.dialect} (after {', '.join(names)}) =====\n{module}")
    if "mind" in torch._dynamo.list_backends() and STAGES[-1] == module.dialect:
        out = torch.compile(seed, backend="mind")(a, b, c)
        torch.testing.assert_close(out, seed(a, b, c))
        print("torch.compile(seed, backend='mind') matches eager")


if __name__ == "__main__":
    main()
