"""`speedstats render` and `speedstats parse`.

render prints the Speed stats comment body exactly as it is posted: no newline is added at the end,
since GitHub takes the body as is (a shell that wants one can `echo` after it). It exits 1 when the
verdict fails, so a workflow step can fail on it, with the reasons on stderr.
"""

import sys

from speedstats import results as results_model
from speedstats.compare_cli import compare_options
from speedstats.fsutil import read_text, write_atomic, write_stdout
from speedstats.parse import UNKNOWN_GPU, parse_speed_stats
from speedstats.render import render_speed_stats
from speedstats.suite import JUDGING_PROFILE_HELP, JUDGING_SUITE_HELP, judging_suite
from speedstats.verdict import judge


def render_command(args):
    results = results_model.load(args.results)
    suite = judging_suite(results, args.suite, args.profile)
    verdict = judge(results, suite)
    body = render_speed_stats(results, suite, verdict, templates_dir=args.templates,
                              show_memory=args.memory or None)
    regressions = []
    if args.baseline:
        body, regressions = with_baseline_table(body, results, args)
    if args.out:
        write_atomic(args.out, body)
    else:
        write_stdout(body)
    if not verdict.passed:
        print(f"speedstats: verdict: failed (score {verdict.score})", file=sys.stderr)
        for reason in verdict.reasons:
            print(f"speedstats:   {reason}", file=sys.stderr)
    for row in regressions:
        print(f"speedstats: regression: {row.case_id} {row.label}: {row.comparison.change * 100:+.1f}% "
              f"({row.comparison.text})", file=sys.stderr)
    if verdict.disturbed:
        from speedstats.errors import EXIT_DISTURBED

        return EXIT_DISTURBED
    return 0 if verdict.passed and not regressions else 1


def with_baseline_table(body, results, args):
    """The Speed stats block, a blank line, then the table against the --baseline run."""
    from speedstats.compare_cli import compare_report
    from speedstats.render import render_baseline_table

    report = compare_report(args.baseline, results, args)
    return f"{body}\n\n{render_baseline_table(report, templates_dir=args.templates)}", report.regressions


def parse_command(args):
    where = "stdin" if args.input == "-" else args.input
    text = read_text(args.input, "Speed stats file")
    results = parse_speed_stats(text, where=where, block=args.block, gpu_name=args.gpu_name)
    if args.out:
        write_atomic(args.out, results.to_json())
    else:
        write_stdout(results.to_json())
    return 0


def register(subparsers):
    render = subparsers.add_parser(
        "render",
        help="print the Speed stats comment body for a results file",
        description="Print the Speed stats comment body for RESULTS.json, judged by the suite's "
        "thresholds. Exit 0 when the verdict passes, 1 when it fails, 2 on bad input.",
    )
    render.add_argument("results", metavar="RESULTS.json", help="results of a run (speedstats run, or parse)")
    render.add_argument("--suite", metavar="FILE", help=JUDGING_SUITE_HELP)
    render.add_argument("--profile", metavar="NAME", help=JUDGING_PROFILE_HELP)
    render.add_argument("--templates", metavar="DIR",
                        help="folder of templates that replace the built-in ones")
    render.add_argument("--out", metavar="FILE", help="write the body to FILE instead of stdout")
    render.add_argument(
        "--memory", action="store_true",
        help="add each case's peak memory lines ('GPU used'); the suite field show_memory does the same",
    )
    render.add_argument(
        "--baseline", metavar="BASE.json",
        help="results of a base run: add a table of head vs base after the block; a regression beyond "
        "the noise also exits 1 (see 'speedstats compare')",
    )
    compare_options(render)
    render.set_defaults(func=render_command)

    parse = subparsers.add_parser(
        "parse",
        help="read a Speed stats comment or the old bot's log back into results JSON",
        description="Read a Speed stats comment body, its text as GitHub shows it, or the old bot's raw "
        "log, and write results JSON that 'render' accepts. Marks are ignored; render recomputes them.",
    )
    parse.add_argument("input", nargs="?", default="-", metavar="FILE",
                       help="input file, or - for stdin (default)")
    parse.add_argument("--out", metavar="FILE", help="write the results JSON to FILE instead of stdout")
    parse.add_argument("--block", type=int, metavar="N",
                       help="the N-th Speed stats block when there are several")
    parse.add_argument(
        "--gpu-name", default=UNKNOWN_GPU, metavar="NAME",
        help=f"GPU name for a block without a GPU line (default: {UNKNOWN_GPU})",
    )
    parse.set_defaults(func=parse_command)
