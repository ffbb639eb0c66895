"""`--verify-diagnostics`: MLIR's in-file expectations. `// expected-error@+1 {{message}}` says
the next line must get an error containing `message` (`@-1` the line before, no `@` this line,
`@unknown` an error with no location); `expected-remark`, `expected-warning` and
`expected-note` likewise. Every expectation must be met and every diagnostic expected."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mind.ir.diagnostics import Diagnostic

_EXPECTED = re.compile(
    r"//\s*expected-(error|warning|remark|note)(?:@([+-]\d+|unknown))?\s*\{\{(.*?)\}\}"
)


@dataclass
class Expectation:
    severity: str
    line: int | None  # None: a diagnostic without location
    message: str
    met: bool = False

    def accepts(self, diagnostic: Diagnostic) -> bool:
        line = diagnostic.loc.line if diagnostic.loc is not None else None
        return (
            not self.met
            and self.severity == diagnostic.severity
            and self.line == line
            and self.message in diagnostic.message
        )


def expectations(text: str, line_offset: int) -> list[Expectation]:
    found = []
    for number, line in enumerate(text.splitlines(), start=1 + line_offset):
        for match in _EXPECTED.finditer(line):
            severity, where, message = match.groups()
            at = None if where == "unknown" else number + int(where or 0)
            found.append(Expectation(severity, at, message))
    return found


def check_expected_diagnostics(
    text: str, filename: str, line_offset: int, produced: list[Diagnostic]
) -> str:
    """What is wrong with the diagnostics a chunk produced, as error lines ("" when each was
    expected and each expectation was met)."""
    expected = expectations(text, line_offset)
    problems = []
    for diagnostic in produced:
        match = next((e for e in expected if e.accepts(diagnostic)), None)
        if match is None:
            problems.append(f"unexpected {diagnostic.render()}\n")
        else:
            match.met = True
    for e in expected:
        if not e.met:
            where = f"{filename}:{e.line}" if e.line is not None else filename
            problems.append(
                f'{where}: error: expected {e.severity} "{e.message}" was not produced\n'
            )
    return "".join(problems)
