"""`--verify-diagnostics`: MLIR's in-file expectations. `// expected-error@+1 {{message}}` says
the next line must raise an error containing `message` (`@-1` the line before, no `@` this line)."""

from __future__ import annotations

import re
from collections.abc import Callable

from mind.ir.diagnostics import MindError

_EXPECTED = re.compile(r"//\s*expected-error(?:@([+-]\d+))?\s*\{\{(.*?)\}\}")


def expectations(text: str, line_offset: int) -> list[tuple[int, str]]:
    found = []
    for number, line in enumerate(text.splitlines(), start=1 + line_offset):
        for match in _EXPECTED.finditer(line):
            found.append((number + int(match.group(1) or 0), match.group(2)))
    return found


def check_expected_diagnostics(
    text: str, filename: str, line_offset: int, run: Callable[[str, int], str]
) -> tuple[bool, str]:
    """Run a chunk; True when the errors it raises are exactly the ones it expects."""
    expected = expectations(text, line_offset)
    try:
        run(text, line_offset)
        error = None
    except MindError as exc:
        error = exc
    if error is None:
        if not expected:
            return True, ""
        line, message = expected[0]
        return False, f'{filename}:{line}: error: expected error "{message}" was not produced\n'
    loc = error.loc
    for line, message in expected:
        if loc is not None and loc.line == line and message in str(error):
            return True, ""
    return False, "unexpected " + error.render() + "\n"
