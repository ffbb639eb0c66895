"""Kernel failures as readable errors: which kernel, its source, and the IR file it came from.

A kernel compiles when its module loads (it is bound then) and runs inside the generated `call`
(or is interpreted there, on CPU), so a bad kernel surfaces as an exception from deep inside
either. The traceback says which line of the generated file was running; the file's own syntax
tree says which kernel that line binds or launches."""

from __future__ import annotations

import ast
import functools
import types
from pathlib import Path

from mind.ir.diagnostics import Location, MindError
from triton.errors import TritonError


class KernelError(MindError):
    """A generated kernel failed to compile or run."""


class CheckFailed(KernelError):
    """A kernel's check of its inputs failed: the checks eager makes (an index in bounds, an
    integer divisor not zero), asserted in the kernel as Inductor's CPU kernels assert them. The
    kernel is sound: these inputs make eager raise, and eager says how."""


def failed_check(exc: BaseException) -> bool:
    """Whether `exc` comes from a `tl.device_assert` that failed in Triton's interpreter (an
    AssertionError raised by its `create_assert`). On a GPU a failed assert is no exception to
    recover from: it ends the process's CUDA context."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, AssertionError):
            tb = seen.__traceback__
            while tb is not None and tb.tb_next is not None:
                tb = tb.tb_next
            return tb is not None and tb.tb_frame.f_code.co_name == "create_assert"
        seen = seen.__cause__ or seen.__context__
    return False


def kernel_sources(tree: ast.Module, lines: list[str]) -> dict[str, str]:
    """Each decorated top-level function (the kernels), with its decorators."""
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.decorator_list:
            start = min(d.lineno for d in node.decorator_list)
            out[node.name] = "\n".join(lines[start - 1 : node.end_lineno])
    return out


def launch_lines(tree: ast.Module, kernels: set[str]) -> dict[int, str]:
    """Line number -> the kernel bound or launched there: `x = bind(k, ...)` (where it
    compiles), a launch of its launcher `x(...)`, or `k[grid](...)` / `k.run(...)`."""
    out, launchers = {}, {}
    for node in tree.body:
        value = node.value if isinstance(node, ast.Assign) else None
        if isinstance(value, ast.Call) and value.args and isinstance(value.args[0], ast.Name):
            if value.args[0].id in kernels and isinstance(node.targets[0], ast.Name):
                launchers[node.targets[0].id] = value.args[0].id
                out.update(dict.fromkeys(range(node.lineno, node.end_lineno + 1), value.args[0].id))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        target = node.func.value if isinstance(node.func, ast.Subscript | ast.Attribute) else None
        name = target.id if isinstance(target, ast.Name) and target.id in kernels else None
        if isinstance(node.func, ast.Name) and node.func.id in launchers:
            name = launchers[node.func.id]
        if name is not None:
            out.update(dict.fromkeys(range(node.lineno, node.end_lineno + 1), name))
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


class GeneratedSource:
    """A generated module's file, parsed once a failure needs it (a large graph's module takes
    longer to parse than to load): its kernels' sources and where each one is bound and
    launched, to name the kernel behind a failure."""

    def __init__(self, source: str, path: str, origin: str):
        self.source, self.path, self.origin = source, path, origin

    @functools.cached_property
    def _tree(self) -> ast.Module:
        return ast.parse(self.source, self.path)

    @functools.cached_property
    def kernels(self) -> dict[str, str]:
        return kernel_sources(self._tree, self.source.splitlines())

    @functools.cached_property
    def launches(self) -> dict[int, str]:
        return launch_lines(self._tree, set(self.kernels))

    def error(self, exc: BaseException, kernel: str | None = None) -> KernelError | None:
        """`exc` as a KernelError naming its kernel (`kernel`, or the one whose line in the
        generated file was running), or None when no kernel is to blame."""
        kernel = kernel or failing_kernel(exc, self.path, self.launches)
        if kernel is None and not isinstance(exc, TritonError):
            return None
        what = f"kernel '{kernel}'" if kernel else "a kernel"
        message = (
            f"Triton failed on {what} generated from {self.origin} ({self.path}):\n"
            f"{type(exc).__name__}: {exc}"
            + (f"\nkernel source:\n{self.kernels[kernel]}" if kernel else "")
        )
        error = CheckFailed if failed_check(exc) else KernelError
        return error(message, origin_location(self.origin, kernel))


def wrap_call(module: types.ModuleType, source: GeneratedSource) -> None:
    """Replace `module.call` by one that re-raises kernel failures as `KernelError`."""
    call = module.call

    @functools.wraps(call)
    def checked_call(args):
        try:
            return call(args)
        except KernelError:  # (a kernel that failed to compile: named already)
            raise
        except Exception as exc:
            error = source.error(exc)
            if error is None:
                raise
            raise error from exc

    module.call = checked_call
