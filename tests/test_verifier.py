"""The verifier: every message the core and the loops, scheduled and triton dialects can raise is
exercised, by a `lit_tests/*/invalid.*` chunk or, for errors only a pass can make, here."""

import ast
import re
from dataclasses import replace
from pathlib import Path

import pytest
from mind.ir.core import Module, Operation
from mind.ir.registry import VerifyError
from mind.ir.verifier import verify

import mind

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [
    "ir/verifier.py",
    "dialects/common.py",
    "dialects/scalar_ops.py",
    "dialects/loops.py",
    "dialects/scheduled.py",
    "dialects/triton.py",
]
_EXPECTED = re.compile(r"expected-error(?:@[+-]\d+)?\s*\{\{(.*?)\}\}")
#: messages no text can trigger (the parser refuses such input first): tested below
FROM_PASSES_ONLY = {"unknown operation '*'", "'*' uses '%*' before it is defined"}


def _template(node: ast.expr) -> str:
    """A message with `*` for each formatted part."""
    if isinstance(node, ast.Constant):
        return str(node.value)
    if isinstance(node, ast.JoinedStr):
        return "".join(_template(v) if isinstance(v, ast.Constant) else "*" for v in node.values)
    if isinstance(node, ast.BinOp):
        return _template(node.left) + _template(node.right)
    return "*"


def verifier_messages() -> set[str]:
    found = set()
    for path in SOURCES:
        for node in ast.walk(ast.parse((ROOT / path).read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "VerifyError":
                found.add(_template(node.args[0]))
    return found


def expected_messages() -> list[str]:
    texts = [p.read_text() for p in ROOT.glob("lit_tests/*/invalid.*")]
    return [m for text in texts for m in _EXPECTED.findall(text)]


@pytest.mark.parametrize("template", sorted(verifier_messages() - FROM_PASSES_ONLY))
def test_every_verifier_message_has_an_invalid_test(template):
    pattern = ".*?".join(re.escape(part) for part in template.split("*"))
    assert any(re.fullmatch(pattern, e) for e in expected_messages()), template


LOOPS = """\
loops.graph @f(%a: f32[4][1]cpu) {
  %x = loops.pointwise : f32[4][1]cpu {
    %0 = loops.load(%a, p0) : f32
    %1 = loops.neg(%0) : f32
    loops.yield(%1)
  }
  loops.output(%x)
}
"""


def test_use_before_definition():
    module = mind.parse(LOOPS)
    body = module.ops[0].body.ops[0].body
    body.reorder([body.ops[1], body.ops[0], body.ops[2]])
    with pytest.raises(VerifyError, match=r"'loops.neg' uses '%0' before it is defined"):
        verify(module)


TWO_NODES = LOOPS.replace(
    "  loops.output(%x)",
    """\
  %y = loops.pointwise : f32[4][1]cpu {
    %0 = loops.load(%x, p0) : f32
    %1 = loops.neg(%0) : f32
    loops.yield(%1)
  }
  loops.output(%y)""",
)


def test_a_bodys_values_are_not_visible_after_it():
    """A region's values are visible in it only: not in the next node's body."""
    module = mind.parse(TWO_NODES)
    verify(module)
    first, second, _ = module.ops[0].body.ops
    second.body.ops[1].set_arg(0, first.body.ops[0].result)
    with pytest.raises(VerifyError, match=r"'loops.neg' uses '%0' before it is defined"):
        verify(module)


def test_unknown_operation():
    with pytest.raises(VerifyError, match="unknown operation 'loops.bogus'"):
        verify(Module([Operation("loops.bogus")]))


def test_erased_producer_leaves_its_users_dangling():
    module = mind.parse(LOOPS)
    load = module.ops[0].body.ops[0].body.ops[0]
    load.erase()
    with pytest.raises(VerifyError, match="uses '%0' before it is defined"):
        verify(module)


ATEN_ADDS = """aten.graph @g(%x: f32[4, 8][8, 1]cpu, %y: f32[4, 8][8, 1]cpu) {
  %a = aten.add.Tensor(%x, %y) : f32[4, 8][8, 1]cpu
  %b = aten.add.Tensor(%a, %y) : f32[4, 8][8, 1]cpu
  %c = aten.add.Tensor(%b, %x) {alpha = 2} : f32[4, 8][8, 1]cpu
  aten.output(%c)
}"""


def test_an_aten_op_runs_on_fake_tensors_once_per_signature(monkeypatch):
    """Ops alike in name, argument types, attributes and result types (a model's repeated
    layers) are checked against torch once; another signature, or a wrong result type, is
    checked anew."""
    from mind.dialects import aten

    runs = []
    run_on_fake = aten._run_on_fake
    monkeypatch.setattr(aten, "_run_on_fake", lambda op: runs.append(op.name) or run_on_fake(op))
    monkeypatch.setattr(aten, "_CONFIRMED", set())
    verify(mind.parse(ATEN_ADDS))
    assert runs == ["aten.add.Tensor", "aten.add.Tensor"]  # %b is %a's signature; %c has alpha
    verify(mind.parse(ATEN_ADDS))
    assert len(runs) == 2
    wrong = ATEN_ADDS.replace("%b, %x) {alpha = 2} : f32[4, 8]", "%b, %x) {alpha = 2} : f32[8, 4]")
    with pytest.raises(VerifyError, match="computes f32\\[4, 8\\] but '%c' is declared"):
        verify(mind.parse(wrong))


def test_an_aten_op_is_typed_on_its_declared_device():
    """torch's meta function of a CPU embedding bag leaves offset2bag empty (the CUDA one fills
    it): the verifier runs the op on fake tensors of the declared device, not on 'meta'."""
    bag = """aten.graph @g(%i: i64[8][1]{dev}, %w: f32[10, 4][4, 1]{dev}, %o: i64[2][1]{dev}) {{
  %r, %offset2bag, %size, %max = aten._embedding_bag_forward_only.default(%w, %i, %o) : f32[2, 4][4, 1]{dev}, i64[{n}][1]{dev}, i64[2][1]{dev}, i64[{m}][1]{dev}
  aten.output(%r)
}}"""
    verify(mind.parse(bag.format(dev="cpu", n=0, m=2)))
    verify(mind.parse(bag.format(dev="cuda:0", n=8, m=0)))
    with pytest.raises(VerifyError, match=r"computes i64\[0\] but '%offset2bag' is declared"):
        verify(mind.parse(bag.format(dev="cpu", n=8, m=2)))


def test_an_imported_aten_graph_is_confirmed_by_torchs_trace(monkeypatch):
    """An op imported from a traced graph is typed by torch's fake run of it (its node's
    `val`): verifying the import runs none again; an op whose types a pass changes is run."""
    import torch
    from mind.dialects import aten
    from torch.fx.experimental.proxy_tensor import make_fx

    runs = []
    run_on_fake = aten._run_on_fake
    monkeypatch.setattr(aten, "_run_on_fake", lambda op: runs.append(op.name) or run_on_fake(op))
    monkeypatch.setattr(aten, "_CONFIRMED", set())
    gm = make_fx(lambda x, y: ((x + y).relu().sum(0),))(torch.ones(4, 8), torch.ones(4, 8))
    module = Module([aten.import_graph(gm, "g")])
    verify(module)
    assert runs == []
    relu = next(op for op in module.ops[0].body.ops if op.name == "aten.relu.default")
    relu.results[0].type = replace(relu.results[0].type, shape=(8, 4), strides=(4, 1))
    with pytest.raises(VerifyError, match=r"computes f32\[4, 8\] but '%relu' is declared"):
        verify(module)
    assert runs == ["aten.relu.default"]


def test_only_torchs_own_checks_refuse_an_aten_ops_arguments():
    """A failed `torch._check` in an op's meta function is torch refusing the arguments; a
    plain RuntimeError from elsewhere (as older torch's fake tensors refuse fused attention's
    `meta` philox seed beside CUDA tensors, which the real kernel takes) says nothing."""
    import torch
    from mind.dialects.aten import _rejection

    def raised(fn) -> Exception:
        try:
            fn()
        except Exception as exc:  # what the verifier catches
            return exc
        raise AssertionError("nothing raised")

    def device_mismatch():
        raise RuntimeError("Unhandled FakeTensor Device Propagation: cuda:0 and meta")

    assert _rejection(raised(lambda: torch._check(False, lambda: "Sizes of tensors must match")))
    assert _rejection(raised(lambda: torch.ones(2).sum(3)))  # IndexError: a dim out of range
    assert not _rejection(raised(device_mismatch))
    assert not _rejection(raised(lambda: torch.ones(2, device="meta").item()))
