"""The parser's tables are built once and loaded from mind's cache after; a damaged or stale
file is rebuilt, never trusted."""

from __future__ import annotations

import pytest
from lark import Lark
from mind.ir.diagnostics import MindError
from mind.parser import parse

from mind import parser

TEXT = """loops.graph @f(%a: f32[4][1]cpu) {
  %b = loops.pointwise : f32[4][1]cpu {
    %0 = loops.load(%a, p0) : f32
    %1 = loops.relu(%0) : f32
    loops.yield(%1)
  }
  loops.output(%b)
}
"""


@pytest.fixture
def fresh_parser(tmp_path, monkeypatch):
    """An empty cache and no parser built in this process; the test's parser is dropped after."""
    monkeypatch.setenv("MIND_CACHE_DIR", str(tmp_path))
    parser._lark.cache_clear()
    yield tmp_path / "parser"
    parser._lark.cache_clear()


def test_tables_are_cached_and_give_the_same_parses(fresh_parser):
    built = str(parse(TEXT))
    (cached,) = fresh_parser.iterdir()
    parser._lark.cache_clear()
    assert str(parse(TEXT)) == built == TEXT
    assert list(fresh_parser.iterdir()) == [cached]


@pytest.mark.parametrize("damage", [b"", b"garbage", None])
def test_a_damaged_cache_file_is_rebuilt(fresh_parser, damage):
    parse(TEXT)
    (cached,) = fresh_parser.iterdir()
    good = cached.read_bytes()
    cached.write_bytes(good[: len(good) // 2] if damage is None else damage)
    parser._lark.cache_clear()
    assert str(parse(TEXT)) == TEXT
    with open(cached, "rb") as f:
        assert isinstance(Lark.load(f), Lark)


def test_errors_keep_their_positions_with_cached_tables(fresh_parser):
    bad = TEXT.replace("(%a, p0)", "(%a, p0 p1)")
    errors = []
    for _ in ("built", "loaded"):
        parser._lark.cache_clear()
        with pytest.raises(MindError) as caught:
            parse(bad)
        errors.append(caught.value.render())
    assert errors[0] == errors[1] and errors[0].startswith("<string>:3:")
