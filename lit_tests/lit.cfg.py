# lit configuration: `RUN: mind-opt %s ... | filecheck %s`, one folder per dialect and pass.
import importlib.util
import os
import sys

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
