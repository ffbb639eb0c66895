"""The rewrite layer of the core: use lists kept by every change, clone with a value map,
replace-all-uses, erase; and declared ops' named accessors and builders."""

import gc
import weakref

import pytest
from mind.dialects.loops import Load, Yield
from mind.ir import dtypes as dt
from mind.ir.core import Block, Operation, Region, Value, edits
from mind.ir.diagnostics import MindError
from mind.ir.symbols import sym
from mind.ir.types import ScalarType, TensorType

import mind

GRAPH = """\
loops.graph @f(%a: f32[4][1]cpu, %m: b8[4][1]cpu) {
  %x = loops.pointwise : f32[4][1]cpu {
    %0 = loops.load(%m, p0) : b8
    %1 = loops.load(%a, p0) {mask = %0, other = 0.0} : f32
    %2 = loops.neg(%1) : f32
    loops.yield(%2)
  }
  loops.output(%x, %x)
}
"""


def parts():
    graph = mind.parse(GRAPH).ops[0]
    node, output = graph.body.ops
    return graph, node, output, node.body.ops


def test_users_follow_args_and_attrs():
    graph, node, output, (mask, load, neg, yield_) = parts()
    a, m = graph.body.args
    assert list(a.users) == [load] and list(m.users) == [mask]
    assert list(mask.result.users) == [load]  # through the `mask` attribute
    assert list(node.result.users) == [output]  # once, though it is used twice
    load.mask = neg.result
    assert not mask.result.users and set(neg.result.users) == {load, yield_}
    load.del_attr("mask")
    assert list(neg.result.users) == [yield_] and load.mask is None


def test_accessors_read_and_write_fields():
    _, _, output, (mask, load, neg, _) = parts()
    assert (load.source.name, load.index, load.other) == ("a", sym("p0"), 0.0)
    load.index = sym("p0") + 1
    assert load.args[1] == sym("p0") + 1
    assert output.values == (output.args[0], output.args[1])
    with pytest.raises(TypeError):
        load.args[0] = None  # args is a tuple: changes go through the op
    with pytest.raises(TypeError):
        load.attrs["other"] = 2.0


def test_replace_all_uses_and_erase():
    graph, node, output, (mask, load, neg, yield_) = parts()
    a = graph.body.args[0]
    neg.result.replace_all_uses_with(load.result)
    assert yield_.value is load.result and not neg.result.users
    neg.erase()
    assert neg not in node.body.ops and neg not in load.result.users
    mind.ir.verify(mind.Module([graph]))
    assert a.users  # the load still reads %a


def test_erase_ops_erases_many_at_once():
    graph, node, output, (mask, load, neg, yield_) = parts()
    a, m = graph.body.args
    yield_.value = load.result
    load.del_attr("mask")
    node.body.erase_ops([neg, mask])
    assert node.body.ops == [load, yield_] and neg.parent is None and mask.parent is None
    assert not m.users and list(load.result.users) == [yield_] and list(a.users) == [load]
    graph.body.erase_ops([output, node])  # a region's ops go with their op
    assert graph.body.ops == [] and not a.users


def test_replace_uses_renames_in_place():
    graph, node, output, _ = parts()
    x, y = node.result, Value("y", node.result.type)
    output.set_attr("strides", [[1], x])
    x.replace_all_uses_with(y)
    assert output.args == (y, y) and output.attrs["strides"] == [[1], y]
    assert output.operands == (y, y, y) and not x.users and list(y.users) == [output]


def test_clone_maps_operands_results_and_regions():
    graph, node, output, _ = parts()
    a, m = graph.body.args
    b = Value("b", a.type)
    vmap = {a: b}
    copy = node.clone(vmap)
    load = copy.body.ops[1]
    assert load.source is b and load.mask is copy.body.ops[0].result
    assert vmap[node.result] is copy.result and copy.result is not node.result
    assert load in b.users and load not in a.users
    renamed = node.body.ops[2].clone({}, "scheduled.neg")
    assert renamed.name == "scheduled.neg" and type(renamed).__name__ == "Unary"


def test_build_names_fields_and_checks_them():
    src = Value("a", TensorType(dt.f32, (4,), (1,)))
    load = Load.build(
        "loops.load", source=src, index=sym("p0"), mask=None, results=[ScalarType(dt.f32)]
    )
    assert load.args == (src, sym("p0")) and "mask" not in load.attrs
    assert isinstance(Operation("loops.load", [src, 0]), Load)  # built as the declared class
    with pytest.raises(TypeError, match="needs 'index'"):
        Load.build("loops.load", source=src)
    with pytest.raises(TypeError, match="no field"):
        Yield.build("loops.yield", value=src, bogus=1)
    node = Operation("loops.pointwise", regions=[Region(Block())])
    assert node.body is node.regions[0].block


@pytest.fixture
def no_collector():
    """Only reference counting frees anything: what the cyclic collector would free stays."""
    gc.collect()
    gc.disable()
    yield
    gc.enable()


@pytest.mark.usefixtures("no_collector")
@pytest.mark.parametrize("how", ["erase", "erase_ops", "replace_by"])
def test_an_erased_op_is_freed_at_once(how):
    """Erasing takes the op, its results and its body apart: no cycle is left for the
    collector, whose full collections scan the whole process."""
    graph, node, output, body = parts()
    gone = [weakref.ref(x) for x in (node, *body, node.body, node.regions[0])]
    output.erase()
    if how == "erase":
        node.erase()
    elif how == "erase_ops":
        graph.body.erase_ops([node])
    else:
        node.replace_by([graph.body.args[0]])
    del node, output, body
    assert [r() for r in gone] == [None] * len(gone)


@pytest.mark.usefixtures("no_collector")
def test_the_pass_manager_frees_the_modules_it_made_not_the_callers():
    from mind.passes import run_pipeline

    made = []
    module = mind.parse(GRAPH)
    final = run_pipeline(
        module,
        "realize,inline,schedule,to-triton",
        on_pass=lambda p, m: made.append((p.name, [weakref.ref(op) for op in m.walk()])),
    )
    mind.ir.verify(module)  # changed in place by realize and inline, and whole
    alive = {name: [r() is not None for r in refs] for name, refs in made}
    assert not any(alive["schedule"]) and all(alive["to-triton"]) and all(alive["inline"])
    assert final.ops


TWINS = """\
loops.graph @f(%a: f32[4][1]cpu, %m: b8[4][1]cpu) {
  %x = loops.pointwise : f32[4][1]cpu {
    %0 = loops.load(%a, p0) : f32
    %1 = loops.neg(%0) : f32
    loops.yield(%1)
  }
  %y = loops.pointwise : f32[4][1]cpu {
    %t = loops.load(%a, p0) : f32
    %u = loops.neg(%t) : f32
    loops.yield(%u)
  }
  %z = loops.pointwise : f32[4][1]cpu {
    %0 = loops.load(%a, p0) : f32
    %1 = loops.neg(%0) : f32
    loops.yield(%0)
  }
  %w = loops.pointwise : f32[4][1]cpu {
    %0 = loops.load(%m, p0) : b8
    %1 = loops.load(%a, p0) {mask = %0, other = 0.0} : f32
    loops.yield(%1)
  }
  %v = loops.pointwise : f32[4][1]cpu {
    %0 = loops.load(%m, p0) : b8
    %1 = loops.load(%a, p0) {mask = %0, other = 1.0} : f32
    loops.yield(%1)
  }
  loops.output(%x, %y, %z, %w, %v)
}
"""


def test_bodies_that_print_alike_but_for_value_names_have_one_key():
    """`body_key`: the names of a body's own values do not count, what they are and where they
    are used does (an attribute holding one too); values from outside stand for themselves."""
    from mind.ir.attributes import body_key

    x, y, z, w, v, _ = mind.parse(TWINS).ops[0].body.ops
    keys = [body_key(op.body) for op in (x, y, z, w, v)]
    assert keys[0] == keys[1]
    assert len(set(keys)) == 4
    assert body_key(w.body) == body_key(w.clone({}).body)


def _retype(op):
    op.result.type = ScalarType(dt.f64)


@pytest.mark.parametrize(
    "change",
    [
        lambda graph, node, load, neg: setattr(load, "index", sym("p0") + 1),
        lambda graph, node, load, neg: setattr(load, "other", 1.0),
        lambda graph, node, load, neg: load.del_attr("mask"),
        lambda graph, node, load, neg: load.result.replace_all_uses_with(neg.result),
        lambda graph, node, load, neg: neg.erase(),
        lambda graph, node, load, neg: node.body.insert_before(neg, neg.clone()),
        lambda graph, node, load, neg: node.body.reorder(node.body.ops[:2][::-1]),
        lambda graph, node, load, neg: _retype(neg),
        lambda graph, node, load, neg: setattr(neg.result, "name", "renamed"),
        lambda graph, node, load, neg: setattr(graph, "symbol", "g"),
        lambda graph, node, load, neg: setattr(node.regions[0], "block", Block()),
        lambda graph, node, load, neg: graph.body.add_arg(Value("b", graph.body.args[0].type)),
    ],
)
def test_every_change_is_an_edit(change):
    """What changes the IR counts as an edit (the pass manager skips verifying after a pass
    that made none); reading, printing and verifying do not."""
    module = mind.parse(GRAPH)
    graph = module.ops[0]
    node = graph.body.ops[0]
    _, load, neg, _ = node.body.ops
    start = edits()
    str(module), list(module.walk()), mind.ir.verify(module)
    assert edits() == start
    change(graph, node, load, neg)
    assert edits() > start


def test_the_pass_manager_verifies_after_a_pass_only_if_it_edited(monkeypatch):
    """A pass that changed nothing leaves the IR as verified after the pass before: not verified
    again; a pass that only retypes a value is."""
    from mind.passes import manager

    class Idle(manager.GraphPass):
        name, input, output = "idle", "loops", "loops"

        def run_graph(self, graph):
            return None

    class Retype(Idle):
        name = "retype"

        def run_graph(self, graph):
            _retype(graph.body.ops[0].body.ops[2])  # neg: f32 -> f64, not its operand's type

    verified = []
    monkeypatch.setattr(manager, "verify", lambda module: verified.append(module))
    module = mind.parse(GRAPH)
    manager.PassManager([Idle(), Idle(), Idle()]).run(module)
    assert verified == [module]
    monkeypatch.undo()
    with pytest.raises(MindError, match="f64"):
        manager.PassManager([Idle(), Retype()]).run(module)


def test_stage_verification_checks_what_each_stage_ends_with(monkeypatch):
    """`verify="stages"` (the backend's) verifies the IR a conversion reads and the result, not
    each pass: a pass that breaks the IR mid-stage is still caught before the stage is left."""
    from mind.passes import manager

    class Edit(manager.GraphPass):
        name, input, output = "edit", "loops", "loops"

        def run_graph(self, graph):
            graph.symbol = graph.symbol  # an edit: each pass's result is new to the verifier

    class Convert(Edit):
        name, output = "convert", "scheduled"

    verified = []
    monkeypatch.setattr(manager, "verify", verified.append)
    passes = [Edit(), Edit(), Convert(), Edit()]
    stages = manager.PassManager(passes, verify="stages")
    assert [i for i in range(4) if stages._verifies_after(i)] == [1, 3]  # before convert; last
    module = mind.parse(GRAPH)
    manager.PassManager(passes[:2], verify="stages").run(module)
    assert verified == [module]  # once, after the second pass: the first's result is not
    monkeypatch.undo()

    class Retype(Edit):
        name = "retype"

        def run_graph(self, graph):
            _retype(graph.body.ops[0].body.ops[2])

    with pytest.raises(MindError, match="f64"):
        manager.PassManager([Retype(), Edit()], verify="stages").run(mind.parse(GRAPH))
    modes = ("each", "stages", "off")
    assert [manager.PassManager(passes, verify=v)._verifies_after(0) for v in modes] == [
        True,
        False,
        False,
    ]
