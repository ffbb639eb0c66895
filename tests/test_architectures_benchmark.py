"""The architecture sweep's harness (`python3 -m benchmarks.architectures`): a row builds a model
of the catalog, compiles it, and judges it by the model benchmark's fp64 check. The rows need
transformers (the `bench` extra): where it is absent only the command line is tested."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # `benchmarks` is a plain folder at the repository root

from test_models_benchmark import scaled_backend  # noqa: E402

from benchmarks import architectures  # noqa: E402
from benchmarks.model_row import MULTIPLIER  # noqa: E402


@pytest.fixture(autouse=True)
def isolated(isolated_runtime):
    """Private caches: each row compiles."""


needs_transformers = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None,
    reason="transformers is not installed (the bench extra)",
)


@needs_transformers
def test_a_training_step_of_a_catalog_model_passes_under_mind():
    """BERT's pooler, which the loss does not reach, has no gradient in eager and zeros under
    AOTAutograd: those are not a mismatch."""
    row = architectures.run_row("bert", "train", "cpu", "fp32")
    assert row["status"] == "pass", row
    assert 0 < row["ratio"] <= MULTIPLIER and row["seconds"] > 0


@needs_transformers
def test_a_resize_checks_the_second_size_too():
    """A backend right at the first size and wrong at the second (its second graph, Dynamo's
    recompile with sizes symbolic) is a mismatch."""
    compiles = []

    def second_wrong(gm, example_inputs):
        compiles.append(gm)
        factor = 1.0 if len(compiles) == 1 else 1.01
        return scaled_backend(forward=factor)(gm, example_inputs)

    row = architectures.run_row("gpt2", "resize", "cpu", "fp32", backend=second_wrong)
    assert len(compiles) == 2
    assert row["status"] == "mismatch" and "output: RMS error against fp64" in row["why"], row


def test_unknown_architectures_and_modes_are_rejected(capsys):
    for argv in (["--only", "gpt2,nosuchnet"], ["--modes", "infer,fly"]):
        with pytest.raises(SystemExit):
            architectures.parse_args(argv)
    err = capsys.readouterr().err
    assert "unknown nosuchnet; choose from bert," in err and "unknown fly" in err
