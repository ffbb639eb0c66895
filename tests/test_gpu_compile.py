"""Kernels as a GPU compiles them, on this CPU: Triton's front end and ptxas run without a GPU,
here for an H100 (sm_90). Triton's interpreter, which runs the other tests' kernels, runs Python
the compiler rejects: `triton_helpers.floordiv` returned early for floats, and the compiler went
on to the integer code after the `if`, so a float floor division failed to compile on a GPU
(the graph fell back to eager) and passed every CPU test. So every scalar op of the loop
bodies compiles here in each dtype the verifier lets it take (dialects/scalar_ops.py)."""

from __future__ import annotations

import pytest
from mind.dialects.scalar_ops import SCALAR_OPS, TAKES
from mind.ir import dtypes as dt
from mind.runtime.compile_pool import exec_source
from mind.runtime.launch import deferred
from mind.tools.mind_translate import translate
from triton.backends.compiler import GPUTarget

from mind.options import Options, pipeline_of

H100 = GPUTarget("cuda", 90, 32)
DTYPES = [dt.f16, dt.bf16, dt.f32, dt.f64, dt.i8, dt.i16, dt.i32, dt.i64, dt.u8, dt.b8]
N = 128


def ops_taking(dtype: dt.DType) -> list[str]:
    """The scalar ops whose operands may be of `dtype` (what the verifier allows)."""
    return [
        name
        for name, spec in SCALAR_OPS.items()
        if TAKES[spec.takes] is None or dtype in TAKES[spec.takes]
    ]


def graph_of_every_op(dtype: dt.DType) -> str:
    """A loops graph on cuda:0 with one pointwise node per op over operands of `dtype`."""
    t = f"[{N}][1]cuda:0"
    nodes, outputs = [], []
    for i, name in enumerate(ops_taking(dtype)):
        spec = SCALAR_OPS[name]
        result = (spec.result or dtype).name
        operands = ["%c", "%a", "%b"] if name == "where" else ["%a", "%b"][: spec.arity]
        nodes.append(
            f"  %buf{i} = loops.pointwise : {result}{t} {{\n"
            f"    %a = loops.load(%arg0, p0) : {dtype.name}\n"
            f"    %b = loops.load(%arg1, p0) : {dtype.name}\n"
            f"    %c = loops.load(%arg2, p0) : b8\n"
            f"    %r = loops.{name}({', '.join(operands)}) : {result}\n"
            f"    loops.yield(%r)\n  }}"
        )
        outputs.append(f"%buf{i}")
    args = f"%arg0: {dtype.name}{t}, %arg1: {dtype.name}{t}, %arg2: b8{t}"
    strides = ", ".join("[1]" for _ in outputs)
    return (
        f"loops.graph @every_op({args}) {{\n"
        + "\n".join(nodes)
        + f"\n  loops.output({', '.join(outputs)}) {{strides = [{strides}]}}\n}}\n"
    )


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_scalar_op_compiles_for_the_gpu(dtype, tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    text = graph_of_every_op(dtype)
    after_lowering = pipeline_of(Options(), False).partition("lower,")[2]  # the input is loops
    source = translate(text, "every_op.loops", after_lowering)
    path = tmp_path / "every_op.py"
    path.write_text(source)
    with deferred() as bindings:
        exec_source(source, str(path), {"__name__": "every_op"})
    assert bindings
    for binding in bindings:
        binding.precompile(H100)  # raises Triton's CompilationError, naming the line


def test_the_graphs_hold_what_each_dtype_takes():
    """The check is only as good as its op lists."""
    assert "floordiv" in ops_taking(dt.f32) and "floordiv" in ops_taking(dt.i64)
    assert "sin" in ops_taking(dt.f64) and "sin" not in ops_taking(dt.bf16)
    assert "bitwise_and" in ops_taking(dt.b8) and "logical_and" not in ops_taking(dt.i32)
