"""mind-translate: triton IR -> Python source (kernels and `call`). Input of an earlier stage is
first brought to triton IR by the pass manager (`mind-translate seed.scheduled` runs
online-softmax and to-triton).

Exit codes: 0 success, 1 an error in the input or an internal error (a bug in mind, reported as
one diagnostic naming the pass), 2 bad command-line usage.
"""

from __future__ import annotations

import argparse
import sys

from .internal import Progress, internal_error
from .textio import read_input, write_output

#: what brings scheduled IR to triton IR, as the backend's pipeline ends
PIPELINE = "online-softmax,to-triton"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mind-translate", description="Emit Python from mind IR.")
    p.add_argument("input", nargs="?", default="-", help="input file, or - for standard input")
    p.add_argument("-o", dest="output", default="-", help="output file (default: standard output)")
    p.add_argument(
        "-p",
        "--pipeline",
        default=PIPELINE,
        help=f"passes that bring earlier stages to triton IR (default: {PIPELINE})",
    )
    return p


def translate(
    text: str, filename: str, pipeline: str = PIPELINE, progress: Progress | None = None
) -> str:
    from mind.parser import parse
    from mind.passes.manager import PassManager, parse_pipeline, resolve_pipeline, stage_of
    from mind.target.triton import emit

    progress = progress or Progress()
    progress.step = "parsing"
    module = parse(text, filename)
    if stage_of(module) != "triton":
        passes = resolve_pipeline(parse_pipeline(pipeline), stage_of(module))
        progress.manager = PassManager(passes)
        module = progress.manager.run(module)
        progress.manager = None
    progress.step = "emitting Python"
    source = emit(module)
    progress.step = "checking the emitted Python"
    compile(source, filename, "exec")  # emitted code that does not compile is a bug in mind
    return source


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)  # before any import: `--help` answers at once
    from mind.ir.diagnostics import MindError

    try:
        text, filename = read_input(args.input)
    except OSError as exc:
        sys.stderr.write(f"mind-translate: cannot read '{args.input}': {exc.strerror}\n")
        return 2
    progress = Progress()
    try:
        source = translate(text, filename, args.pipeline, progress)
        progress.step = "writing the output"
        write_output(source, args.output)
    except MindError as exc:
        sys.stderr.write(exc.render() + "\n")
        return 1
    except Exception as exc:  # a bug in mind: one diagnostic, not a traceback
        sys.stderr.write(internal_error("mind-translate", exc, progress.where(), filename) + "\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
