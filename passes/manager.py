"""The pass registry, pipeline strings (`lower,realize{reads-threshold=4}`), and the manager that
runs passes with verification, IR dumps, timing and automatic stage conversions."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import re
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import ClassVar, TextIO

from mind.ir.core import Module, Operation
from mind.ir.diagnostics import MindError
from mind.ir.verifier import verify

#: the stages in pipeline order; a module's stage is the dialect of its top-level ops
STAGES = ("fx", "aten", "loops", "scheduled", "triton")
#: what brings a module from a stage to the next one
CONVERSIONS: dict[str, tuple[str, ...]] = {
    "fx": ("to-aten",),
    "aten": ("lower",),
    "loops": ("realize", "inline", "schedule"),
    "scheduled": ("to-triton",),
}


@dataclass(frozen=True)
class Pass:
    """A pass: a frozen dataclass whose fields are its options (`realize{reads-threshold=4}`
    sets `reads_threshold`). A subclass names itself and its dialects in the class statement,
    which registers it; its docstring's first line is its summary:

        @dataclass(frozen=True)
        class Fuse(GraphPass, name="fuse", input="scheduled"):
            '''Fuse scheduler nodes with compatible loops, most bytes saved first.'''
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
        raise NotImplementedError

    def __str__(self) -> str:
        opts = [
            f"{f.name.replace('_', '-')}={getattr(self, f.name)}"
            for f in dataclasses.fields(self)
            if getattr(self, f.name) != f.default
        ]
        return self.name + ("{" + ",".join(opts) + "}" if opts else "")


PASSES: dict[str, type[Pass]] = {}


@dataclass(frozen=True)
class GraphPass(Pass):
    """A pass that handles each graph of the module on its own: `run_graph` changes the graph in
    place (returning None) or returns what replaces it (a graph of the output dialect, or a list
    of top-level ops)."""

    def run(self, module: Module) -> Module:
        out: list[Operation] = []
        for graph in module.ops:
            if graph.dialect != self.input:
                raise MindError(
                    f"pass '{self.name}' runs on {self.input} IR, not '{graph.name}'", graph.loc
                )
            new = self.run_graph(graph)
            out += [graph] if new is None else new if isinstance(new, list) else [new]
        if all(a is b for a, b in zip(out, module.ops)) and len(out) == len(module.ops):
            return module
        return Module(out)

    def run_graph(self, graph: Operation) -> Operation | list[Operation] | None:
        raise NotImplementedError


_ITEM = re.compile(r"\s*([A-Za-z0-9_-]+)\s*(?:\{([^}]*)\})?\s*(?:,|$)")


def parse_pipeline(text: str) -> list[Pass]:
    """`a,b{opt=1,x=y}` into pass instances; unknown passes and options are readable errors."""
    import mind.passes  # noqa: F401  (registers every pass)

    passes, pos = [], 0
    text = text.strip()
    while pos < len(text):
        match = _ITEM.match(text, pos)
        if not match or match.end() == pos:
            raise MindError(f"malformed pipeline at column {pos + 1}: '{text[pos:]}'")
        passes.append(make_pass(match.group(1), match.group(2) or ""))
        pos = match.end()
    return passes


def make_pass(name: str, options: str = "") -> Pass:
    if name not in PASSES:
        raise MindError(f"unknown pass '{name}' (known: {', '.join(sorted(PASSES))})")
    cls = PASSES[name]
    fields = {f.name.replace("_", "-"): f for f in dataclasses.fields(cls)}
    values = {}
    for item in filter(None, (o.strip() for o in options.split(","))):
        key, _, raw = item.partition("=")
        if key.strip() not in fields:
            known = ", ".join(fields) or "none"
            raise MindError(f"pass '{name}' has no option '{key.strip()}' (options: {known})")
        f = fields[key.strip()]
        values[f.name] = _convert(raw.strip(), type(f.default), name, key.strip())
    return cls(**values)


def _convert(raw: str, kind: type, pass_name: str, key: str):
    try:
        if kind is bool:
            if raw not in ("true", "false", "1", "0"):
                raise ValueError(raw)
            return raw in ("true", "1")
        return kind(raw)
    except ValueError:
        raise MindError(
            f"option '{key}' of pass '{pass_name}' expects {kind.__name__}, got '{raw}'"
        ) from None


def stage_of(module: Module) -> str:
    stage = module.dialect
    if stage not in STAGES:
        raise MindError(
            f"cannot tell the stage of this input (top-level dialects: {sorted({op.dialect for op in module.ops})})"
        )
    return stage


def resolve_pipeline(passes: list[Pass], stage: str) -> list[Pass]:
    """Insert the conversions a pass needs when it is given IR of an earlier stage."""
    resolved: list[Pass] = []
    for p in passes:
        while stage != p.input:
            if STAGES.index(stage) > STAGES.index(p.input):
                raise MindError(
                    f"pass '{p.name}' runs on {p.input} IR, but the input is already {stage} IR"
                )
            for name in CONVERSIONS[stage]:
                resolved.append(make_pass(name))
            stage = resolved[-1].output
        resolved.append(p)
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
    verify_each: bool = True
    print_after_all: bool = False
    print_before_all: bool = False
    time_passes: bool = False
    out: TextIO = field(default_factory=lambda: sys.stderr)
    timings: list[tuple[str, float]] = field(default_factory=list)
    on_pass: Callable[[Pass, Module], None] | None = None

    def run(self, module: Module) -> Module:
        with gc_paused():
            return self._run(module)

    def _run(self, module: Module) -> Module:
        for p in self.passes:
            if self.print_before_all:
                self.out.write(f"// *** IR Dump Before {p} ***\n{module}\n")
            start = time.perf_counter()
            module = p.run(module)
            self.timings.append((str(p), time.perf_counter() - start))
            if self.verify_each:
                verify(module)
            if self.print_after_all:
                self.out.write(f"// *** IR Dump After {p} ***\n{module}\n")
            if self.on_pass:
                self.on_pass(p, module)
        if self.time_passes:
            self.report_timings()
        return module

    def report_timings(self) -> None:
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


def run_pipeline(module: Module, pipeline: str | list[Pass], **options) -> Module:
    """Parse (if needed), insert conversions, and run a pipeline on `module`."""
    passes = parse_pipeline(pipeline) if isinstance(pipeline, str) else pipeline
    return PassManager(resolve_pipeline(passes, stage_of(module)), **options).run(module)
