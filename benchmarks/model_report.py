"""The model benchmark's results: Markdown (a speedup table, then every row), JSON (the same
numbers and tracebacks, logs, absolute errors) and a bar chart of the speedups (PNG)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.common import DEADLINE_REACHED
from benchmarks.plot import Bar, Chart

Row = dict[str, object]
Meta = dict[str, object]
FIELDS = ("model", "dtype", "mode", "backend")


def group(row: Row) -> tuple[str, str, str]:
    """Rows of one group share an eager baseline."""
    return row["model"], row["dtype"], row["mode"]


def ordered(rows: list[Row], meta: Meta) -> list[Row]:
    """Rows in the order of the run's lists (models, then dtypes, modes, backends), each with its
    speedup: eager wall ms of its group over its own."""
    place = {f: {name: i for i, name in enumerate(meta[f"{f}s"])} for f in FIELDS}
    rows = sorted(rows, key=lambda r: tuple(place[f].get(r[f], len(place[f])) for f in FIELDS))
    eager = {group(r): r.get("wall_ms") for r in rows if r["backend"] == "eager"}
    for r in rows:
        base, own = eager.get(group(r)), r.get("wall_ms")
        r["speedup"] = base / own if base and own else None
    return rows


def _num(value: object, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def check_text(row: Row) -> str:
    if row.get("error"):
        return "ERR"
    check = {True: "ok", False: "FAIL"}.get(row.get("ok"), "-")
    return f"{check} (fallback)" if row.get("fallback") else check


def _speedup(row: Row | None) -> str:
    """A pivot cell: the speedup, flagged when its numbers are not (all) the backend's own."""
    if row is None:
        return ""
    if row.get("error"):
        return "ERR"
    flag = " (FAIL)" if row.get("ok") is False else " (fallback)" if row.get("fallback") else ""
    return _num(row.get("speedup"), ".2f") + flag


def _compiled_here(counts: dict | None) -> str:
    """The kernels the loading process compiled itself during a first call, of those mind
    compiled ("3 of 17"; its compile workers compiled the others); "-" where mind compiled none
    (a kernel bound from its launch record is not compiled)."""
    compiled = counts["here"] + counts["workers"] if counts else 0
    return f"{counts['here']} of {compiled}" if compiled else "-"


COLUMNS = (
    ("model", lambda r: r["model"]),
    ("dtype", lambda r: r["dtype"]),
    ("mode", lambda r: r["mode"]),
    ("backend", lambda r: r["backend"]),
    ("wall ms", lambda r: _num(r.get("wall_ms"), ".3f")),
    ("GPU ms", lambda r: _num(r.get("gpu_ms"), ".3f")),
    ("host ms", lambda r: _num(r.get("host_ms"), ".3f")),
    ("kernels", lambda r: _num(r.get("kernels"), "d")),
    ("peak MiB", lambda r: _num(r.get("peak_mib"), ".0f")),
    ("reserved MiB", lambda r: _num(r.get("reserved_mib"), ".0f")),
    ("first call s", lambda r: _num(r.get("first_s"), ".1f")),
    ("kernels compiled here", lambda r: _compiled_here(r.get("first_compiles"))),
    ("out err", lambda r: _num(r.get("out_rel"), ".1e")),
    ("grad err", lambda r: _num(r.get("grad_rel"), ".1e")),
    ("out ratio", lambda r: _num(r.get("out_ratio"), ".2g")),
    ("grad ratio", lambda r: _num(r.get("grad_ratio"), ".2g")),
    ("check", check_text),
    ("speedup", lambda r: _num(r.get("speedup"), ".2f")),
)


def _table(headers: list[str], body: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(headers) + " |",
        "|" + "|".join("---" for _ in headers) + "|",
        *("| " + " | ".join(cells) + " |" for cells in body),
    ]


def markdown(rows: list[Row], meta: Meta) -> str:
    rows = ordered(rows, meta)
    compiled = [b for b in meta["backends"] if b != "eager"]
    by_key = {(*group(r), r["backend"]): r for r in rows}
    groups = list(dict.fromkeys(group(r) for r in rows))
    pivot = [
        [*g, _num((by_key.get((*g, "eager")) or {}).get("wall_ms"), ".3f")]
        + [_speedup(by_key.get((*g, b))) for b in compiled]
        for g in groups
    ]
    versions = " | ".join(f"{k} {v}" for k, v in meta["versions"].items())
    lines = [
        "# Models: eager vs Inductor vs mind",
        "",
        f"{meta['device_name']} | {versions} | jobs {meta['jobs']}"
        + (f" | {meta['total_s']:.0f} s" if meta.get("total_s") else ""),
        *(f"\n**WARNING**: {w}" for w in meta.get("warnings", ())),
        "",
        "## Speedup over eager (eager wall ms / backend wall ms)",
        "",
        *_table(["model", "dtype", "mode", "eager wall ms", *compiled], pivot),
        "",
        "## Every row",
        "",
        *_table([c for c, _ in COLUMNS], [[show(r) for _, show in COLUMNS] for r in rows]),
        *_notes(rows),
        "",
        "## Models",
        "",
        *(f"- {name}: {m['what']}; {_size(m['size'])}" for name, m in meta["sizes"].items()),
        "",
        "## How it was measured",
        "",
        *(f"- {n}" for n in meta["notes"]),
    ]
    return "\n".join(lines) + "\n"


def _size(size: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in size.items())


def _notes(rows: list[Row]) -> list[str]:
    """Every error, failed check, fallback, graph break and call that CUDA graphs did not
    replay, below the table."""
    notes = []
    for r in rows:
        name = " ".join(str(r[f]) for f in FIELDS)
        if r.get("error"):
            notes.append(f"- {name}: {r['error']}")
        if r.get("ok") is False:
            notes.append(f"- {name}: FAIL: {r['why']}")
        notes += [f"- {name}: fallback: {m}" for m in r.get("fallback", ())]
        if r.get("graph_breaks"):
            notes.append(f"- {name}: {r['graph_breaks']} graph break(s), {r['graphs']} graphs")
        if any(k.startswith("unrecorded") for k in r.get("cudagraphs", {})):
            counts = ", ".join(f"{k} {n}" for k, n in r["cudagraphs"].items())
            notes.append(f"- {name}: CUDA graphs: {counts}")
    return ["", *notes] if notes else []


def write_json(path: str, rows: list[Row], meta: Meta) -> None:
    data = {"meta": meta, "rows": ordered(rows, meta)}
    Path(path).write_text(json.dumps(data, indent=2, default=str) + "\n")


def read_json(paths: list[str]) -> tuple[list[Row], Meta]:
    """The rows of one or more runs (say, inference and training run separately) and the first
    run's settings, its lists and sizes extended by the others'. A later run's row replaces an
    earlier one of the same model, dtype, mode and backend, unless the deadline stopped it: rows
    measured again (after a fix) update a table."""
    runs = [json.loads(Path(p).read_text()) for p in paths]
    meta = dict(runs[0]["meta"])
    for other in runs[1:]:
        for f in FIELDS:
            meta[f"{f}s"] = list(dict.fromkeys([*meta[f"{f}s"], *other["meta"][f"{f}s"]]))
        meta["sizes"] = {**meta["sizes"], **other["meta"]["sizes"]}
        meta["total_s"] = (meta.get("total_s") or 0) + (other["meta"].get("total_s") or 0)
    rows: dict[tuple, Row] = {}
    for r in (r for run in runs for r in run["rows"]):
        key = tuple(r[f] for f in FIELDS)
        if key not in rows or not str(r.get("error", "")).endswith(DEADLINE_REACHED):
            rows[key] = r
    return list(rows.values()), meta


def chart(rows: list[Row], meta: Meta) -> Chart:
    """Grouped bars: one group per model, dtype and mode, one bar per compiled backend, its
    height the speedup over eager (the dashed line); a row without one is marked ERR, a bar whose
    check failed or whose backend fell back to eager is hatched."""
    rows = ordered(rows, meta)
    compiled = [b for b in meta["backends"] if b != "eager"]
    by_key = {(*group(r), r["backend"]): r for r in rows}
    groups = list(dict.fromkeys(group(r) for r in rows))

    def bar(cell: Row | None) -> Bar | None:
        if cell is None:
            return None
        hatch = "xx" if cell.get("ok") is False else "//" if cell.get("fallback") else ""
        return Bar(cell.get("speedup"), hatch)

    return Chart(
        title=f"Models on {meta['device_name']} (hatched: xx check failed, // some graph ran eagerly)",
        ylabel="speedup over eager (wall time)",
        groups=[f"{m}\n{d} {mode}" for m, d, mode in groups],
        series={b: [bar(by_key.get((*g, b))) for g in groups] for b in compiled},
    )
