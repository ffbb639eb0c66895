"""Parse text of any dialect into a Module. Errors come back as MindError with file:line:col."""

from __future__ import annotations

import hashlib
import io
import sys
from functools import lru_cache
from importlib import resources

import lark
from lark import Lark, UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken
from mind.ir.core import Module
from mind.ir.diagnostics import Location, MindError
from mind.ir.files import cache_dir, write_atomic
from mind.ir.verifier import verify

from .builder import Builder

_OPTIONS = {"parser": "lalr", "propagate_positions": True, "maybe_placeholders": True}


@lru_cache(maxsize=1)
def _lark() -> Lark:
    """The LALR parser: its tables take longer to build than most files take to parse, so they
    are built once per grammar, options, lark and Python version, and loaded from the cache."""
    grammar = resources.files(__package__).joinpath("mind.lark").read_text()
    facts = "\0".join((grammar, repr(sorted(_OPTIONS.items())), lark.__version__, sys.version))
    path = cache_dir() / "parser" / f"{hashlib.sha256(facts.encode()).hexdigest()}.lark"
    try:
        with open(path, "rb") as f:
            return Lark.load(f)
    except Exception:  # missing, or not a parser lark can load (a stale or damaged file)
        pass
    parser = Lark(grammar, **_OPTIONS)
    tables = io.BytesIO()
    parser.save(tables)
    try:
        write_atomic(path, tables.getvalue())
    except OSError:
        pass  # an unwritable cache: the next process builds the tables again
    return parser


def prepare() -> None:
    """Build now what parsing builds on first use: the parser, and the scanner of each state of its
    contextual lexer (lark compiles one as a parse first reaches the state). For a process that
    forks parsers (tools/server.py), so that no fork builds them again."""
    lexer = _lark().parser.lexer
    for state in getattr(lexer, "lexers", {}).values():
        state.scanner  # noqa: B018  (a property: built on first use)


def parse(
    text: str, filename: str = "<string>", line_offset: int = 0, verify_ir: bool = True
) -> Module:
    """Parse and (by default) verify. `line_offset` keeps true line numbers for split files (the
    text is parsed after that many empty lines, so a diagnostic's caret finds its line too)."""
    import mind.dialects  # noqa: F401  (registers every dialect's ops)

    text = "\n" * line_offset + text

    try:
        tree = _lark().parse(text)
    except UnexpectedInput as exc:
        raise _syntax_error(exc, text, filename) from None
    module = Module(Builder(filename, text).top_level(tree))
    if verify_ir:
        verify(module)
    return module


def _syntax_error(exc: UnexpectedInput, text: str, filename: str) -> MindError:
    line, col = exc.line, exc.column
    at_end = isinstance(exc, UnexpectedToken) and exc.token.type == "$END"
    if isinstance(exc, UnexpectedEOF) or at_end or line < 0:
        lines = text.splitlines() or [""]
        line, col = len(lines), len(lines[-1]) + 1
        message = f"unexpected end of input, expected {_expected(exc)}"
    elif isinstance(exc, UnexpectedToken):
        message = f"unexpected '{exc.token}', expected {_expected(exc)}"
    elif isinstance(exc, UnexpectedCharacters):
        message = f"unexpected character '{text[exc.pos_in_stream]}'"
    else:
        message = str(exc)
    return MindError(message, Location(filename, line, col, text))


_PRETTY = {
    "RBRACE": "'}'",
    "LBRACE": "'{'",
    "RPAR": "')'",
    "LPAR": "'('",
    "RSQB": "']'",
    "LSQB": "'['",
    "COMMA": "','",
    "COLON": "':'",
    "EQUAL": "'='",
    "VALUE": "a value",
    "OPNAME": "an operation",
    "NAME": "a name",
    "OPSTR": "a quoted operation",
    "INT": "an integer",
    "STRING": "a string",
    "$END": "end of input",
}


def _expected(exc: UnexpectedInput) -> str:
    names = sorted(
        {_PRETTY.get(e, e.lower()) for e in getattr(exc, "expected", None) or exc.accepts or []}
    )
    if not names:
        return "more input"
    return names[0] if len(names) == 1 else "one of " + ", ".join(names[:8])
