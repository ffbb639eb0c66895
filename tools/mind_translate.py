"""mind-translate: mind IR -> another language.

    --to=python   triton IR -> Python source (kernels and `call`); input of an earlier stage is
                  first brought to triton IR by the pass manager (`mind-translate seed.scheduled`
                  runs online-softmax, welford, split-reductions, reorder-collectives and to-triton)
    --to=dot      the scheduled graph as a Graphviz picture: kernels, buffers as edges labelled
                  with their bytes, each fused kernel a box around the nodes it joined (the
                  pipeline, default `fuse`, runs on the input brought to scheduled IR)
    --to=svg/png  the same picture drawn by Graphviz (`pip install graphviz` and the `dot`
                  program)

Exit codes: 0 success, 1 an error in the input (or an unreadable input, an unwritable output,
no Graphviz to draw with) or an internal error (a bug in mind, reported as one diagnostic naming
the pass), 2 bad command-line usage.
"""

from __future__ import annotations

import argparse
import sys

from . import VersionAction, environment_help, logs_configured
from .internal import Progress, internal_error
from .server import run_on_server
from .textio import read_input, write_output

#: the passes each target runs on the input (earlier stages get their conversions first)
PIPELINES = {
    "python": "online-softmax,welford,split-reductions,reorder-collectives,to-triton",
    "dot": "fuse",
}
TARGETS = ("python", "dot", "svg", "png")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mind-translate",
        description="Emit Python, or draw the scheduled graph, from mind IR.",
        epilog=environment_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("input", nargs="?", default="-", help="input file, or - for standard input")
    p.add_argument("-o", dest="output", default="-", help="output file (default: standard output)")
    p.add_argument(
        "--to", choices=TARGETS, default="python", help="what to write (default: python)"
    )
    p.add_argument(
        "-p",
        "--pipeline",
        default=None,
        help=f"passes to run first (default: {PIPELINES['python']} for python, "
        f"{PIPELINES['dot']} for pictures)",
    )
    p.add_argument("--version", action=VersionAction)
    return p


def translate(
    text: str, filename: str, pipeline: str | None = None, progress: Progress | None = None
) -> str:
    """Python source for IR text of any stage (run through `pipeline` to triton IR)."""
    from mind.parser import parse
    from mind.passes.manager import PassManager, parse_pipeline, resolve_pipeline, stage_of
    from mind.target.triton import emit

    progress = progress or Progress()
    progress.step = "parsing"
    module = parse(text, filename)
    if stage_of(module) != "triton":
        passes = resolve_pipeline(parse_pipeline(pipeline or PIPELINES["python"]), stage_of(module))
        progress.manager = PassManager(passes)
        module = progress.manager.run(module)
        progress.manager = None
    progress.step = "emitting Python"
    source = emit(module)
    progress.step = "checking the emitted Python"
    compile(source, filename, "exec")  # emitted code that does not compile is a bug in mind
    return source


def draw(text: str, filename: str, pipeline: str | None = None) -> str:
    """DOT text for IR text of a stage up to scheduled: the graph brought to scheduled IR, with
    the kernels `pipeline` (scheduled passes, default fuse) forms out of its nodes boxed."""
    from mind.ir.core import Module
    from mind.ir.diagnostics import MindError
    from mind.parser import parse
    from mind.passes.manager import PassManager, conversions, parse_pipeline, stage_of
    from mind.target.dot import to_dot

    module = parse(text, filename)
    stage = stage_of(module) or "scheduled"
    passes = conversions(stage, "scheduled")
    if passes is None:
        raise MindError(f"a picture shows scheduled IR, but the input is already {stage} IR")
    before = PassManager(passes).run(module)
    after = PassManager(parse_pipeline(pipeline or PIPELINES["dot"])).run(
        Module([graph.clone() for graph in before.ops])
    )
    return to_dot(before, after)


def main(argv: list[str] | None = None) -> int:
    if argv is None and (code := run_on_server("mind-translate")) is not None:
        return code  # a warm server ran it (server.py)
    args = build_parser().parse_args(argv)  # before any import: `--help` answers at once
    if not logs_configured("mind-translate"):
        return 2
    from mind.ir.diagnostics import MindError

    try:
        text, filename = read_input(args.input)
    except OSError as exc:
        sys.stderr.write(f"mind-translate: cannot read '{args.input}': {exc.strerror}\n")
        return 1
    progress = Progress()
    try:
        if args.to == "python":
            result: str | bytes = translate(text, filename, args.pipeline, progress)
        else:
            progress.step = "drawing the scheduled graph"
            result = draw(text, filename, args.pipeline)
    except MindError as exc:
        sys.stderr.write(exc.render() + "\n")
        return 1
    except Exception as exc:  # a bug in mind: one diagnostic, not a traceback
        diagnostic = internal_error("mind-translate", exc, progress.where(), filename)
        sys.stderr.write(diagnostic.render() + "\n")
        return 1
    if args.to in ("svg", "png"):
        from mind.target.dot import can_render, render

        if not can_render():
            sys.stderr.write(
                f"mind-translate: --to={args.to} needs Graphviz: `pip install graphviz` and its "
                "`dot` program (apt install graphviz); --to=dot writes the DOT text\n"
            )
            return 1
        result = render(result, args.to)
    try:
        write_output(result, args.output)
    except OSError as exc:
        sys.stderr.write(f"mind-translate: cannot write '{args.output}': {exc.strerror}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
