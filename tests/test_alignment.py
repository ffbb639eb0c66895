"""Which kernel pointers a launch checks for 16-byte alignment (target/bindings.py): what the
call and ATen allocate and the parameters the backend marks `aligned` are taken as aligned;
other inputs and the views ATen returns are checked at each launch. A misaligned pointer must
still give eager's numbers (on the CPU the kernels run in Triton's interpreter, which takes
any pointer; on a GPU a misaligned one takes Triton's JIT path)."""

from __future__ import annotations

import re

import pytest
import torch
from programs import CUDA, no_fallback

pytestmark = pytest.mark.usefixtures("isolated_runtime")
#: where the numbers are checked: on the GPU, misaligned pointers take Triton's JIT path
DEVICES = ["cpu", CUDA]


@pytest.fixture(params=DEVICES)
def device(request) -> str:
    if request.param == "cuda":
        request.getfixturevalue("compiled_for_the_gpu")
    return request.param


class Block(torch.nn.Module):
    """A transformer-like block: a linear (an ATen addmm), GELU, a layer norm, the residual."""

    def __init__(self, width: int = 32):
        super().__init__()
        self.linear = torch.nn.Linear(width, width)
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, x):
        return self.norm(torch.nn.functional.gelu(self.linear(x))) + x


def compiled_source(fn, *args, tmp_path, monkeypatch) -> tuple[object, str]:
    """`fn(*args)` compiled by mind, and the forward module it emitted."""
    monkeypatch.setenv("MIND_DUMP_DIR", str(tmp_path))
    with no_fallback(), torch.no_grad():
        out = torch.compile(fn, backend="mind")(*args)
    (source,) = [p.read_text() for p in tmp_path.glob("*_forward.*.py")]
    return out, source


def checked_arguments(source: str) -> list[list[str]]:
    """For each launch, the arguments its launcher checks (by name, as the call passes them)."""
    checked = {
        name: [int(i) for i in re.findall(r"\d+", positions or "")]
        for name, positions in re.findall(
            r"^(\w+_launch) = bind\(.*?(?:checked=\(([\d, ]*)\))?, num_warps", source, re.M
        )
    }
    launches = re.findall(r"^\s+(\w+_launch)\((.*)\)$", source, re.M)
    found = []
    for name, args in launches:
        values = [a.strip() for a in args.split(",")][4:]  # after the grid and the stream
        found.append([values[i] for i in checked[name]])
    return found


def test_only_the_models_input_is_checked(tmp_path, monkeypatch):
    """Of the kernel's pointers (the addmm's result, the layer norm's weight and bias, the
    input, the output) only the input is checked: it alone may come at any offset."""
    torch.manual_seed(0)
    block, x = Block(), torch.randn(8, 32)
    out, source = compiled_source(block, x, tmp_path=tmp_path, monkeypatch=monkeypatch)
    with torch.no_grad():
        torch.testing.assert_close(out, block(x))
    inputs = re.search(r"def call\(args\):\n\s+(.*) = args", source).group(1).split(", ")
    (x_name,) = [n for n in inputs if re.search(rf"aten_addmm_default\(\w+, {n},", source)]
    assert checked_arguments(source) == [[x_name]]
    assert "aten_addmm_default" in source


def test_a_parameter_at_a_misaligned_offset_is_checked(tmp_path, monkeypatch):
    """A parameter 4 bytes into its storage when compiled is not taken as aligned."""
    torch.manual_seed(0)
    block, x = Block(), torch.randn(8, 32)
    storage = torch.randn(33)
    block.norm.weight = torch.nn.Parameter(storage[1:])
    assert block.norm.weight.storage_offset() == 1
    out, source = compiled_source(block, x, tmp_path=tmp_path, monkeypatch=monkeypatch)
    with torch.no_grad():
        torch.testing.assert_close(out, block(x))
    (checked,) = checked_arguments(source)
    assert len(checked) == 2  # the input and the weight


def test_inputs_at_any_offset_give_eagers_numbers(device):
    """One compiled graph (Dynamo does not guard storage offsets) called with inputs at
    offsets of 0, 4 and 8 bytes."""
    torch.manual_seed(0)
    block = Block().to(device)
    compiled = torch.compile(block, backend="mind")
    storage = torch.randn(2 + 8 * 32, device=device)
    with no_fallback(), torch.no_grad():
        for offset in (0, 1, 2, 0):
            x = storage[offset : offset + 8 * 32].view(8, 32)
            torch.testing.assert_close(compiled(x), block(x))


def diagonal_then_reuse(x, y):
    """An ATen view (the diagonal has no lowering) of a buffer whose last other use comes
    before a buffer of its size is needed: the view keeps its memory."""
    d = torch.diagonal(x + 1)
    c = (y @ y).sin()
    return d.unsqueeze(1) + c @ y


def test_a_view_aten_returns_keeps_its_buffer_and_is_checked(device, tmp_path, monkeypatch):
    x, y = torch.randn(4, 4, device=device), torch.randn(4, 4, device=device)
    out, source = compiled_source(
        diagonal_then_reuse, x, y, tmp_path=tmp_path, monkeypatch=monkeypatch
    )
    torch.testing.assert_close(out, diagonal_then_reuse(x, y))
    view = re.search(r"(\w+) = aten_diagonal_default\(", source).group(1)
    assert any(view in checked for checked in checked_arguments(source))


def test_a_view_at_a_misaligned_offset_gives_eagers_numbers(device):
    """diagonal(x, 1) starts 4 bytes into its buffer."""
    fn = lambda x: torch.diagonal(x * 2, 1).unsqueeze(0) * x[:3, :3]  # noqa: E731
    x = torch.randn(4, 4, device=device)
    with no_fallback():
        torch.testing.assert_close(torch.compile(fn, backend="mind")(x), fn(x))
