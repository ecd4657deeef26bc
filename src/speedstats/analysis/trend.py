"""Trend plots from the history file: one PNG per case, time per iteration over commits.

x is the runs in history order, labelled by short commit sha; y is the median time per iteration,
one line per framework, with the middle half of the rounds (quartiles) shaded when a run had several:
the quartiles, not the extremes, so that one disturbed round does not flatten the plot. Only runs on the
same device and GPU as the newest run are drawn: times from another GPU would read as a jump.
matplotlib is imported here, inside the functions, and only its Agg canvas is used (no pyplot, no
display); it is part of the benchmark environment, not the light one. A change point of a framework's
series (analysis.changepoints) is a dashed line in its colour between the last run before it and the first
after, with the shift written beside it.
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from speedstats.analysis.changepoints import case_series
from speedstats.analysis.stats import spread
from speedstats.casekinds import case_kind
from speedstats.contenders import HEAD, LABELS, PYTORCH, SPEED_STATS_ROLES
from speedstats.errors import UserError
from speedstats.fsutil import write_atomic
from speedstats.text import one_line

FRAMEWORK_STYLE = {
    HEAD: {"label": LABELS[HEAD], "color": "#1f77b4"},
    PYTORCH: {"label": LABELS[PYTORCH], "color": "#ee4c2c"},
}
FIGURE_SIZE = (8.0, 4.5)  # inches
DPI = 100


@dataclass
class TrendPlot:
    case_id: str
    path: Path
    runs: int  # runs drawn (x positions)
    figure: object  # matplotlib.figure.Figure, for callers that inspect what was drawn
    # (framework, x position of the first run after the change point, after/before) of each one marked
    changes: list = field(default_factory=list)


def _load_matplotlib():
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise UserError(
            "matplotlib: not installed; 'speedstats trend' needs it (pip install matplotlib, "
            "or run it in the benchmark environment)"
        ) from None
    return Figure, FigureCanvasAgg


def same_machine(entries):
    """The entries run on the newest entry's device and GPU, and how many others were left out."""
    if not entries:
        return [], 0
    newest = entries[-1].results
    kept = [e for e in entries if (e.results.device, e.results.gpu_name) == (newest.device, newest.gpu_name)]
    return kept, len(entries) - len(kept)


def case_ids(entries):
    """Cases of the newest run in its order, then those only older runs have, as first seen."""
    newest = [c.id for c in entries[-1].results.cases] if entries else []
    older = []
    for entry in entries:
        for case in entry.results.cases:
            if case.id not in newest and case.id not in older:
                older.append(case.id)
    return newest + older


def _points(entries, case_id):
    """Per framework: (median, q1, q3 of the rounds) per run in seconds, NaN where the run has no figure."""
    nan = float("nan")
    series = {name: [] for name in SPEED_STATS_ROLES}
    kind = None
    for entry in entries:
        case = next((c for c in entry.results.cases if c.id == case_id), None)
        if case is not None:
            kind = kind or case.kind
        for name in SPEED_STATS_ROLES:
            fw = case.frameworks.get(name) if case is not None and not case.error else None
            if fw is None or not fw.ok:
                series[name].append((nan, nan, nan))
            else:
                middle = spread(fw.rounds_s or [fw.per_iter_s])
                series[name].append((fw.per_iter_s, middle.q1, middle.q3))
    return kind, series


def memory_points(entries, case_id):
    """Per framework: its sampled peak memory in MiB per run (results' sampled_peak_bytes), NaN where the
    run has none (older runs)."""
    series = {name: [] for name in SPEED_STATS_ROLES}
    for entry in entries:
        case = next((c for c in entry.results.cases if c.id == case_id), None)
        for name in SPEED_STATS_ROLES:
            fw = case.frameworks.get(name) if case is not None and not case.error else None
            peak = fw.sampled_peak_bytes if fw is not None and fw.ok else None
            series[name].append(peak / 2**20 if peak else float("nan"))
    return series


def plot_case(entries, case_id, path):
    """Draw one case's trend over entries into the PNG at path, its peak memory below the times when a
    run has it; returns the TrendPlot."""
    Figure, FigureCanvasAgg = _load_matplotlib()
    kind, series = _points(entries, case_id)
    known = case_kind(kind)
    scale, unit = (known.scale, known.unit) if known is not None else (1.0, "s")
    memory = memory_points(entries, case_id)
    with_memory = any(not math.isnan(v) for values in memory.values() for v in values)
    width, height = FIGURE_SIZE
    figure = Figure(figsize=(width, height * 1.6) if with_memory else FIGURE_SIZE, dpi=DPI)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot(2 if with_memory else 1, 1, 1)
    xs = list(range(len(entries)))
    for name in SPEED_STATS_ROLES:
        style = FRAMEWORK_STYLE[name]
        medians = [p[0] * scale for p in series[name]]
        lows = [p[1] * scale for p in series[name]]
        highs = [p[2] * scale for p in series[name]]
        if any(lo != hi for lo, hi in zip(lows, highs) if not math.isnan(lo)):
            axes.fill_between(xs, lows, highs, color=style["color"], alpha=0.15, linewidth=0)
        axes.plot(xs, medians, marker="o", linewidth=2, color=style["color"], label=style["label"])
    changes = mark_change_points(axes, entries, case_id)
    crowded = len(entries) > 8
    axes.set_xticks(xs)
    # parse_math=False: a `$` in a GPU name, case id or label is text, not the start of mathtext
    axes.set_xticklabels([one_line(e.label, 40) for e in entries], rotation=45 if crowded else 0,
                         ha="right" if crowded else "center", fontsize=8, parse_math=False)
    axes.set_xlim(-0.5, max(len(entries) - 0.5, 0.5))
    axes.set_ylim(bottom=0)
    axes.set_xlabel("commit")
    axes.set_ylabel(f"time per iteration ({unit})")
    newest = entries[-1].results
    axes.set_title(one_line(f"{case_id} on {newest.gpu_name} ({newest.device})", 120), parse_math=False)
    axes.grid(True, alpha=0.3)
    axes.legend(loc="best")
    if with_memory:
        below = figure.add_subplot(2, 1, 2, sharex=axes)
        for name in SPEED_STATS_ROLES:
            style = FRAMEWORK_STYLE[name]
            below.plot(xs, memory[name], marker="o", linewidth=2, color=style["color"], label=style["label"])
        below.set_ylim(bottom=0)
        below.set_xlabel("commit")
        below.set_ylabel("peak memory (MiB)")
        below.grid(True, alpha=0.3)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    write_atomic(path, buffer.getvalue())
    return TrendPlot(case_id=case_id, path=Path(path), runs=len(entries), figure=figure, changes=changes)


def mark_change_points(axes, entries, case_id):
    """A dashed line in the framework's colour before the first run after each change point of its series,
    the shift written at the top; returns [(framework, that run's x, after/before)]."""
    changes = []
    for name in SPEED_STATS_ROLES:
        series = case_series(entries, case_id, name)
        for point in series.change_points():
            x = series.positions[point.index]
            colour = FRAMEWORK_STYLE[name]["color"]
            axes.axvline(x - 0.5, color=colour, linestyle="--", linewidth=1.2, alpha=0.9)
            axes.annotate(f"{point.change * 100:+.1f}%", xy=(x - 0.5, 1.0),
                          xycoords=("data", "axes fraction"), xytext=(3, -3), textcoords="offset points",
                          ha="left", va="top", fontsize=8, color=colour)
            changes.append((name, x, point.ratio))
    return changes


def file_name(case_id):
    return re.sub(r"[^A-Za-z0-9._-]", "_", case_id) + ".png"


def draw_trends(entries, out_dir, cases=None, last=None):
    """One PNG per case in out_dir; returns (plots, runs left out because of another machine)."""
    entries, other_machine = same_machine(entries)
    if last is not None:
        entries = entries[-last:]
    if not entries:
        return [], other_machine
    wanted = case_ids(entries)
    if cases:
        unknown = [c for c in cases if c not in wanted]
        if unknown:
            raise UserError(f"--case: no run in the history has case {unknown[0]!r}")
        wanted = [c for c in wanted if c in cases]
    out_dir = Path(out_dir)
    return [plot_case(entries, case_id, out_dir / file_name(case_id)) for case_id in wanted], other_machine
