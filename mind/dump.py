"""`MIND_DUMP_DIR=dir`: every stage of every graph as a file `mind-opt` loads, numbered in
pipeline order and named by the pass that made it: `graph0.00.fx`, `graph0_forward.00.aten`,
`graph0_forward.01.channels-last.aten`, ..., `graph0_forward.17.to-triton.triton`, then the
emitted `graph0_forward.18.py` (the default pipeline's numbers). Where the graph leaves
scheduled IR, a picture of it (`graph0_forward.16.scheduled.dot`, and `.svg` where Graphviz is installed): its nodes as
scheduled, with the kernels that the scheduled passes (fuse) formed boxed.

Without the variable nothing is written, except the last good IR of a graph that failed: to
`$MIND_CACHE_DIR/reproducers/`, named by the graph and a hash of the text (running the same
failing program again rewrites the same file)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from mind.ir.core import Module

#: scheduled graphs with more ops get no SVG (Graphviz lays out large graphs slowly)
DRAW_MAX_OPS = 400


def dump_dir() -> Path | None:
    value = os.environ.get("MIND_DUMP_DIR")
    return Path(value) if value else None


def reproducer_dir() -> Path:
    from mind.runtime import cache_dir

    return cache_dir() / "reproducers"


@dataclass
class GraphDump:
    """The stages one graph went through: written as they come when dumping. Otherwise only a
    stage's first IR is printed and the passes run after it remembered: a failure rebuilds the
    last good IR by replaying them, so that compiling prints no IR after each pass."""

    graph: str
    directory: Path | None = field(default_factory=dump_dir)
    #: (name without the number, text) of the last IR printed
    last: tuple[str, str] | None = None
    #: the passes run on `last` since it was printed, and the name their output has
    replay: list = field(default_factory=list)
    name: str | None = None
    #: the files written, in order
    files: list[Path] = field(default_factory=list)
    #: the scheduled IR so far, when dumping (the picture shows the first and the last)
    scheduled: list[str] = field(default_factory=list)

    def write(self, suffix: str, data: str | bytes) -> Path | None:
        """Write `<graph>.<NN>.<suffix>` when dumping, NN counting the files of this graph."""
        if not self.directory:
            return None
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{self.graph}.{len(self.files):02d}.{suffix}"
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data)
        self.files.append(path)
        return path

    def file(self, suffix: str) -> Path | None:
        """The last file written whose name ends with `.suffix`."""
        return next((f for f in reversed(self.files) if f.name.endswith(f".{suffix}")), None)

    def stage(self, stage: str, module: Module, pass_name: str | None = None) -> None:
        """Record IR of `stage`, made by `pass_name` (None: the stage's first IR)."""
        text = str(module)
        self.last = (f"{pass_name}.{stage}" if pass_name else stage, text)
        self.replay, self.name = [], self.last[0]
        if self.directory and self.scheduled and stage != "scheduled":
            self.picture()
        self.write(*self.last)
        if self.directory and stage == "scheduled":
            self.scheduled.append(text)

    def after_pass(self, p, module: Module) -> None:
        """The PassManager's `on_pass` hook."""
        if self.directory or self.last is None:
            self.stage(p.output, module, p.name)
        else:
            self.replay.append(p)
            self.name = f"{p.name}.{p.output}"

    def picture(self) -> None:
        """The scheduled graph as Graphviz draws it: as scheduled, fused kernels boxed."""
        from mind.parser import parse
        from mind.target.dot import can_render, render, to_dot

        before = parse(self.scheduled[0], "scheduled")
        dot = to_dot(before, parse(self.scheduled[-1], "scheduled"))
        self.scheduled = []
        path = self.write("scheduled.dot", dot)
        if can_render() and sum(len(g.body.ops) for g in before.ops) <= DRAW_MAX_OPS:
            try:
                path.with_suffix(".svg").write_bytes(render(dot, "svg"))
            except (OSError, RuntimeError, subprocess.CalledProcessError):
                pass  # the picture is a convenience: the DOT text is there

    def reproducer(self) -> Path | None:
        """The file holding the last good IR: the dump, or one in `reproducer_dir()`."""
        if self.last is None:
            return None
        if self.directory:
            return self.file(self.last[0])
        suffix, text = self._rebuilt()
        digest = hashlib.sha256(text.encode()).hexdigest()[:12]
        path = reproducer_dir() / f"{self.graph}.{digest}.{suffix}"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        except OSError:
            return None
        return path

    def _rebuilt(self) -> tuple[str, str]:
        """(name, text) of the last good IR: the passes replayed on the last IR printed (or that
        IR, should replaying fail)."""
        if not self.replay:
            return self.last
        from mind.parser import parse
        from mind.passes.manager import PassManager

        try:
            module = PassManager(self.replay, verify="off").run(parse(self.last[1]))
        except Exception:
            return self.last
        return self.name, str(module)
