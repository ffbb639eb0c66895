"""docs/IR.md against the op declarations: its declaration blocks are what `mind-opt --list-ops`
prints, and every op it names exists."""

import re
from pathlib import Path

from mind.ir.registry import lookup_op
from mind.tools.ir_docs import render

DOC = Path(__file__).resolve().parent.parent / "docs" / "IR.md"


def test_declaration_blocks_are_current():
    doc = DOC.read_text()
    assert render(doc) == doc, "run: python -m mind.tools.ir_docs docs/IR.md"


def test_every_op_the_docs_name_exists():
    names = set(
        re.findall(r"`%?[\w, ]*=? ?((?:fx|loops|scheduled|triton)\.[a-z_0-9]+)", DOC.read_text())
    )
    assert names  # the pattern finds the tables' ops
    assert [n for n in sorted(names) if lookup_op(n) is None] == []
