"""`speedstats compare` (head against a base run) and `speedstats trend` (plots from the history)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from speedstats.analysis import stats
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
    from speedstats.history import read_history
    from speedstats.render import render_trend_index

    if args.last is not None and args.last < 1:
        raise UserError(f"--last: must be at least 1, got {args.last}")
    entries, problems = read_history(args.history)
    for problem in problems:
        print(f"speedstats: warning: skipped {problem}", file=sys.stderr)
    if not entries:
        raise UserError(f"{args.history}: no usable run in the history file")
    plots, other_machine = draw_trends(entries, args.out, cases=args.case, last=args.last)
    if other_machine:
        print(f"speedstats: note: left out {other_machine} run(s) on another device or GPU than the newest",
              file=sys.stderr)
    write_atomic(Path(args.out) / TREND_INDEX, render_trend_index(plots))
    for plot in plots:
        print(plot.path)
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
