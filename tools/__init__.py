"""Command-line tools: mind-opt and mind-translate, and what they share."""

from __future__ import annotations

import argparse
import os
import platform
import sys

#: every environment variable mind reads, and what it does (the tools' --help and the README)
ENVIRONMENT = {
    "MIND_LOGS": "channels to log to stderr: passes,fusion,output_code,cache,launch,cudagraphs "
    "or all (TORCH_LOGS=mind and TORCH_LOGS=+mind work too)",
    "MIND_DUMP_DIR": "write every stage of every compiled graph here, numbered in pipeline order, "
    "with a picture of its scheduled graph (.dot, and .svg where Graphviz is installed)",
    "MIND_PIPELINE": "the backend's passes from aten IR to triton IR (a bad one is an error)",
    "MIND_CACHE_DIR": "the module and graph caches, and the reproducers of graphs that fell back "
    "(default ~/.cache/mind)",
    "MIND_COMPILE_WORKERS": "processes compiling Triton kernels (default: one per CPU but one, at "
    "most 32; 0 or 1 compiles in the loading process)",
    "MIND_STATIC_LAUNCHER": "0: launch kernels through Triton's launcher, not torch's C++ one "
    "(Inductor's static CUDA launcher, the default)",
    "MIND_TRACEBACK": "mind-opt and mind-translate print an internal error (a bug in mind) with "
    "its Python traceback; a MindFallbackWarning ends with the traceback of what failed",
    "MIND_TOOL_SERVER": "the socket of a warm server (python -m mind.tools.server) that runs "
    "mind-opt and mind-translate without their seconds of imports",
}


def environment_help() -> str:
    width = max(map(len, ENVIRONMENT))
    return "environment:\n" + "".join(
        f"  {name:<{width}}  {meaning}\n" for name, meaning in ENVIRONMENT.items()
    )


def logs_configured(prog: str) -> bool:
    """Whether `MIND_LOGS` names known channels (else the tool says so: a usage error)."""
    try:
        from mind.ir import logs

        logs.parse_channels(os.environ.get("MIND_LOGS", ""))
    except ValueError as exc:
        sys.stderr.write(f"{prog}: error: {exc}\n")
        return False
    return True


#: the packages a bug report wants the versions of (read from their metadata, not imported)
_PACKAGES = ("torch", "triton", "lark", "sympy")


def version_text(prog: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    def of(package: str) -> str:
        try:
            return version(package)
        except PackageNotFoundError:
            return "not installed"

    uses = ", ".join(f"{p} {of(p)}" for p in _PACKAGES)
    return f"{prog} (mind {of('mind')})\n  {uses}, Python {platform.python_version()}\n"


class VersionAction(argparse.Action):
    """`--version`: mind's version and its dependencies', looked up only when asked."""

    def __init__(self, option_strings, dest, **kwargs):
        kwargs.update(nargs=0, default=argparse.SUPPRESS)
        super().__init__(option_strings, dest, help="print the versions and exit", **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        sys.stdout.write(version_text(parser.prog))
        parser.exit()
