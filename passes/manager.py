"""The pass registry, pipeline strings (`lower,realize{reads-threshold=4}`), and the manager that
runs passes with verification, IR dumps, timing and automatic stage conversions."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import importlib
import logging
import pkgutil
import re
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TextIO

from mind.ir.core import Module, Operation, edits
from mind.ir.diagnostics import Location, MindError, located
from mind.ir.logs import channel
from mind.ir.symbols import symbol_hints
from mind.ir.verifier import verify

log = channel("passes")

Verification = Literal["each", "stages", "off"]

#: the stages in pipeline order; a module's stage is the dialect of its top-level ops
STAGES = ("fx", "aten", "loops", "scheduled", "triton")
#: what brings a module from a stage to the next one
CONVERSIONS: dict[str, tuple[str, ...]] = {
    "fx": ("attention-masks", "to-aten"),
    "aten": ("lower",),
    "loops": ("realize", "inline", "schedule"),
    "scheduled": ("to-triton",),
}


def option(default: Any, help: str) -> Any:
    """A pass option: a dataclass field with its default and what it means (`--list-passes`
    prints both)."""
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class Pass:
    """A pass: a frozen dataclass whose fields are its options (`realize{reads-threshold=4}`
    sets `reads_threshold`), each declared with `option`. A subclass names itself and its
    dialects in the class statement, which registers it; its docstring's first line is its
    summary. `run` checks that the module is of the pass's input stage, then `run_module` works:

        @dataclass(frozen=True)
        class Fuse(GraphPass, name="fuse", input="scheduled"):
            "Fuse scheduler nodes with compatible loops, most bytes saved first."

            max_fusion_size: int = option(64, "the most nodes one kernel may hold")
    """

    name: ClassVar[str]
    input: ClassVar[str]
    output: ClassVar[str]
    summary: ClassVar[str] = ""

    def __init_subclass__(
        cls, name: str | None = None, input: str = "", output: str = "", **kwargs
    ) -> None:
        super().__init_subclass__(**kwargs)
        if name is not None:
            cls.name, cls.input, cls.output = name, input, output or input
            cls.summary = (cls.__doc__ or "").strip().split("\n")[0].rstrip(".")
            PASSES[name] = cls

    def run(self, module: Module) -> Module:
        """The pass on `module`, which must be of its input stage: a pass given IR of another
        stage would return nonsense, or its input unchanged."""
        for graph in module.ops:
            if graph.dialect != self.input:
                raise MindError(
                    f"pass '{self.name}' runs on {self.input} IR, not {graph.dialect} IR "
                    f"('{graph.name}')",
                    graph.loc,
                )
        return self.run_module(module)

    def run_module(self, module: Module) -> Module:
        raise NotImplementedError

    @classmethod
    def options(cls) -> tuple[dataclasses.Field, ...]:
        return dataclasses.fields(cls)

    def __str__(self) -> str:
        opts = [
            f"{f.name.replace('_', '-')}={show_value(getattr(self, f.name))}"
            for f in self.options()
            if getattr(self, f.name) != f.default
        ]
        return self.name + ("{" + " ".join(opts) + "}" if opts else "")


def show_value(value: Any) -> str:
    """An option's value as a pipeline string spells it."""
    return str(value).lower() if isinstance(value, bool) else str(value)


PASSES: dict[str, type[Pass]] = {}


@functools.cache
def _import_passes() -> None:
    """Import every module of this package: each registers its passes in PASSES."""
    package = sys.modules[__name__.rpartition(".")[0]]
    for module in pkgutil.iter_modules(package.__path__):
        if not module.ispkg:
            importlib.import_module(f"{package.__name__}.{module.name}")


def registered() -> dict[str, type[Pass]]:
    """Every pass by name, their modules imported on first use (not when the package is: a
    process whose graphs all come from the cache runs no pass, and importing them all took
    0.38 s of a warm first call on an H100 host)."""
    _import_passes()
    return PASSES


@dataclass(frozen=True)
class GraphPass(Pass):
    """A pass that handles each graph of the module on its own: `run_graph` changes the graph in
    place (returning None) or returns what replaces it (a graph of the output dialect, or a list
    of top-level ops)."""

    def run_module(self, module: Module) -> Module:
        out: list[Operation] = []
        for graph in module.ops:
            if graph.name != f"{self.input}.graph":
                raise MindError(
                    f"pass '{self.name}' runs on {self.input}.graph ops, not '{graph.name}'",
                    graph.loc,
                )
            # an error about an op no text made: at its graph; heuristics size its symbols
            # as it was traced
            with located(graph.loc), symbol_hints(graph.attrs.get("hints")):
                new = self.run_graph(graph)
            out += [graph] if new is None else new if isinstance(new, list) else [new]
        if all(a is b for a, b in zip(out, module.ops)) and len(out) == len(module.ops):
            return module
        return Module(out)

    def run_graph(self, graph: Operation) -> Operation | list[Operation] | None:
        raise NotImplementedError


#: a pipeline's tokens; anything else is an error at its column
_TOKEN = re.compile(r"(?P<name>[A-Za-z0-9_-]+)|(?P<options>\{[^{}]*\})|(?P<comma>,)|(?P<space>\s+)")
_EXPECTED = {"name": "a pass name", "comma": "',' between passes"}


def parse_pipeline(text: str, source: str = "<pipeline>") -> list[Pass]:
    """`a,b{opt=1 x=y}` into pass instances (options separated by spaces, as MLIR's, or by
    commas). A malformed pipeline, an unknown pass or option is an error at its column, in a
    file named `source`."""
    import mind.passes  # noqa: F401  (registers every pass)

    passes: list[Pass] = []
    expect = "name"
    tokens = [m for m in _tokens(text, source) if m.lastgroup != "space"]
    for i, match in enumerate(tokens):
        kind, at = match.lastgroup, Location(source, 1, match.start() + 1, text)
        if kind == "options" and expect == "comma" and tokens[i - 1].lastgroup == "name":
            passes[-1] = make_pass(passes[-1].name, match.group()[1:-1], at)
        elif kind != expect:
            raise MindError(f"malformed pipeline: expected {_EXPECTED[expect]}", at)
        elif kind == "name":
            passes.append(make_pass(match.group(), "", at))
            expect = "comma"
        else:
            expect = "name"
    if expect == "name" and passes:
        at = Location(source, 1, len(text) + 1, text)
        raise MindError("malformed pipeline: expected a pass name after ','", at)
    return passes


def _tokens(text: str, source: str) -> Iterator[re.Match]:
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            what = "unclosed '{'" if text[pos] == "{" else f"unexpected '{text[pos]}'"
            raise MindError(f"malformed pipeline: {what}", Location(source, 1, pos + 1, text))
        yield match
        pos = match.end()


def make_pass(name: str, options: str = "", loc: Location | None = None) -> Pass:
    """The pass `name` with `options` (`a=1 b=2`, or `a=1,b=2`); errors are located at `loc`."""
    passes = registered()
    if name not in passes:
        raise MindError(f"unknown pass '{name}' (known: {', '.join(sorted(passes))})", loc)
    cls = passes[name]
    fields = {f.name.replace("_", "-"): f for f in cls.options()}
    values = {}
    for item in filter(None, re.split(r"[\s,]+", options)):
        key, _, raw = item.partition("=")
        if key not in fields:
            known = ", ".join(fields) or "none"
            raise MindError(f"pass '{name}' has no option '{key}' (options: {known})", loc)
        f = fields[key]
        values[f.name] = _convert(raw, type(f.default), name, key, loc)
    return cls(**values)


def _convert(raw: str, kind: type, pass_name: str, key: str, loc: Location | None):
    try:
        if kind is bool:
            if raw not in ("true", "false", "1", "0"):
                raise ValueError(raw)
            return raw in ("true", "1")
        return kind(raw)
    except ValueError:
        raise MindError(
            f"option '{key}' of pass '{pass_name}' expects {kind.__name__}, got '{raw}'", loc
        ) from None


def stage_of(module: Module) -> str | None:
    """The stage of a module's graphs; None for an empty module, on which any pass runs (as
    mlir-opt runs passes on an empty module)."""
    if not module.ops:
        return None
    stage = module.dialect
    if stage not in STAGES:
        raise MindError(
            f"cannot tell the stage of this input (top-level dialects: {sorted({op.dialect for op in module.ops})})"
        )
    return stage


def conversions(stage: str, target: str) -> list[Pass] | None:
    """The passes that bring IR of `stage` to `target` (CONVERSIONS); None when `target` is an
    earlier stage."""
    if STAGES.index(stage) > STAGES.index(target):
        return None
    passes: list[Pass] = []
    while stage != target:
        passes += [make_pass(name) for name in CONVERSIONS[stage]]
        stage = passes[-1].output
    return passes


def resolve_pipeline(passes: list[Pass], stage: str | None) -> list[Pass]:
    """Insert the conversions a pass needs when it is given IR of an earlier stage (none for an
    empty module)."""
    if stage is None:
        return list(passes)
    resolved: list[Pass] = []
    for p in passes:
        needed = conversions(stage, p.input)
        if needed is None:
            raise MindError(
                f"pass '{p.name}' runs on {p.input} IR, but the input is already {stage} IR"
            )
        resolved += [*needed, p]
        stage = p.output
    return resolved


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic GC off for the duration. Passes allocate much and keep it (the IR), so
    the collector would run full collections, each a walk over the whole heap (torch, Dynamo and
    sympy's caches hold millions of objects): a third of a pipeline's time. Afterwards the
    young collections free what the pipeline dropped; only survivors age into full ones."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@dataclass
class PassManager:
    passes: list[Pass]
    #: when the verifier runs: after every pass that edited ("each", mlir-opt's default), at
    #: the end of each stage ("stages": before a pass that converts to the next dialect, and
    #: after the last pass), or never ("off")
    verify: Verification = "each"
    print_after_all: bool = False
    print_before_all: bool = False
    time_passes: bool = False
    out: TextIO = field(default_factory=lambda: sys.stderr)
    timings: list[tuple[str, float]] = field(default_factory=list)
    on_pass: Callable[[Pass, Module], None] | None = None
    current: Pass | None = None  # the pass running (or verifying) now, for internal errors

    def run(self, module: Module) -> Module:
        with gc_paused():
            return self._run(module)

    def _run(self, module: Module) -> Module:
        given = module
        verified: tuple[Module, int] | None = None  # the module last verified, and when
        for i, p in enumerate(self.passes):
            if self.print_before_all:
                self.out.write(f"// *** IR Dump Before {p} ***\n{module}\n")
            start = time.perf_counter()
            self.current = p
            module, before = p.run(module), module
            if before is not given and module is not before:  # made here and replaced
                before.discard(keep=module.ops)
            self.timings.append((str(p), time.perf_counter() - start))
            if log.isEnabledFor(logging.INFO):
                log.info("%s: %.2f ms, %s", p, 1e3 * self.timings[-1][1], _sizes(module))
            if self._verifies_after(i) and verified != (module, edits()):  # (not if unchanged)
                verify(module)
                verified = (module, edits())
            self.current = None
            if self.print_after_all:
                self.out.write(f"// *** IR Dump After {p} ***\n{module}\n")
            if self.on_pass:
                self.on_pass(p, module)
        if self.time_passes:
            self.report_timings()
        return module

    def _verifies_after(self, i: int) -> bool:
        """Whether the `i`-th pass's result is verified. "stages" checks what each stage ends
        with, the IR a conversion reads, for a third of the verifier's time on the backend's
        pipeline (a first call's); a broken pass is then found by its stage, and `mind-opt`
        (`each`) on the stage's dumped input names it."""
        if self.verify == "stages":
            nxt = self.passes[i + 1] if i + 1 < len(self.passes) else None
            return nxt is None or nxt.input != nxt.output
        return self.verify == "each"

    def report_timings(self) -> None:
        """MLIR's `--mlir-timing` report."""
        total = sum(t for _, t in self.timings) or 1e-12
        self.out.write("===-------------------------------------------------------------===\n")
        self.out.write("                      ... Pass execution timing report ...\n")
        self.out.write("===-------------------------------------------------------------===\n")
        self.out.write(
            f"  Total Execution Time: {total:.4f} seconds\n\n   ---Wall Time---  --- Name ---\n"
        )
        for name, t in self.timings:
            self.out.write(f"   {t:.4f} ({100 * t / total:5.1f}%)  {name}\n")
        self.out.write(f"   {total:.4f} (100.0%)  Total\n")


def _sizes(module: Module) -> str:
    """Each graph's op count (for the passes log)."""
    return ", ".join(
        f"@{g.symbol or g.name} {sum(1 for _ in g.walk()) - 1} ops" for g in module.ops
    )


def run_pipeline(module: Module, pipeline: str | list[Pass], **options) -> Module:
    """Parse (if needed), insert conversions, and run a pipeline on `module`."""
    passes = parse_pipeline(pipeline) if isinstance(pipeline, str) else pipeline
    return PassManager(resolve_pipeline(passes, stage_of(module)), **options).run(module)
