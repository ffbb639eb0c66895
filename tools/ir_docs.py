"""Keeps docs/IR.md in step with the op declarations: each block between
`<!-- declarations: DIALECT -->` and `<!-- end declarations -->` is `mind-opt --list-ops DIALECT`.

    python -m mind.tools.ir_docs docs/IR.md     # rewrite the blocks
    python -m mind.tools.ir_docs --check docs/IR.md

tests/test_ir_docs.py runs the check."""

from __future__ import annotations

import re
import sys

from .mind_opt import list_ops

_BLOCK = re.compile(
    r"(<!-- declarations: (\w+) -->\n)```text\n.*?```\n(<!-- end declarations -->)", re.DOTALL
)


def render(doc: str) -> str:
    """`doc` with every declarations block regenerated."""
    return _BLOCK.sub(lambda m: f"{m[1]}```text\n{list_ops(m[2])}```\n{m[3]}", doc)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    check = "--check" in args
    for path in (a for a in args if a != "--check"):
        with open(path, encoding="utf-8") as f:
            doc = f.read()
        fresh = render(doc)
        if fresh == doc:
            continue
        if check:
            sys.stderr.write(
                f"{path}: declarations are stale (python -m mind.tools.ir_docs {path})\n"
            )
            return 1
        with open(path, "w", encoding="utf-8") as f:
            f.write(fresh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
