"""A mutation fuzzer over IR text: bad input must get a located diagnostic, never a traceback.

    python3 -m mind.tools.fuzz [--seed 0] [--count 2000] [--corpus lit_tests] [--captures]
                               [--tools 10] [--json out.json]

The corpus is every chunk of the lit inputs (`.fx .aten .loops .scheduled .triton` files, split
on `// -----`), and with `--captures` every stage of a few programs compiled here (what
`MIND_DUMP_DIR` writes). A mutant applies one to three token or line edits (numbers, names,
values, symbols, strings, types, attributes, op names, brackets, deleted or duplicated lines)
and runs in-process through the parser and verifier, then along one route: half of the mutants
go through every pass to triton IR and the emitter, as the backend; the others as the tools take
them, through one pass of their stage or later (`mind-opt --pass=NAME`, some with options at
their limits), mind-translate's passes to Python (nothing fused) or its picture. The emitted
Python is compiled, a pass's output printed and parsed back. Each mutant lands in one class:

    diagnostic   a MindError with a location       accepted     it went through
    traceback    any other exception                no-location  a MindError without location
    bad-python   emitted Python that does not compile            timeout  over --timeout seconds
    bad-text     a pass's output that does not parse back

Crashes are grouped by signature (exception type and the innermost frame in mind's code;
for a diagnostic without location, what it says), each with its smallest mutant, shrunk line by
line. `--tools N` also runs N reproducers through the
`mind-opt` and `mind-translate` executables and reports those that print a traceback.

It lives in tools/ beside mind-opt and mind-translate, the programs it exercises, and ships with
the package (`python3 -m mind.tools.fuzz` in any checkout); tests/test_fuzz.py runs a fast,
fixed-seed slice of it.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import re
import signal
import subprocess
import sys
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from mind.ir.diagnostics import MindError

STAGE_SUFFIXES = (".fx", ".aten", ".loops", ".scheduled", ".triton")
OUTCOMES = (
    "diagnostic", "accepted", "traceback", "no-location", "bad-python", "bad-text", "timeout"
)  # fmt: skip
#: the outcomes that are bugs in mind, each reported with its smallest mutant
DEFECTS = ("traceback", "no-location", "bad-python", "bad-text")
_REPO = Path(__file__).resolve().parent.parent
_TOKEN = re.compile(
    r'"(?:\\.|[^"\\])*"|%[A-Za-z0-9_][A-Za-z0-9_.]*|@[A-Za-z_][A-Za-z0-9_.]*'
    r"|-?\d+\.\d*(?:[eE][-+]?\d+)?|\d+|[A-Za-z_][A-Za-z0-9_]*|//[^\n]*|\s+|."
)


# -- the corpus ------------------------------------------------------------------------------
def lit_corpus(root: Path) -> list[tuple[str, str]]:
    """(name, text) of every chunk of every IR file under `root`, RUN and CHECK lines dropped."""
    from .split import split_input

    out = []
    for path in sorted(root.rglob("*")):
        if path.suffix not in STAGE_SUFFIXES:
            continue
        text = "\n".join(
            line for line in path.read_text().splitlines() if not line.lstrip().startswith("//")
        )
        for i, (chunk, _) in enumerate(split_input(text)):
            if chunk.strip():
                out.append((f"{path.relative_to(root.parent)}#{i}{path.suffix}", chunk))
    return out


def capture_corpus() -> list[tuple[str, str]]:
    """Every stage of a few small programs, as the backend dumps them (static and symbolic)."""
    import torch
    import torch.nn.functional as F
    from mind.passes import run_pipeline

    import mind
    from mind.options import PIPELINE

    programs = {
        "seed": (lambda a, b, c: ((a + b) * c.relu()).sum(-1), (4, 128), 3, False),
        "softmax": (lambda x: torch.softmax(x, -1), (4, 64), 1, False),
        "layer_norm": (lambda x: F.layer_norm(x, (x.shape[-1],)), (4, 32), 1, False),
        "silu_halves": (lambda x: F.silu(x.chunk(2, -1)[0]) * x.chunk(2, -1)[1], (4, 8), 1, True),
        "embedding": (lambda i, w: F.embedding(i, w) * 2, None, 0, False),
    }
    out = []
    for name, (fn, shape, arity, dynamic) in programs.items():
        if shape is None:
            inputs = (torch.randint(0, 10, (3, 4)), torch.randn(10, 16))
        else:
            inputs = tuple(torch.randn(shape) for _ in range(arity))
        out.append((f"{name}.fx", str(mind.capture(fn, *inputs, dynamic=dynamic))))
        aten = mind.capture(fn, *inputs, stage="aten", dynamic=dynamic)
        out.append((f"{name}.aten", str(aten)))

        def keep(p, module, name=name):
            out.append((f"{name}.{p.name}.{p.output}", str(module)))

        run_pipeline(aten, PIPELINE, on_pass=keep)
    return out


# -- mutation --------------------------------------------------------------------------------
NUMBERS = ["0", "1", "-1", "2", "3", "7", "65536", "2147483648", "9223372036854775808",
           "18446744073709551616", "0.5", "1e308", "-0.0", "Mod(4, 0)", "floor(1/0)"]  # fmt: skip
NAMES = ["f32", "f16", "bf16", "i64", "i32", "b8", "u8", "c64", "f8e4m3fn", "s0", "s1", "p0",
         "p1", "c0", "x0", "r0_index", "XBLOCK", "sum", "max", "argmax", "cuda", "cpu", "meta",
         "sym", "true", "false", "none", "nan", "inf", "type", "Mod", "floor", "Max"]  # fmt: skip
SYMBOLS = ["@torch.xyz123", "@torch.float32", "@a.b", "@os.system", "@operator.add",
           "@torch.ops.aten.mm.default", "@builtins.slice", "@torch", '@"x y"']  # fmt: skip
STRINGS = ['"\\q"', '"\\ud800"', '""', '"a\\"b"', '"sum"', '"pointwise"', '"buf0"', '"\\u0000"']
FRAGMENTS = ["{", "}", "(", ")", "[", "]", ",", ":", "=", "%", "@", "^", "!", "//", "-",
             "cuda:00", "cuda:1", "{mask = 1}", ": f32", "[1, 2]", "(1,)", "{}"]  # fmt: skip


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _is(kind: str, tok: str) -> bool:
    first = tok[:1]
    return {
        "number": tok[:1].isdigit() or (tok[:1] == "-" and tok[1:2].isdigit()),
        "name": (first.isalpha() or first == "_") and not tok.startswith("//"),
        "value": first == "%",
        "symbol": first == "@",
        "string": first == '"',
        "punct": len(tok) == 1 and not tok.isspace() and not tok.isalnum(),
    }[kind]


def _swap_token(rng: random.Random, toks: list[str], kind: str, choices: list[str]) -> bool:
    where = [i for i, t in enumerate(toks) if _is(kind, t)]
    if not where:
        return False
    toks[rng.choice(where)] = rng.choice(choices)
    return True


def mutate(text: str, rng: random.Random) -> str:
    """One to three random edits of `text`."""
    for _ in range(rng.choice((1, 1, 2, 3))):
        text = rng.choice(MUTATORS)(text, rng)
    return text


def _token_mutator(kind: str, pool: list[str]) -> Callable[[str, random.Random], str]:
    def mutator(text: str, rng: random.Random) -> str:
        toks = tokens(text)
        same_kind = [t for t in toks if _is(kind, t)]
        choices = pool + same_kind if kind in ("value", "name") else pool + same_kind[:5]
        _swap_token(rng, toks, kind, choices)
        return "".join(toks)

    mutator.__name__ = f"swap_{kind}"
    return mutator


def _delete_token(text: str, rng: random.Random) -> str:
    toks = tokens(text)
    solid = [i for i, t in enumerate(toks) if not t.isspace()]
    if solid:
        del toks[rng.choice(solid)]
    return "".join(toks)


def _insert_fragment(text: str, rng: random.Random) -> str:
    toks = tokens(text)
    toks.insert(rng.randrange(len(toks) + 1), rng.choice(FRAGMENTS))
    return "".join(toks)


def _lines(edit: Callable[[list[str], random.Random], None]) -> Callable[[str, random.Random], str]:
    def mutator(text: str, rng: random.Random) -> str:
        lines = text.splitlines()
        if lines:
            edit(lines, rng)
        return "\n".join(lines) + "\n"

    mutator.__name__ = edit.__name__
    return mutator


def delete_line(lines: list[str], rng: random.Random) -> None:
    del lines[rng.randrange(len(lines))]


def duplicate_line(lines: list[str], rng: random.Random) -> None:
    i = rng.randrange(len(lines))
    lines.insert(i, lines[i])


def swap_lines(lines: list[str], rng: random.Random) -> None:
    i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
    lines[i], lines[j] = lines[j], lines[i]


def drop_attribute(text: str, rng: random.Random) -> str:
    """Delete one `key = value` entry of an attribute dictionary."""
    entries = list(re.finditer(r"(, )?\b[a-z_]+ = [^,{}]+(?=[,}])", text))
    if not entries:
        return text
    m = rng.choice(entries)
    return text[: m.start()] + text[m.end() :]


_OP_NAME = re.compile(r"\b(fx|aten|loops|scheduled|triton)\.[a-z_][a-z0-9_.]*")


def swap_op(text: str, rng: random.Random) -> str:
    """Rename one op to another of its dialect (declared, or named in the text)."""
    from mind.ir.registry import lookup_dialect

    found = list(_OP_NAME.finditer(text))
    if not found:
        return text
    m = rng.choice(found)
    dialect = lookup_dialect(m[1])
    names = {f[0] for f in found if f[1] == m[1]} | set(dialect.ops if dialect else ())
    return text[: m.start()] + rng.choice(sorted(names)) + text[m.end() :]


def perturb_number(text: str, rng: random.Random) -> str:
    """Move one integer near itself (a size, a stride, a dim or an index off by one, doubled)."""
    toks = tokens(text)
    where = [i for i, t in enumerate(toks) if t.isdigit()]
    if where:
        i = rng.choice(where)
        n = int(toks[i])
        toks[i] = str(rng.choice((n + 1, max(n - 1, 0), 2 * n, n // 2, 1024 * n)))
    return "".join(toks)


def swap_brackets(text: str, rng: random.Random) -> str:
    """Put one `[...]` (a shape, strides, an index, a list) where another was."""
    spans = list(re.finditer(r"\[[^\[\]\n]*\]", text))
    if len(spans) < 2:
        return text
    a, b = rng.sample(spans, 2)
    return text[: a.start()] + b[0] + text[a.end() :]


MUTATORS: list[Callable[[str, random.Random], str]] = [
    _token_mutator("number", NUMBERS),
    _token_mutator("name", NAMES),
    _token_mutator("value", ["%undefined", "%0", "%arg0_1"]),
    _token_mutator("symbol", SYMBOLS),
    _token_mutator("string", STRINGS),
    _token_mutator("punct", FRAGMENTS),
    _delete_token,
    _insert_fragment,
    _lines(delete_line),
    _lines(duplicate_line),
    _lines(swap_lines),
    drop_attribute,
    swap_op,
    perturb_number,
    swap_brackets,
]


# -- running one input -----------------------------------------------------------------------
@dataclass
class Result:
    outcome: str
    signature: str = ""  # crashes: exception type @ innermost mind frame
    message: str = ""


class _Timeout(Exception):
    pass


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise _Timeout after `seconds` (main thread, POSIX); no limit elsewhere."""
    if seconds <= 0 or not hasattr(signal, "setitimer"):
        yield
        return

    def expire(signum, frame):
        raise _Timeout

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


#: options a `pass:` route may give its pass: limits at their edges
PASS_OPTIONS = {
    "to-triton": ["persistent-max=1", "max-r-block=1"],
    "split-reductions": ["sm-count=1"],
    "fuse": ["max-fusion-size=1"],
    "realize": ["reads-threshold=0 acc-reads-threshold=0 max-body-ops=0"],
    "mm-templates": ["select=template"],
    "lower": ["deterministic=true"],
}


def routes(stage: str | None) -> list[str]:
    """What IR of `stage` may go through, as the tools take it: `pipeline` (the backend's passes
    to Python), `pass:NAME{options}` (one pass and the conversions it needs, as mind-opt runs
    it; its output printed and parsed back), `translate` (mind-translate's passes to Python,
    nothing fused) and `draw` (mind-translate --to=dot, up to scheduled IR)."""
    from mind.passes import PASSES
    from mind.passes.manager import STAGES

    start = STAGES.index(stage) if stage in STAGES else 0
    out = ["pipeline", "translate"] + (["draw"] if start <= STAGES.index("scheduled") else [])
    for name, cls in sorted(PASSES.items()):
        if STAGES.index(cls.input) >= start:
            out += [f"pass:{name}"] + [f"pass:{name}{{{o}}}" for o in PASS_OPTIONS.get(name, [])]
    return out


def compile_text(text: str, name: str = "<fuzz>", route: str = "pipeline") -> str | None:
    """Take `text` along `route` (`routes`): the Python source where it ends in some; raises
    BadText where a pass's output does not parse back."""
    from mind.ir.printer import print_module
    from mind.parser import parse
    from mind.passes.manager import STAGES, PassManager, parse_pipeline, resolve_pipeline, stage_of
    from mind.target.triton import emit

    from mind.options import PIPELINE

    from .mind_translate import draw, translate

    if route == "translate":
        return translate(text, name)
    if route == "draw":
        draw(text, name)
        return None
    module = parse(text, name)
    if route == "pipeline":
        start = STAGES.index(stage_of(module))
        rest = [p for p in parse_pipeline(f"to-aten,{PIPELINE}") if STAGES.index(p.input) >= start]
        return emit(PassManager(rest).run(module))
    passes = resolve_pipeline(parse_pipeline(route.removeprefix("pass:")), stage_of(module))
    printed = print_module(PassManager(passes).run(module))
    try:
        parse(printed, f"<{route} output>")
    except MindError as exc:
        raise BadText(f"{exc}\n{printed}") from None
    return None


class BadText(Exception):
    """A pass printed IR that does not parse back."""


def run_one(text: str, timeout: float = 10.0, route: str = "pipeline") -> Result:
    try:
        with time_limit(timeout):
            source = compile_text(text, route=route)
    except _Timeout:
        return Result("timeout")
    except BadText as exc:
        return Result("bad-text", f"printed: {route.split('{')[0]}", str(exc)[:200])
    except MindError as exc:
        if exc.loc is None:  # grouped by what it says, names left out
            sig = "no location: " + re.sub(r"'[^']*'|%\w+|@\S+|\d+", "_", str(exc))[:60]
            return Result("no-location", sig, str(exc)[:200])
        return Result("diagnostic", message=str(exc)[:200])
    except Exception as exc:
        return Result("traceback", signature(exc), f"{type(exc).__name__}: {exc}"[:200])
    if source is None:
        return Result("accepted")
    try:
        compile(source, "<emitted>", "exec")
        source.encode("utf-8")
    except (SyntaxError, ValueError, UnicodeEncodeError) as exc:
        return Result("bad-python", f"emitted: {type(exc).__name__}", str(exc)[:200])
    return Result("accepted")


def signature(exc: BaseException) -> str:
    """The exception type and the innermost frame inside mind's own code."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if str(_REPO) in f.filename and "/tools/fuzz.py" not in f.filename]
    where = ours[-1] if ours else (frames[-1] if frames else None)
    if where is None:
        return type(exc).__name__
    path = Path(where.filename)
    rel = path.relative_to(_REPO) if path.is_relative_to(_REPO) else path.name
    return f"{type(exc).__name__} at {rel}:{where.name}"


def shrink(text: str, sig: str, budget: int = 80, route: str = "pipeline") -> str:
    """Delete top-level ops, then lines, while the crash keeps its signature (bounded, greedy)."""

    def still_crashes(parts: list[str]) -> bool:
        nonlocal budget
        budget -= 1
        result = run_one("\n".join(parts) + "\n", timeout=5, route=route)
        return result.outcome in DEFECTS and result.signature == sig

    units = _top_level_ops(text)
    for split in (lambda units: units, lambda units: "\n".join(units).splitlines()):
        units, i = split(units), 0
        while i < len(units) and budget > 0:
            trial = units[:i] + units[i + 1 :]
            if trial and still_crashes(trial):
                units = trial
            else:
                i += 1
    return "\n".join(units) + "\n"


def _top_level_ops(text: str) -> list[str]:
    """The text cut before each line that starts at column 0 (a top-level op)."""
    ops: list[list[str]] = []
    for line in text.splitlines():
        if not ops or (line[:1].strip() and not line.startswith("}")):
            ops.append([])
        ops[-1].append(line)
    return ["\n".join(op) for op in ops]


# -- the campaign ----------------------------------------------------------------------------
@dataclass
class Report:
    counts: Counter = field(default_factory=Counter)
    #: signature -> (corpus entry, smallest mutant, message, route)
    crashes: dict[str, tuple[str, str, str, str]] = field(default_factory=dict)
    crash_counts: Counter = field(default_factory=Counter)
    tools: list[str] = field(default_factory=list)  # tool runs that printed a traceback

    def table(self) -> str:
        total = sum(self.counts.values())
        rows = ["| outcome | count |", "|---|---|"]
        rows += [f"| {o} | {self.counts.get(o, 0)} |" for o in OUTCOMES]
        return "\n".join(rows + [f"| total | {total} |"]) + "\n"


def campaign(
    corpus: list[tuple[str, str]], count: int, seed: int, timeout: float = 10.0, minimize=True
) -> Report:
    """`count` mutants of the corpus, each along a route: the backend's pipeline for half of
    them, one of the tools' `routes` for its stage for the others."""
    rng = random.Random(seed)
    report = Report()
    stages: dict[str, list[str]] = {}
    for _ in range(count):
        name, text = rng.choice(corpus)
        if name not in stages:
            stages[name] = routes(_stage(text))
        route = "pipeline" if rng.random() < 0.5 else rng.choice(stages[name])
        mutant = mutate(text, rng)
        result = run_one(mutant, timeout, route)
        report.counts[result.outcome] += 1
        if result.outcome in DEFECTS:
            report.crash_counts[result.signature] += 1
            known = report.crashes.get(result.signature)
            if known is None or len(mutant) < len(known[1]):
                report.crashes[result.signature] = (name, mutant, result.message, route)
    if minimize:
        for sig, (name, text, message, route) in report.crashes.items():
            report.crashes[sig] = (name, shrink(text, sig, route=route), message, route)
    return report


def _stage(text: str) -> str | None:
    """The dialect of the first top-level op (invalid inputs of the corpus do not parse)."""
    first = re.search(r"^(\w+)\.", text, re.MULTILINE)
    return first[1] if first else None


def check_tools(report: Report, limit: int, workdir: Path) -> None:
    """Run reproducers through the executables; keep those that print a Python traceback."""
    runs = 0
    for sig, (name, text, _, route) in report.crashes.items():
        if runs >= limit:
            break
        path = workdir / f"crash{runs}{Path(name).suffix or '.aten'}"
        path.write_text(text)
        for tool in (["mind_opt", "--pass=to-triton"], ["mind_translate"], *_tool_of(route)):
            argv = [sys.executable, "-m", f"mind.tools.{tool[0]}", str(path), *tool[1:]]
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
            if "Traceback (most recent call last)" in proc.stderr or proc.returncode not in (0, 1):
                report.tools.append(f"{tool[0]} exit {proc.returncode} on {sig}")
        runs += 1


def _tool_of(route: str) -> list[list[str]]:
    """The command line that takes an input along `route`, where the two default runs do not."""
    if route.startswith("pass:"):
        return [["mind_opt", f"--pass={route.removeprefix('pass:')}"]]
    return [["mind_translate", "--to=dot"]] if route == "draw" else []


def render(report: Report) -> str:
    parts = [report.table()]
    if report.crashes:
        parts.append(f"{len(report.crashes)} distinct crash signature(s):\n")
        for sig, (name, text, message, route) in sorted(report.crashes.items()):
            count = report.crash_counts[sig]
            parts.append(
                f"## {sig} ({count}x, from {name} along {route})\n{message}\n```\n{text}```\n"
            )
    if report.tools:
        parts.append("tool runs that printed a traceback:\n" + "\n".join(report.tools) + "\n")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python3 -m mind.tools.fuzz", description=__doc__.split("\n")[0]
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--count", type=int, default=2000)
    p.add_argument(
        "--corpus", type=Path, default=_REPO / "lit_tests", help="IR files (default: lit_tests)"
    )
    p.add_argument(
        "--captures", action="store_true", help="also fuzz every stage of a few captured programs"
    )
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per mutant")
    p.add_argument(
        "--tools",
        type=int,
        default=0,
        metavar="N",
        help="run N reproducers through mind-opt and mind-translate",
    )
    p.add_argument("--json", type=Path, default=None, help="write counts and crashes as JSON")
    args = p.parse_args(argv)
    import torch  # noqa: F401  (its import sets the "torch" logger's level: set it after)

    logging.getLogger("torch").setLevel(logging.CRITICAL)  # torch logs what to-aten rejects
    corpus = lit_corpus(args.corpus) + (capture_corpus() if args.captures else [])
    if not corpus:
        p.error(f"no IR files under {args.corpus}")
    report = campaign(corpus, args.count, args.seed, args.timeout)
    if args.tools:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            check_tools(report, args.tools, Path(tmp))
    sys.stdout.write(render(report))
    if args.json:
        args.json.write_text(
            json.dumps(
                {"counts": report.counts, "crashes": {s: list(c) for s, c in report.crashes.items()},
                 "crash_counts": report.crash_counts, "tools": report.tools}, indent=1,
            )
        )  # fmt: skip
    return 1 if report.counts["traceback"] or report.counts["bad-python"] or report.tools else 0


if __name__ == "__main__":
    sys.exit(main())
