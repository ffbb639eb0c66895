"""mind-opt and mind-translate keep mlir-opt's conventions: exit codes, output files, options,
`--version`, empty input, pipelines with errors at their column, each pass's options listed."""

import os
import stat
from pathlib import Path

import pytest
from mind.ir.core import Module
from mind.ir.diagnostics import MindError
from mind.parser import parse
from mind.passes import PASSES, make_pass, parse_pipeline
from mind.tools import ENVIRONMENT, mind_opt, mind_translate

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "lit_tests" / "lower" / "seed.aten"
SCHEDULED = ROOT / "lit_tests" / "triton" / "seed.scheduled"


def run(tool, argv, capsys) -> tuple[int, str, str]:
    try:
        code = tool.main([str(a) for a in argv])
    except SystemExit as exc:  # argparse: --help, --version, usage errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("tool", [mind_opt, mind_translate])
def test_missing_input_is_exit_code_1(tool, tmp_path, capsys):
    code, out, err = run(tool, [tmp_path / "nothere.aten"], capsys)
    assert (code, out) == (1, "")
    assert "cannot read" in err and "No such file or directory" in err


@pytest.mark.parametrize("tool", [mind_opt, mind_translate])
def test_input_that_is_not_utf8_is_a_clean_error_saying_where(tool, tmp_path, capsys):
    path = tmp_path / "latin1.loops"
    path.write_bytes("loops.graph @g() {\n  // café\n}\n".encode("latin-1"))
    code, out, err = run(tool, [path], capsys)
    assert (code, out) == (1, "")
    assert err.endswith(f"cannot read '{path}': not UTF-8 text: byte 0xe9 at 2:9\n")


@pytest.mark.parametrize("tool", [mind_opt, mind_translate])
def test_output_in_a_missing_folder_is_a_clean_error(tool, tmp_path, capsys):
    target = tmp_path / "nodir" / "out"
    code, _, err = run(tool, [SCHEDULED, "-o", target], capsys)
    assert code == 1
    assert (
        err
        == f"{tool.__name__.split('.')[-1].replace('_', '-')}: cannot write '{target}': No such file or directory\n"
    )


@pytest.mark.parametrize("tool", [mind_opt, mind_translate])
def test_output_file_gets_the_umask_mode(tool, tmp_path, capsys):
    old = os.umask(0o027)
    try:
        assert run(tool, [SCHEDULED, "-o", tmp_path / "new"], capsys)[0] == 0
        existing = tmp_path / "existing"
        existing.write_text("")
        existing.chmod(0o604)
        assert run(tool, [SCHEDULED, "-o", existing], capsys)[0] == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o640
    assert stat.S_IMODE(existing.stat().st_mode) == 0o604  # a replaced file keeps its mode


def test_no_output_file_after_a_failure(tmp_path, capsys):
    bad = tmp_path / "bad.aten"
    bad.write_text("aten.graph @f() {\n")
    code, _, _ = run(mind_opt, [bad, "-o", tmp_path / "out"], capsys)
    assert code == 1 and not (tmp_path / "out").exists()


@pytest.mark.parametrize("tool", [mind_opt, mind_translate])
def test_version(tool, capsys):
    code, out, _ = run(tool, ["--version"], capsys)
    assert code == 0
    assert out.startswith(f"{tool.__name__.split('.')[-1].replace('_', '-')} (mind 0.1.0)\n")
    assert "torch " in out and "Python " in out


def test_empty_input_with_a_pass_prints_nothing(tmp_path, capsys):
    empty = tmp_path / "empty.loops"
    empty.write_text("// nothing here\n")
    assert run(mind_opt, [empty, "--pass=fuse"], capsys) == (0, "", "")
    assert run(mind_opt, [empty, "-p", "lower,realize,to-triton"], capsys) == (0, "", "")


def test_space_separated_pass_options():
    (realize,) = parse_pipeline("realize{reads-threshold=2 max-body-ops=7}")
    assert (realize.reads_threshold, realize.max_body_ops) == (2, 7)
    assert parse_pipeline("realize{reads-threshold=2,max-body-ops=7}") == [realize]
    assert str(realize) == "realize{reads-threshold=2 max-body-ops=7}"  # printed as MLIR does
    assert parse_pipeline(str(realize)) == [realize]


@pytest.mark.parametrize(
    "pipeline, column, message",
    [
        ("lower realize", 7, "expected ',' between passes"),
        ("lower,,fuse", 7, "expected a pass name"),
        ("lower,fuse,", 12, "expected a pass name after ','"),
        ("lower,realize{x=1", 14, "unclosed '{'"),
        ("lower,fuse;", 11, "unexpected ';'"),
        ("lower,fusee", 7, "unknown pass 'fusee'"),
        ("lower,realize{nope=1}", 14, "pass 'realize' has no option 'nope'"),
        ("fuse{max-fusion-size=big}", 5, "expects int, got 'big'"),
    ],
)
def test_a_malformed_pipeline_is_reported_at_its_column(pipeline, column, message):
    with pytest.raises(MindError, match=message) as info:
        parse_pipeline(pipeline)
    assert (info.value.loc.line, info.value.loc.col) == (1, column)
    assert info.value.render().endswith(f"\n{pipeline}\n{' ' * (column - 1)}^")


def test_a_pass_checks_its_input_stage():
    aten = parse(SEED.read_text().split("// CHECK")[0], "seed.aten")
    scheduled = parse(SCHEDULED.read_text(), "seed.scheduled")
    with pytest.raises(MindError, match="pass 'lower' runs on aten IR, not scheduled IR"):
        make_pass("lower").run(scheduled)
    with pytest.raises(MindError, match="pass 'fuse' runs on scheduled IR, not aten IR"):
        make_pass("fuse").run(aten)
    with pytest.raises(MindError, match="pass 'to-triton' runs on scheduled IR, not aten IR"):
        make_pass("to-triton").run(aten)
    assert make_pass("to-triton").run(Module([])).ops == []


def test_list_passes_shows_every_option_with_its_default_and_meaning(capsys):
    code, out, _ = run(mind_opt, ["--list-passes"], capsys)
    assert code == 0
    for name, cls in PASSES.items():
        assert f"  {name} " in out
        for f in cls.options():
            assert f.metadata.get("help"), f"option {f.name} of {name} says nothing"
            option, meaning = f"{f.name.replace('_', '-')}=", f.metadata["help"]
            lines = [x for x in out.splitlines() if option in x and meaning in x]
            assert lines and str(f.default).lower() in lines[0], f"{name}: {f.name}"


def test_readme_documents_every_option_and_environment_variable():
    readme = (ROOT / "README.md").read_text()
    for cls in PASSES.values():
        for f in cls.options():
            assert f"`{f.name.replace('_', '-')}`" in readme, f"{cls.name}: {f.name}"
    for variable in ENVIRONMENT:
        assert f"`{variable}" in readme, variable


def test_every_environment_variable_the_code_reads_is_listed():
    import re

    folders = ["ir", "dialects", "parser", "analysis", "codegen", "target", "passes"]
    folders += ["interpreters", "runtime", "mind", "tools"]
    read = {
        m.group(1)
        for folder in folders
        for path in (ROOT / folder).rglob("*.py")
        for m in re.finditer(r"environ(?:\.get)?[(\[]\"(MIND_[A-Z_]+)\"", path.read_text())
    }
    assert read and read <= set(ENVIRONMENT), read - set(ENVIRONMENT)


def test_help_lists_the_environment(capsys):
    code, out, _ = run(mind_opt, ["--help"], capsys)
    assert code == 0
    assert all(variable in out for variable in ENVIRONMENT)


@pytest.mark.parametrize("tool", [mind_opt, mind_translate])
def test_a_bad_mind_logs_is_a_usage_error(tool, monkeypatch, capsys):
    monkeypatch.setenv("MIND_LOGS", "passes,pases")
    code, out, err = run(tool, [SCHEDULED], capsys)
    assert (code, out) == (2, "")
    assert "MIND_LOGS: unknown channel 'pases' (channels: all, passes, fusion" in err


def test_dir_lists_what_mind_exports():
    import mind

    assert {"capture", "parse", "Module", "MindError", "set_logs"} <= set(dir(mind))
