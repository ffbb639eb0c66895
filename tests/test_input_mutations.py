"""Inputs a graph overwrites (AOTAutograd's input mutations, which it leaves in the graph as
`copy_` since mind asks as Inductor does): the kernel computing the new values stores them into
the input itself, so no copy follows the call. Batch norm's running statistics are stored by
its statistics kernel; a user's in-place ops on inputs match eager, inputs included."""

from __future__ import annotations

import ast
import copy
import re

import pytest
import torch
from programs import no_fallback

pytestmark = pytest.mark.usefixtures("isolated_runtime")


def compiled(fn, *args, tmp_path, monkeypatch):
    """`fn(*args)` compiled by mind (no fallback allowed), and the modules' source."""
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    with no_fallback():
        out = torch.compile(fn, backend="mind")(*args)
    source = "\n".join(p.read_text() for p in sorted(tmp_path.glob("*.py")))
    return out, source


def outputs(source: str) -> int:
    """How many outputs the (one) compiled graph returns: no new values of the inputs it
    overwrites, which AOTAutograd's wrapper would copy into them."""
    (line,) = [x for x in source.splitlines() if x.startswith("call.output_strides = ")]
    return len(ast.literal_eval(line.split(" = ", 1)[1]))


def test_batch_norm_stores_its_running_stats_in_its_statistics_kernel(tmp_path, monkeypatch):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
    ref = copy.deepcopy(net)
    x = torch.randn(2, 3, 6, 6)
    got, source = compiled(net, x, tmp_path=tmp_path, monkeypatch=monkeypatch)
    got.sum().backward()
    ref(x).sum().backward()
    bn, want = net[1], ref[1]
    torch.testing.assert_close(bn.running_mean, want.running_mean)
    torch.testing.assert_close(bn.running_var, want.running_var)
    assert bn.num_batches_tracked.item() == want.num_batches_tracked.item() == 1
    (forward,) = [p.read_text() for p in tmp_path.glob("graph0_forward.*.py")]
    assert "aten.copy_" not in source
    # the statistics kernel stores into the running mean and variance it reads (pointers 4
    # and 5, after the convolution's output, its bias, which the kernel adds, and the norm's
    # weight and bias), the counter's kernel into the counter
    stats = re.search(r"def triton_per_fused_\w*copy__\w*\(.*?@triton.jit", forward, re.S)[0]
    assert "tl.store(in_ptr4 + (x0)" in stats and "tl.store(in_ptr5 + (x0)" in stats, stats
    counter = forward.split("def triton_poi_fused_add_copy__")[1].split("@triton.jit")[0]
    assert "tl.store(in_ptr0 + " in counter, counter


def _copy_scaled(x, y):
    x.copy_(y * 2)
    return y + 1


def _chained(x, y):
    x.mul_(2).add_(y)
    return (x * 3).sum()


def _read_then_add(x, y):
    z = x * 2
    x.add_(1)
    return z + y


def _returned(x, y):
    return x.mul_(2).add_(y)


def _flip(x):
    x.copy_(x.flip(0))
    return x.sum()


#: name -> (fn, inputs, whether every copy_ runs in mind's kernels)
CASES = {
    "copy_scaled": (_copy_scaled, lambda: (torch.zeros(4, 3), torch.randn(4, 3)), True),
    "copy_into_transposed": (
        _copy_scaled,
        lambda: (torch.zeros(4, 3).t(), torch.randn(3, 4)),
        True,
    ),
    "chained_in_place": (_chained, lambda: (torch.randn(5), torch.randn(5)), True),
    "read_then_add": (_read_then_add, lambda: (torch.randn(3, 4), torch.randn(3, 4)), True),
    # the input, overwritten, is the output too
    "returned": (_returned, lambda: (torch.randn(3, 4), torch.randn(3, 4)), True),
    # the new values read the input elsewhere: they get a buffer, which ATen copies in
    "flip": (_flip, lambda: (torch.randn(6),), False),
}


@pytest.mark.parametrize("name", CASES)
def test_in_place_ops_on_inputs_match_eager(name, tmp_path, monkeypatch):
    fn, make, own = CASES[name]
    args = make()
    ref = [a.clone() for a in args]
    got, source = compiled(fn, *args, tmp_path=tmp_path, monkeypatch=monkeypatch)
    torch.testing.assert_close(got, fn(*ref))
    for a, r in zip(args, ref):
        torch.testing.assert_close(a, r)
    assert ("aten.copy_" not in source) == own
    assert outputs(source) == 1


def test_an_overwritten_input_the_graph_returns_is_returned_itself(tmp_path, monkeypatch):
    """`x.relu_()` returns `x`: the compiled call too (it fell back to eager, the verifier
    refusing a read of the input's new memory)."""
    x = torch.randn(8, 32)
    want = x.clone().relu_()
    got, source = compiled(torch.Tensor.relu_, x, tmp_path=tmp_path, monkeypatch=monkeypatch)
    assert got is x and torch.equal(x, want)
    assert "return (arg0_1,)" in source and "aten.copy_" not in source


def test_batch_norm_under_no_grad_updates_its_running_stats(tmp_path, monkeypatch):
    """An inference graph (no autograd) keeps its input mutations in the graph too."""
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm1d(5)
    ref = copy.deepcopy(bn)
    x = torch.randn(8, 5)
    with torch.no_grad():
        got, source = compiled(bn, x, tmp_path=tmp_path, monkeypatch=monkeypatch)
        torch.testing.assert_close(got, ref(x))
    torch.testing.assert_close(bn.running_mean, ref.running_mean)
    torch.testing.assert_close(bn.running_var, ref.running_var)
    assert "aten.copy_" not in source and outputs(source) == 1
