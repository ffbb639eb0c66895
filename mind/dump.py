"""`MIND_DUMP_DIR=dir`: every stage of every graph as a file `mind-opt` loads, named
`<graph>.<stage>` (`graph0.fx`, `graph0_forward.aten`, `.loops`, `.scheduled`, `.triton`, `.py`);
later passes within a stage add their name (`graph0_forward.inline.loops`). Without the variable,
only the last good IR of a graph that failed is written, to a fresh temporary folder."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from mind.ir.core import Module


def dump_dir() -> Path | None:
    value = os.environ.get("MIND_DUMP_DIR")
    return Path(value) if value else None


@dataclass
class GraphDump:
    """The stages one graph went through: written as they come when dumping. Otherwise only the
    first IR is printed, and the passes run after it remembered: a failure rebuilds the last good
    IR from them, so that compiling prints nothing after each pass."""

    graph: str
    directory: Path | None = field(default_factory=dump_dir)
    #: the last IR printed, as (suffix, text)
    last: tuple[str, str] | None = None
    #: the passes run on `last` since it was printed, and the suffix their output would have
    replay: list = field(default_factory=list)
    suffix: str | None = None
    stages: set[str] = field(default_factory=set)

    def path(self, suffix: str) -> Path | None:
        return self.directory / f"{self.graph}.{suffix}" if self.directory else None

    def write(self, suffix: str, text: str) -> None:
        """Write a file when dumping (the emitted `.py`, which is not IR)."""
        if self.directory:
            self.directory.mkdir(parents=True, exist_ok=True)
            self.path(suffix).write_text(text)

    def stage(self, stage: str, module: Module, pass_name: str | None = None) -> None:
        """Record IR of `stage`: `<graph>.<stage>` the first time, `<graph>.<pass>.<stage>` after."""
        self.last = (self._suffix(stage, pass_name), str(module))
        self.replay, self.suffix = [], self.last[0]
        self.write(*self.last)

    def _suffix(self, stage: str, pass_name: str | None) -> str:
        suffix = f"{pass_name}.{stage}" if stage in self.stages and pass_name else stage
        self.stages.add(stage)
        return suffix

    def after_pass(self, p, module: Module) -> None:
        """The PassManager's `on_pass` hook."""
        if self.directory or self.last is None:
            self.stage(p.output, module, p.name)
        else:
            self.replay.append(p)
            self.suffix = self._suffix(p.output, p.name)

    def reproducer(self) -> Path | None:
        """The file holding the last good IR, written to a temporary folder when not dumping."""
        if self.last is None:
            return None
        if self.directory:
            return self.path(self.last[0])
        suffix, text = self._rebuilt()
        path = Path(tempfile.mkdtemp(prefix="mind-")) / f"{self.graph}.{suffix}"
        path.write_text(text)
        return path

    def _rebuilt(self) -> tuple[str, str]:
        """The last good IR: the passes replayed on the last printed IR (or that IR, should
        replaying fail)."""
        if not self.replay:
            return self.last
        from mind.parser import parse
        from mind.passes.manager import PassManager

        try:
            module = PassManager(self.replay, verify_each=False).run(parse(self.last[1]))
        except Exception:
            return self.last
        return self.suffix, str(module)
