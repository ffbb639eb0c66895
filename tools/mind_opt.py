"""mind-opt: parse, run passes, print. Like mlir-opt, a thin driver over the pass registry.

Exit codes: 0 success, 1 an error in the input (parse, verify, pass) or an internal error (a bug
in mind, reported as one diagnostic naming the pass), 2 bad command-line usage.
"""

from __future__ import annotations

import argparse
import sys

from .internal import Progress, internal_error
from .textio import read_input, write_output


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="mind-opt", description="Run mind passes on IR text.")
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
    p.add_argument("-p", "--pipeline", default=None, help="a pipeline string: a,b{opt=1}")
    p.add_argument("--split-input-file", action="store_true", help="split the input on '// -----'")
    p.add_argument(
        "--verify-diagnostics",
        action="store_true",
        help="check errors against expected-error@+N {{...}} comments",
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
    return p


def list_passes() -> str:
    from mind.passes import PASSES

    lines = ["Available passes:"]
    for name, cls in sorted(PASSES.items()):
        lines.append(f"  {name:<13} {cls.input + ' -> ' + cls.output:<24} {cls.summary}")
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


def run_chunk(
    text: str, filename: str, line_offset: int, args, passes, progress: Progress | None = None
) -> str:
    from mind.ir.printer import print_module
    from mind.parser import parse
    from mind.passes.manager import PassManager, resolve_pipeline, stage_of

    progress = progress or Progress()
    progress.step = "parsing"
    module = parse(text, filename, line_offset)
    progress.step = "printing"
    if not passes:
        return print_module(module, args.generic)
    pipeline = resolve_pipeline(passes, stage_of(module))
    if args.dump_pass_pipeline:
        sys.stderr.write(
            "Pass Manager with "
            + str(len(pipeline))
            + " passes:\n  "
            + ",".join(map(str, pipeline))
            + "\n"
        )
    manager = PassManager(
        pipeline,
        verify_each=not args.no_verify_each,
        print_after_all=args.print_ir_after_all,
        print_before_all=args.print_ir_before_all,
        time_passes=args.time_passes,
    )
    progress.manager = manager
    module = manager.run(module)
    progress.manager, progress.step = None, "printing"
    return print_module(module, args.generic)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)  # before any import: `--help` answers at once
    from mind.ir.diagnostics import MindError
    from mind.passes.manager import parse_pipeline

    from .diagnostics_check import check_expected_diagnostics
    from .split import split_input

    if args.list_passes:
        sys.stdout.write(list_passes())
        return 0
    if args.list_ops is not None:
        sys.stdout.write(list_ops(args.list_ops))
        return 0
    try:
        specs = [*args.passes, *([args.pipeline] if args.pipeline else [])]
        passes = [p for spec in specs for p in parse_pipeline(spec)]
    except MindError as exc:
        sys.stderr.write(f"mind-opt: {exc.render()}\n")
        return 2
    try:
        text, filename = read_input(args.input)
    except OSError as exc:
        sys.stderr.write(f"mind-opt: cannot read '{args.input}': {exc.strerror}\n")
        return 2
    chunks = split_input(text) if args.split_input_file else [(text, 0)]
    outputs, failed = [], False
    for chunk, offset in chunks:
        progress = Progress()
        try:
            if args.verify_diagnostics:
                ok, report = check_expected_diagnostics(
                    chunk,
                    filename,
                    offset,
                    lambda c, o, p=progress: run_chunk(c, filename, o, args, passes, p),
                )
                failed |= not ok
                sys.stderr.write(report)
                continue
            outputs.append(run_chunk(chunk, filename, offset, args, passes, progress))
        except MindError as exc:
            sys.stderr.write(exc.render() + "\n")
            failed = True
        except Exception as exc:  # a bug in mind: one diagnostic, not a traceback
            sys.stderr.write(internal_error("mind-opt", exc, progress.where(), filename) + "\n")
            failed = True
    if failed:
        return 1
    try:
        write_output("// -----\n".join(outputs), args.output)
    except Exception as exc:
        sys.stderr.write(internal_error("mind-opt", exc, "writing the output", filename) + "\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
