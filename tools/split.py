"""`--split-input-file`: cut text on `// -----` lines, remembering where each chunk starts."""

from __future__ import annotations

import re

_SEPARATOR = re.compile(r"^// -----\s*$", re.MULTILINE)


def split_input(text: str) -> list[tuple[str, int]]:
    """Chunks with the number of lines before each, so diagnostics keep true line numbers."""
    chunks, start = [], 0
    for match in _SEPARATOR.finditer(text):
        chunks.append((text[start : match.start()], text.count("\n", 0, start)))
        start = match.end() + 1
    chunks.append((text[start:], text.count("\n", 0, start)))
    return chunks
