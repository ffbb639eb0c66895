# lit configuration: `RUN: mind-opt %s ... | filecheck %s`, one folder per dialect and pass.
import atexit
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile

import lit.formats

config.name = "mind"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".fx", ".aten", ".loops", ".scheduled", ".triton", ".py", ".mlir"]
config.excludes = ["lit.cfg.py", "Inputs", "Output"]
config.test_source_root = os.path.dirname(__file__)
config.environment["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")
config.environment["PYTHONIOENCODING"] = "utf-8"
for var in ("HOME", "TMPDIR", "TRITON_INTERPRET", "PYTHONPATH"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
config.substitutions.append(("%python", sys.executable))
config.substitutions.append(("%mind-opt", f"{sys.executable} -m mind.tools.mind_opt"))
# FileCheck on the interpreter lit runs on, without a launcher script (a pyenv shim costs more
# than the check itself), when that interpreter has it.
if importlib.util.find_spec("filecheck") is not None:
    config.substitutions.append((r"\bfilecheck\b", f"{sys.executable} -m filecheck"))


def start_tool_server() -> None:
    """A warm server for mind-opt and mind-translate (tools/server.py), for as long as lit runs:
    each RUN line's tool forks from one process that imported torch and Dynamo, instead of
    importing them itself (3 s). `lit --param tool-server=0` runs each in its own process."""
    folder = tempfile.mkdtemp(prefix="mind-lit-")
    path = os.path.join(folder, "tools.sock")
    if "LIT_PRESERVES_TMP" not in os.environ:
        # lit points the tests' temporary folder at one it makes after reading this file, too late
        # for the server's environment (imports read TMPDIR): make it here, removed at exit as lit's
        os.environ["LIT_PRESERVES_TMP"] = "1"
        tmp = os.path.join(folder, "tmp")
        os.mkdir(tmp)
        config.environment.update({k: tmp for k in ("TMP", "TMPDIR", "TEMP", "TEMPDIR")})
    config.environment["MIND_TOOL_SERVER"] = path
    server = subprocess.Popen(
        [sys.executable, "-m", "mind.tools.server", path, "--per-run-env", "LIT_CURRENT_TESTCASE"],
        env=config.environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
    )
    owner = os.getpid()  # not lit's workers, should they run exit functions

    def stop() -> None:
        if os.getpid() == owner:
            server.terminate()
            server.wait()
            shutil.rmtree(folder, ignore_errors=True)

    atexit.register(stop)


if lit_config.params.get("tool-server", "1") != "0":
    start_tool_server()
