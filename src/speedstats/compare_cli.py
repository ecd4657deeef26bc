"""`speedstats compare` (head against a base run), `speedstats trend` (plots from the history) and
`speedstats changes` (the change points of the history)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from speedstats.analysis import stats
from speedstats.analysis.changepoints import DEFAULT_MIN_CHANGE
from speedstats.contenders import SPEED_STATS_ROLES
from speedstats.errors import UserError
from speedstats.fsutil import write_atomic, write_stdout

TREND_INDEX = "index.md"


def _fraction(text):
    """An argparse type: a percentage like '4' or '4%', returned as a fraction (0.04)."""
    try:
        value = float(text.rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a percentage, got {text!r}") from None
    if not 0 <= value < 100:
        raise argparse.ArgumentTypeError(f"must be between 0 and 100, got {text!r}")
    return value / 100


def _minimum_change(text):
    """An argparse type: the smallest shift `changes` reports, a percentage from 0.1 to 50."""
    value = _fraction(text)
    if not 0.001 <= value <= 0.5:
        raise argparse.ArgumentTypeError(f"must be between 0.1 and 50, got {text!r}")
    return value


def _emit(text, out):
    if out:
        write_atomic(out, text)
    else:
        write_stdout(text)


def compare_options(parser):
    """The options that tune the verdict; `render --baseline` shares them."""
    parser.add_argument(
        "--min-effect", type=_fraction, default=stats.DEFAULT_MIN_EFFECT, metavar="PERCENT",
        help="smallest slowdown worth flagging, beyond the noise "
        f"(default: {stats.DEFAULT_MIN_EFFECT * 100:g})",
    )
    parser.add_argument(
        "--single-round-threshold", type=_fraction, default=stats.DEFAULT_SINGLE_ROUND_THRESHOLD,
        metavar="PERCENT",
        help=f"plain change that flags a case with fewer than {stats.MIN_ROUNDS_FOR_INTERVAL} rounds "
        f"(default: {stats.DEFAULT_SINGLE_ROUND_THRESHOLD * 100:g})",
    )
    parser.add_argument(
        "--confidence", type=_fraction, default=stats.DEFAULT_CONFIDENCE, metavar="PERCENT",
        help=f"confidence of the interval of the change (default: {stats.DEFAULT_CONFIDENCE * 100:g})",
    )


def compare_report(base_path, head, args):
    """The Report of head (Results) against the results file at base_path, tuned by args."""
    from speedstats import results as results_model
    from speedstats.analysis.compare import compare_results

    if not 0 < args.confidence < 1:
        raise UserError("--confidence: must be above 0 and below 100")
    return compare_results(
        results_model.load(base_path),
        head,
        min_effect=args.min_effect,
        single_round_threshold=args.single_round_threshold,
        confidence=args.confidence,
    )


def compare_command(args):
    from speedstats import results as results_model
    from speedstats.render import render_baseline_table

    report = compare_report(args.base, results_model.load(args.head), args)
    if args.format == "json":
        _emit(report.to_json(), args.out)
    else:
        _emit(render_baseline_table(report, templates_dir=args.templates), args.out)
    for row in report.regressions:
        c = row.comparison
        print(f"speedstats: regression: {row.case_id} {row.label}: {c.change * 100:+.1f}% ({c.text})",
              file=sys.stderr)
    return 1 if report.regressions else 0


def trend_command(args):
    from speedstats.analysis.trend import draw_trends
    from speedstats.render import render_trend_index

    if args.last is not None and args.last < 1:
        raise UserError(f"--last: must be at least 1, got {args.last}")
    ((_, history),) = _read_histories([args.history])
    plots, other_machine = draw_trends(history.entries, args.out, cases=args.case, last=args.last)
    if other_machine:
        print(f"speedstats: note: left out {other_machine} run(s) on another device or GPU than the newest",
              file=sys.stderr)
    write_atomic(Path(args.out) / TREND_INDEX, render_trend_index(plots))
    for plot in plots:
        print(plot.path)
    return 0


def _read_histories(paths):
    """[(path, History)] of history files, their bad lines and summaries told on stderr."""
    from speedstats.history import load_history

    histories = []
    for path in paths:
        history = load_history(path)
        for problem in history.problems:
            print(f"speedstats: warning: skipped {problem}", file=sys.stderr)
        note = history.summary_note()
        if note:
            print(f"speedstats: note: {path}: {note}", file=sys.stderr)
        if not history.entries:
            raise UserError(f"{path}: no usable run in the history file")
        histories.append((path, history))
    return histories


def _run_text(entry):
    from speedstats.text import one_line

    commit = one_line(entry.commit, 40)[:12] if entry.commit else f"line {entry.line}"
    when = f" ({one_line(entry.recorded_at, 40)})" if entry.recorded_at else ""
    return commit, when


def shift_lines(shift, runs):
    """The two lines `changes` prints for a Shift of a machine's `runs` entries."""
    from speedstats.contenders import LABELS
    from speedstats.text import one_line, time_text

    point = shift.point
    low, high = (point.low - 1) * 100, (point.high - 1) * 100
    interval = f"{point.confidence * 100:g}% interval {low:+.1f}% to {high:+.1f}%"
    fraction = f"{point.change * 100:+.1f}% ({interval})"
    before_s, after_s = point.before.median_s, point.after.median_s
    times = (f"{time_text(before_s, shift.kind)} -> {time_text(after_s, shift.kind)}" if shift.kind
             else f"{before_s:.6g}s -> {after_s:.6g}s")
    before, before_when = _run_text(shift.last_before)
    after, after_when = _run_text(shift.first_after)
    position = shift.series.positions[point.index] + 1
    between = (f"git log {before}..{after}" if shift.last_before.commit and shift.first_after.commit
               else "commits not recorded")
    head = f"{one_line(shift.case_id, 100)} on {one_line(shift.gpu_name, 100)}, {LABELS[shift.role]}"
    where = (f"  from run {position} of {runs} on: the last run before it {before}{before_when}, the first "
             f"after it {after}{after_when}; {between}")
    return [f"{head}: {fraction}, {times}", where]


def shift_record(shift):
    def run(entry):
        return {"commit": entry.commit, "recorded_at": entry.recorded_at, "line": entry.line}

    point = shift.point
    return {"case": shift.case_id, "framework": shift.role, "device": shift.device,
            "gpu_name": shift.gpu_name, "change": point.change, "ratio": point.ratio, "low": point.low,
            "high": point.high, "confidence": point.confidence,
            "before": {"runs": point.before.runs, "median_s": point.before.median_s},
            "after": {"runs": point.after.runs, "median_s": point.after.median_s},
            "last_before": run(shift.last_before), "first_after": run(shift.first_after)}


def changes_command(args):
    import json

    from speedstats.analysis.changepoints import MIN_RUNS, by_machine, case_ids, history_shifts

    if args.last is not None and args.last < 2 * MIN_RUNS:
        raise UserError(f"--last: must be at least {2 * MIN_RUNS}, got {args.last}")
    roles = [args.framework] if args.framework else list(SPEED_STATS_ROLES)
    lines, records, seen_cases, machines = [], [], set(), 0
    for _, history in _read_histories(args.history):
        for entries in by_machine(history.entries).values():
            entries = entries[-args.last:] if args.last else entries
            machines += 1
            seen_cases.update(case_ids(entries))
            for shift in history_shifts(entries, roles, cases=args.case, min_change=args.min_change):
                lines += shift_lines(shift, len(entries))
                records.append(shift_record(shift))
    unknown = [c for c in args.case or () if c not in seen_cases]
    if unknown:
        raise UserError(f"--case: no run in the history has case {unknown[0]!r}")
    if args.format == "json":
        _emit(json.dumps(records, indent=2, ensure_ascii=False) + "\n", args.out)
    elif lines:
        _emit("\n".join(lines) + "\n", args.out)
    else:
        _emit(f"no change point in {len(seen_cases)} case(s) on {machines} GPU(s)\n", args.out)
    return 0


def register(subparsers):
    compare = subparsers.add_parser(
        "compare",
        help="compare a head run with a base run, beyond the measured noise",
        description="Compare HEAD.json with BASE.json case by case (matched by id) and framework by "
        "framework, their rounds as two unpaired samples. A case is a regression when the interval of "
        f"head/base, Yuen's t interval of the difference of the {stats.DEFAULT_TRIM * 100:g}% trimmed "
        "means of the log times, lies wholly above 1 + min-effect. Exit 0 when nothing regressed, 1 when "
        "something did, 2 on bad input.",
    )
    compare.add_argument("base", metavar="BASE.json", help="results of the base run")
    compare.add_argument("head", metavar="HEAD.json", help="results of the head run")
    compare.add_argument("--out", metavar="FILE", help="write the comparison to FILE instead of stdout")
    compare.add_argument("--format", choices=("markdown", "json"), default="markdown",
                         help="markdown table (default) or JSON")
    compare.add_argument("--templates", metavar="DIR",
                         help="folder of templates that replace the built-in ones")
    compare_options(compare)
    compare.set_defaults(func=compare_command)

    trend = subparsers.add_parser(
        "trend",
        help="draw one PNG per case of time over commits from a history file",
        description="Draw, from a history file that 'speedstats run --history' appends to, one PNG "
        "per case: time per iteration of OneFlow and PyTorch over the commits, plus index.md linking "
        "them. Needs matplotlib.",
    )
    trend.add_argument("history", metavar="HISTORY.jsonl", help="history file, one JSON line per run")
    trend.add_argument("--out", metavar="DIR", required=True, help="folder for the PNG files")
    trend.add_argument("--case", action="append", metavar="ID", help="only this case (repeatable)")
    trend.add_argument("--last", type=int, metavar="N", help="only the newest N runs")
    trend.set_defaults(func=trend_command)

    changes = subparsers.add_parser(
        "changes",
        help="list the change points of a history: where each case got slower or faster, and by how much",
        description="List every change point of the history files (one per GPU, as the data branch keeps "
        "them, or one file of several GPUs), case by case and framework by framework: the shift with its "
        "95%% interval, the medians before and after, and the runs on either side of it, whose commits "
        "hold the change (`git log BEFORE..AFTER`). How they are found: docs/methodology.md, "
        "\"Main's history\". Exit 0, 2 on bad input.",
    )
    changes.add_argument("history", nargs="+", metavar="HISTORY.jsonl", help="history file(s)")
    changes.add_argument("--case", action="append", metavar="ID", help="only this case (repeatable)")
    changes.add_argument("--framework", choices=SPEED_STATS_ROLES, help="only this framework's times")
    changes.add_argument("--min-change", type=_minimum_change, default=DEFAULT_MIN_CHANGE, metavar="PERCENT",
                         help=f"smallest shift reported (default: {DEFAULT_MIN_CHANGE * 100:g})")
    changes.add_argument("--last", type=int, metavar="N", help="only the newest N runs of each GPU")
    changes.add_argument("--format", choices=("text", "json"), default="text", help="lines (default) or JSON")
    changes.add_argument("--out", metavar="FILE", help="write the list to FILE instead of stdout")
    changes.set_defaults(func=changes_command)
