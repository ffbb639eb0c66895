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
    """The stages one graph went through: written as they come when dumping, and the last good
    one kept so that a failure can name a reproducer."""

    graph: str
    directory: Path | None = field(default_factory=dump_dir)
    last: tuple[str, str] | None = None
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
        suffix = f"{pass_name}.{stage}" if stage in self.stages and pass_name else stage
        self.stages.add(stage)
        self.last = (suffix, str(module))
        self.write(*self.last)

    def after_pass(self, p, module: Module) -> None:
        """The PassManager's `on_pass` hook."""
        self.stage(p.output, module, p.name)

    def reproducer(self) -> Path | None:
        """The file holding the last good IR, written to a temporary folder when not dumping."""
        if self.last is None:
            return None
        suffix, text = self.last
        if self.directory:
            return self.path(suffix)
        path = Path(tempfile.mkdtemp(prefix="mind-")) / f"{self.graph}.{suffix}"
        path.write_text(text)
        return path
