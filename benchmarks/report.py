"""The results as a Markdown table (stdout) and as JSON (the same numbers, plus tracebacks)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

Cell = dict[str, object]
Row = dict[str, object]


def _num(value: object, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _ms(cell: Cell) -> str:
    if cell.get("ms") is not None:
        return format(cell["ms"], ".3f")
    return "ERR" if cell.get("error") else "-"


def _gbps(cell: Cell) -> str:
    if cell.get("gbps") is None:
        return "-"
    return f"{cell['gbps']:.0f} ({100 * cell['copy_frac']:.0f}%)"


def _ok(cell: Cell) -> str:
    """A fallback to eager is flagged even when its numbers are right: they are eager's."""
    check = {True: "ok", False: "FAIL"}.get(cell.get("ok"), "ERR" if cell.get("error") else "-")
    return f"{check} (eager fallback)" if cell.get("fallback") else check


def _size(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


# Per-backend columns: header suffix, which backends have it, how a cell prints.
PER_BACKEND: tuple[tuple[str, bool, Callable[[Cell], str]], ...] = (
    ("ms", True, _ms),
    ("GB/s (% copy)", True, _gbps),
    ("kernels", True, lambda c: _num(c.get("kernels"), "d")),
    ("compile s", False, lambda c: _num(c.get("compile_s"), ".1f")),
    ("check", False, _ok),
)


def markdown(rows: list[Row], backends: list[str], meta: dict[str, object]) -> str:
    """One row per case; ratio is mind ms / Inductor ms (below 1: mind is faster)."""
    compiled = [b for b in backends if b != "eager"]
    headers = ["case", "dtype", "bytes moved"]
    getters: list[Callable[[Row], str]] = [
        lambda r: str(r["name"]),
        lambda r: str(r["dtype"]),
        lambda r: _size(r["bytes"]),
    ]
    for suffix, eager_too, show in PER_BACKEND:
        for b in backends if eager_too else compiled:
            headers.append(f"{b} {suffix}")
            getters.append(lambda r, b=b, show=show: show(r["cells"].get(b, {})))
        if suffix == "ms" and {"mind", "inductor"} <= set(backends):
            headers.append("mind/inductor")
            getters.append(lambda r: _num(r.get("mind_over_inductor"), ".2f"))
    lines = [
        f"device: {meta['device_name']} | copy bandwidth: {meta['copy_gbps']:.0f} GB/s"
        f" | timing: {meta['timing']}",
        *_counter_warning(meta),
        "",
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
    ]
    lines += ["| " + " | ".join(g(r) for g in getters) + " |" for r in rows]
    lines += _notes(rows)
    return "\n".join(lines)


def _counter_warning(meta: dict[str, object]) -> list[str]:
    check = meta.get("kernel_counter_check") or {}
    return (
        [f"WARNING: kernel counter self-check failed ({check}); kernel counts are suspect"]
        if check.get("ok") is False
        else []
    )


def _notes(rows: list[Row]) -> list[str]:
    """Compute rates of compute-bound cases and every failed cell's reason, below the table."""
    notes = []
    for r in rows:
        for b, cell in r["cells"].items():
            if cell.get("tflops") is not None:
                notes.append(f"- {r['name']} / {b}: {cell['tflops']:.3g} TFLOP/s")
            if cell.get("error") or cell.get("ok") is False:
                notes.append(f"- {r['name']} / {b}: {cell.get('error') or cell.get('why')}")
            notes += [f"- {r['name']} / {b}: {m}" for m in cell.get("fallback", ())]
    return ["", *notes] if notes else []


def write_json(path: str, rows: list[Row], meta: dict[str, object]) -> None:
    Path(path).write_text(json.dumps({"meta": meta, "cases": rows}, indent=2, default=str) + "\n")
