"""A warm start for mind-opt and mind-translate. Starting one costs seconds before it does
anything (torch, Dynamo, sympy); a test suite runs them hundreds of times. The server imports
what a tool's run imports once, then forks a child for each run that a tool started with
`MIND_TOOL_SERVER=<socket>` hands it: the child takes the tool's arguments, working directory,
umask, environment and standard streams, runs the tool and sends back its exit status.

Each child is the server's state right after its imports, as a new process would be after its
own: no run sees another's. Imports read the environment, so the server runs only tools whose
environment is its own, but for the variables it is told may differ (`--per-run-env`); it
refuses any other, and the tool runs in its own process as it would without a server.

    python -m mind.tools.server /tmp/mind.sock &    # until the process that started it ends
    MIND_TOOL_SERVER=/tmp/mind.sock mind-opt input.aten --pass=lower
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import socket
import struct
import sys
import traceback
from array import array

#: the tools a server runs, by program name
TOOLS = {"mind-opt": "mind.tools.mind_opt", "mind-translate": "mind.tools.mind_translate"}
#: what a tool's run may import, loaded before the first run: torch and Dynamo (a FakeTensorMode
#: imports it when made: the aten verifier, lowering), what sympy's first sum imports, the parser
#: and printer, every dialect and pass, the lowering tables, the emitter
WARM = (
    "torch",
    "torch._dynamo",
    "sympy.tensor.tensor",
    *TOOLS.values(),
    "mind.parser",
    "mind.ir.printer",
    "mind.passes",
    "mind.passes.lowerings",
    "mind.target.triton",
)
_HEADER = struct.Struct("!Q")  # the length of the request's JSON
_STREAMS = (0, 1, 2)


def run_on_server(tool: str) -> int | None:
    """Run this process's tool (its `sys.argv`) on the server `MIND_TOOL_SERVER` names: the run's
    exit status, or None where there is no server or it refuses (then run here)."""
    path = os.environ.get("MIND_TOOL_SERVER")
    if not path:
        return None
    umask = os.umask(0)
    os.umask(umask)
    state = {"cwd": os.getcwd(), "umask": umask, "env": dict(os.environ)}
    request = json.dumps({"tool": tool, "argv": sys.argv[1:], **state}).encode()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(path)
            fds = array("i", _STREAMS)
            conn.sendmsg(
                [_HEADER.pack(len(request))], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)]
            )
            conn.sendall(request)
            reply = _read_all(conn)  # to the end: the child has exited, its output is written
    except OSError:
        return None  # no server (any more): nothing ran
    if reply == b"refused":
        return None
    if not reply.startswith(b"exit "):
        sys.stderr.write(f"{tool}: the tool server's run of it ended without an exit status\n")
        return 1
    return int(reply[len(b"exit ") :])


def _read_all(conn: socket.socket) -> bytes:
    parts = []
    while part := conn.recv(4096):
        parts.append(part)
    return b"".join(parts)


def serve(path: str, per_run_env: set[str]) -> None:
    """Listen on `path`, import what the tools import, then fork a child for each request until
    the process that started the server ends."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)  # before the imports: a tool started meanwhile waits for them
    listener.listen(64)
    listener.settimeout(1.0)
    parent = os.getppid()
    baseline = _without(dict(os.environ), per_run_env)
    try:
        _warm()
        while os.getppid() == parent:
            _reap()
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            if os.fork() == 0:
                listener.close()
                _child(conn, baseline, per_run_env)
            conn.close()
    finally:
        listener.close()
        os.unlink(path)


def _warm() -> None:
    """Import what the tools import and build the parser, once for every child."""
    for module in WARM:
        importlib.import_module(module)
    from mind.parser import prepare

    prepare()
    gc.freeze()  # a child's collections skip what it inherits: no copy of every page it holds


def _reap() -> None:
    """Collect the children that have exited (their exit status went to their tools)."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def _child(conn: socket.socket, baseline: dict, per_run_env: set[str]) -> None:
    """Take on the tool's process state, run it, reply; never returns."""
    code = 1
    try:
        conn.settimeout(None)
        request, fds = _receive(conn)
        if _without(request["env"], per_run_env) != baseline:
            conn.sendall(b"refused")
            os._exit(0)
        for name in per_run_env:  # the rest is the server's: what its imports set too
            if name in request["env"]:
                os.environ[name] = request["env"][name]
            else:
                os.environ.pop(name, None)
        os.chdir(request["cwd"])
        os.umask(request["umask"])
        for stream, fd in zip(_STREAMS, fds):
            os.dup2(fd, stream)
            os.close(fd)
        sys.stdout.reconfigure(line_buffering=os.isatty(1))  # as a new process would buffer it
        sys.argv = [request["tool"], *request["argv"]]
        code = _run(request["tool"], request["argv"])
        _exit_functions()
        conn.sendall(f"exit {code}".encode())
    finally:
        os._exit(code)


def _receive(conn: socket.socket) -> tuple[dict, list[int]]:
    """The request and the tool's standard streams, as file descriptors of this process."""
    fds = array("i")
    header, ancillary, _, _ = conn.recvmsg(
        _HEADER.size, socket.CMSG_SPACE(len(_STREAMS) * fds.itemsize)
    )
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    (size,) = _HEADER.unpack(header)
    body = b""
    while len(body) < size:
        part = conn.recv(size - len(body))
        if not part:
            raise ConnectionError("the tool left before its request was read")
        body += part
    return json.loads(body), list(fds)


def _run(tool: str, argv: list[str]) -> int:
    """The tool's exit status, as `sys.exit(main())` in a new process gives it."""
    try:
        return _status(importlib.import_module(TOOLS[tool]).main(argv))
    except SystemExit as exc:
        return _status(exc.code)
    except BaseException:
        traceback.print_exc()
        return 1


def _status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    sys.stderr.write(f"{code}\n")
    return 1


def _exit_functions() -> None:
    """What an interpreter does as it exits: its exit functions, then flush its streams."""
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()


def _without(env: dict, names: set[str]) -> dict:
    return {k: v for k, v in env.items() if k not in names}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python -m mind.tools.server", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("socket", help="the path of the Unix socket to listen on")
    p.add_argument(
        "--per-run-env",
        action="append",
        default=[],
        metavar="NAME",
        help="a variable the tools' environments may set otherwise than the server's (one that "
        "no import reads; repeatable)",
    )
    args = p.parse_args(argv)
    serve(args.socket, set(args.per_run_env))


if __name__ == "__main__":
    main()
