"""The benchmarks' ratios as PNG bar charts (matplotlib, in the `bench` extra: optional, a run
without it says so and writes everything else)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field


@dataclass
class Bar:
    """One bar: its height (None: no number, marked ERR) and how it is hatched (a failed check,
    a fallback)."""

    value: float | None
    hatch: str = ""


@dataclass
class Chart:
    """Groups of bars, one bar per series in each group, and a dashed line at `baseline`."""

    title: str
    ylabel: str
    groups: list[str]
    series: dict[str, list[Bar | None]] = field(default_factory=dict)  # None: no bar there
    baseline: float | None = 1.0


def save(path: str, chart: Chart) -> None:
    """Draw `chart` into the PNG file `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    count = max(1, len(chart.series))
    width = 0.8 / count
    per_group = max(0.8, 0.25 * count)  # inches: room for the bars and the label
    fig, ax = plt.subplots(figsize=(max(6.0, per_group * len(chart.groups) + 1.5), 4.5))
    for j, (name, bars) in enumerate(chart.series.items()):
        xs = [i + (j - (count - 1) / 2) * width for i in range(len(chart.groups))]
        drawn = ax.bar(xs, [(b.value if b else None) or 0.0 for b in bars], width, label=name)
        for rect, x, b in zip(drawn, xs, bars):
            if b is not None and b.value is None:
                ax.text(x, 0.05, "ERR", rotation=90, ha="center", va="bottom", fontsize=7)
            elif b is not None:
                rect.set_hatch(b.hatch)
    if chart.baseline is not None:
        ax.axhline(chart.baseline, color="black", linewidth=0.8, linestyle="--")
    slanted = max(map(len, chart.groups), default=0) > 12  # long names would overlap
    ax.set_xticks(
        range(len(chart.groups)),
        chart.groups,
        fontsize=8,
        rotation=30 if slanted else 0,
        ha="right" if slanted else "center",
    )
    ax.set_ylabel(chart.ylabel)
    ax.set_title(chart.title)
    ax.legend(ncol=count, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def save_or_say(path: str | None, chart: Chart) -> None:
    """`save`, or one line on stderr where matplotlib is missing."""
    if not path:
        return
    try:
        save(path, chart)
    except ImportError as e:
        print(f"no plot: {e} (pip install -e '.[bench]')", file=sys.stderr)
