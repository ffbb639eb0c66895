"""Kernel failures as readable errors: which kernel, its source, and the IR file it came from.

Triton compiles a kernel at its first launch (or interprets it on CPU), so a bad kernel surfaces
as an exception deep inside the generated `call`. The traceback says which launch line of the
generated file was running; the file's own syntax tree says which kernel that line launches."""

from __future__ import annotations

import ast
import functools
import types
from pathlib import Path

from mind.ir.diagnostics import Location, MindError
from triton.errors import TritonError


class KernelError(MindError):
    """A generated kernel failed to compile or run."""


def kernel_sources(tree: ast.Module, lines: list[str]) -> dict[str, str]:
    """Each decorated top-level function (the kernels), with its decorators."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.decorator_list:
            start = min(d.lineno for d in node.decorator_list)
            out[node.name] = "\n".join(lines[start - 1 : node.end_lineno])
    return out


def launch_lines(tree: ast.Module, kernels: set[str]) -> dict[int, str]:
    """Line number -> the kernel launched there (`k[grid](...)` or `k.run(...)`)."""
    out = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        target = node.func.value if isinstance(node.func, ast.Subscript | ast.Attribute) else None
        if isinstance(target, ast.Name) and target.id in kernels:
            out.update(dict.fromkeys(range(node.lineno, node.end_lineno + 1), target.id))
    return out


def failing_kernel(exc: BaseException, path: str, launches: dict[int, str]) -> str | None:
    """The kernel whose launch was running in the generated file when `exc` was raised."""
    found, tb = None, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == path and tb.tb_lineno in launches:
            found = launches[tb.tb_lineno]
        tb = tb.tb_next
    return found


def origin_location(origin: str, kernel: str | None) -> Location | None:
    """Where `kernel` is first named in the IR file `origin`, when that file can be read."""
    try:
        text = Path(origin).read_text()
    except OSError:
        return None
    for number, line in enumerate(text.splitlines(), 1):
        if kernel and kernel in line:
            return Location(origin, number, line.index(kernel) + 1, text)
    return Location(origin, 1, 1, text)


def wrap_call(module: types.ModuleType, origin: str) -> None:
    """Replace `module.call` by one that re-raises kernel failures as `KernelError`."""
    path = module.__file__
    source = Path(path).read_text()
    tree = ast.parse(source, path)
    kernels = kernel_sources(tree, source.splitlines())
    launches = launch_lines(tree, set(kernels))
    call = module.call

    @functools.wraps(call)
    def checked_call(args):
        try:
            return call(args)
        except Exception as exc:
            kernel = failing_kernel(exc, path, launches)
            if kernel is None and not isinstance(exc, TritonError):
                raise
            what = f"kernel '{kernel}'" if kernel else "a kernel"
            message = (
                f"Triton failed on {what} generated from {origin} ({path}):\n"
                f"{type(exc).__name__}: {exc}"
                + (f"\nkernel source:\n{kernels[kernel]}" if kernel else "")
            )
            raise KernelError(message, origin_location(origin, kernel)) from exc

    module.call = checked_call
