"""mind-opt: parse, run passes, print. Like mlir-opt, a thin driver over the pass registry.

Exit codes: 0 success, 1 an error in the input (parse, verify, pass; an unreadable input, an
unwritable output) or an internal error (a bug in mind, reported as one diagnostic naming the
pass), 2 bad command-line usage. As mlir-opt: with `--split-input-file`, the chunks
that succeed are printed even when another fails; `-o` is written only when all succeed.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from . import VersionAction, environment_help, logs_configured
from .internal import Progress, internal_error
from .server import run_on_server
from .textio import read_input, write_output

if TYPE_CHECKING:
    from mind.ir.diagnostics import Diagnostic


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mind-opt",
        description="Run mind passes on IR text.",
        epilog=environment_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("input", nargs="?", default="-", help="input file, or - for standard input")
    p.add_argument("-o", dest="output", default="-", help="output file (default: standard output)")
    p.add_argument(
        "--pass",
        dest="passes",
        action="append",
        default=[],
        metavar="NAME[{opts}]",
        help="run a pass (repeatable, in order)",
    )
    p.add_argument("-p", "--pipeline", default=None, help="a pipeline string: a,b{opt=1 other=2}")
    p.add_argument("--split-input-file", action="store_true", help="split the input on '// -----'")
    p.add_argument(
        "--verify-diagnostics",
        action="store_true",
        help="check diagnostics against expected-error@+N {{...}} (and -remark) comments",
    )
    p.add_argument(
        "--remarks",
        action="store_true",
        help="print the remarks passes make (fuse: each pair of nodes weighed, and why)",
    )
    p.add_argument("--generic", action="store_true", help="print every op in its generic form")
    p.add_argument("--list-passes", action="store_true", help="list the registered passes")
    p.add_argument(
        "--list-ops",
        nargs="?",
        const="",
        metavar="DIALECT",
        help="print each op's declaration (of every dialect, or of DIALECT)",
    )
    p.add_argument("--dump-pass-pipeline", action="store_true", help="print the resolved pipeline")
    p.add_argument("--print-ir-after-all", action="store_true")
    p.add_argument("--print-ir-before-all", action="store_true")
    p.add_argument("--time-passes", action="store_true")
    p.add_argument("--no-verify-each", action="store_true", help="skip the verifier between passes")
    p.add_argument("--version", action=VersionAction)
    return p


def list_passes() -> str:
    """Each pass: its stages and summary, then each option with its type, default and meaning."""
    from mind.passes import PASSES
    from mind.passes.manager import show_value

    lines = ["Available passes:"]
    for name, cls in sorted(PASSES.items()):
        lines.append(f"  {name:<15} {cls.input + ' -> ' + cls.output:<23} {cls.summary}")
        for f in cls.options():
            spelled = f"{f.name.replace('_', '-')}={show_value(f.default)}"
            kind = type(f.default).__name__
            lines.append(f"      {spelled:<24} {kind:<5} {f.metadata.get('help', '')}")
    return "\n".join(lines) + "\n"


def list_ops(only: str = "") -> str:
    """Every op's declaration, dialect by dialect: `name(args) {attrs} : results { regions }`,
    `?` marking optional fields, then its summary."""
    import mind.dialects  # noqa: F401  (says where each dialect lives)
    from mind.ir.registry import all_dialects

    lines = []
    for dialect in all_dialects():
        if only and dialect.name != only:
            continue
        lines.append(f"{dialect.name}:")
        for group in _same_shape(list(dialect.ops.values())):
            head = group[0].declaration()
            if len(group) > 1:  # the scalar ops: one entry per arity
                names = " ".join(o.name.split(".", 1)[1] for o in group)
                head = head.replace(group[0].name, f"{dialect.name}.<op>", 1)
                head += f"\n      <op>: {names}"
            lines.append(f"  {head}")
            if group[0].summary:
                lines.append(f"      {group[0].summary}")
        if dialect.resolve is not None:
            lines.append(f"  {dialect.name}.<op>.<overload>(...) : ...")
            lines.append("      every ATen overload, declared from torch's schema")
    if only and not lines:
        raise SystemExit(f"mind-opt: no dialect '{only}'")
    return "\n".join(lines) + "\n"


def _same_shape(opdefs: list) -> list[list]:
    """Runs of ops declared by one class with one summary (the scalar ops of each arity)."""
    groups: list[list] = []
    for opdef in opdefs:
        last = groups[-1][0] if groups else None
        if last is not None and (last.cls, last.summary) == (opdef.cls, opdef.summary):
            groups[-1].append(opdef)
        else:
            groups.append([opdef])
    return groups


@dataclass
class Chunk:
    """One `// -----` chunk of the input and what became of it."""

    text: str
    line_offset: int
    output: str = ""
    diagnostics: list[Diagnostic] = field(default_factory=list)
    failed: bool = False


def run_chunk(chunk: Chunk, filename: str, args, passes) -> None:
    """Parse, run the passes, print: the chunk's output, or its error among its diagnostics.
    Remarks are collected when asked for (`--remarks`)."""
    from mind.ir.diagnostics import MindError, diagnostic_handler
    from mind.ir.printer import print_module
    from mind.parser import parse
    from mind.passes.manager import PassManager, resolve_pipeline, stage_of

    progress = Progress()
    listen = diagnostic_handler(chunk.diagnostics.append) if args.remarks else nullcontext()
    try:
        with listen:
            progress.step = "parsing"
            module = parse(chunk.text, filename, chunk.line_offset)
            if passes:
                pipeline = resolve_pipeline(passes, stage_of(module))
                if args.dump_pass_pipeline:
                    sys.stderr.write(
                        f"Pass Manager with {len(pipeline)} passes:\n  "
                        + ",".join(map(str, pipeline))
                        + "\n"
                    )
                progress.manager = PassManager(
                    pipeline,
                    verify="off" if args.no_verify_each else "each",
                    print_after_all=args.print_ir_after_all,
                    print_before_all=args.print_ir_before_all,
                    time_passes=args.time_passes,
                )
                module = progress.manager.run(module)
                progress.manager = None
        progress.step = "printing"
        chunk.output = print_module(module, args.generic)
    except MindError as exc:
        chunk.diagnostics.append(exc.diagnostic)
        chunk.failed = True
    except Exception as exc:  # a bug in mind: one diagnostic, not a traceback
        chunk.diagnostics.append(internal_error("mind-opt", exc, progress.where(), filename))
        chunk.failed = True


def report(chunk: Chunk, filename: str, verify: bool) -> bool:
    """Print the chunk's diagnostics (or, verifying, what differs from its expectations);
    whether it went as it should."""
    from .diagnostics_check import check_expected_diagnostics

    if verify:
        problems = check_expected_diagnostics(
            chunk.text, filename, chunk.line_offset, chunk.diagnostics
        )
        sys.stderr.write(problems)
        return not problems
    for diagnostic in chunk.diagnostics:
        sys.stderr.write(diagnostic.render() + "\n")
    return not chunk.failed


def main(argv: list[str] | None = None) -> int:
    if argv is None and (code := run_on_server("mind-opt")) is not None:
        return code  # a warm server ran it (server.py)
    args = build_parser().parse_args(argv)  # before any import: `--help` answers at once
    if not logs_configured("mind-opt"):
        return 2
    from mind.ir.diagnostics import MindError
    from mind.passes.manager import parse_pipeline

    from .split import split_input

    if args.list_passes:
        sys.stdout.write(list_passes())
        return 0
    if args.list_ops is not None:
        sys.stdout.write(list_ops(args.list_ops))
        return 0
    try:
        specs = [(spec, "--pass") for spec in args.passes]
        specs += [(args.pipeline, "--pipeline")] if args.pipeline else []
        passes = [p for spec, source in specs for p in parse_pipeline(spec, source)]
    except MindError as exc:
        sys.stderr.write(f"mind-opt: {exc.render()}\n")
        return 2
    try:
        text, filename = read_input(args.input)
    except OSError as exc:
        sys.stderr.write(f"mind-opt: cannot read '{args.input}': {exc.strerror}\n")
        return 1
    pieces = split_input(text) if args.split_input_file else [(text, 0)]
    ok, outputs = True, []
    for i, (piece, offset) in enumerate(pieces):
        chunk = Chunk(piece, offset)
        run_chunk(chunk, filename, args, passes)
        outputs.append(chunk.output)
        if args.output == "-":  # each chunk as it comes, its diagnostics beside it
            sys.stdout.write(("// -----\n" if i else "") + chunk.output)
            sys.stdout.flush()
        ok &= report(chunk, filename, args.verify_diagnostics)
    if ok and args.output != "-":  # as mlir-opt: no output file after a failure
        try:
            write_output("// -----\n".join(outputs), args.output)
        except OSError as exc:
            sys.stderr.write(f"mind-opt: cannot write '{args.output}': {exc.strerror}\n")
            return 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
