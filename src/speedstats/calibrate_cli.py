"""`speedstats calibrate`: what this runner's noise lets the head-vs-base rule tell, case by case.

An A/A run: the suite's cases, the same OneFlow build as head and as base, each case in `--pairs` pairs
of freshly started processes of `--rounds` rounds each (rounds of as many iterations as `run` times),
under the device lock, as `run` measures them (OUT/results.json). From each case's ratios
(analysis.calibration): the round-to-round and process-to-process sds of log(head/base) with their 95%
intervals; from those and what a round and a pair's start cost, by the rule's own steps on simulated
rounds, the smallest slowdown the suite's rule resolves (called a regression in 95% of runs) and its
wall time, and the cheapest rule (pairs, rounds per pair, band) found that resolves `--target`. The
calibration goes to the build cache, one file per GPU name (speedstats.calibration), where `run` takes
each case's process_sd, pooled with the default by the pairs it rests on, as its rule's prior; the
cases of the file that this run did not measure (or measured without figures) stay as they were.

Exit 0; 2 on bad input; 3 when a case gave no figures, 7 when one was measured on a disturbed machine
(the other cases are kept); 4 when the device stayed busy; 130 when interrupted.
"""

from __future__ import annotations

import math
import statistics
import sys

from speedstats.errors import EXIT_CASE_FAILED, EXIT_DISTURBED, UserError
from speedstats.run_cli import add_suite_options

DEFAULT_PAIRS = 6
DEFAULT_PAIR_ROUNDS = 5
MAX_TRIALS = 10000


def _progress(message):
    print(message, file=sys.stderr, flush=True)


def check_options(args):
    """UserError naming the flag that is out of range."""
    from speedstats.analysis.rule import MAX_PROCESS_PAIRS, MAX_ROUNDS
    from speedstats.analysis.stats import MIN_ROUNDS_FOR_INTERVAL

    if not 2 <= args.pairs <= MAX_PROCESS_PAIRS:
        raise UserError(f"--pairs: must be between 2 and {MAX_PROCESS_PAIRS}, got {args.pairs}")
    most = MAX_ROUNDS // args.pairs
    if not MIN_ROUNDS_FOR_INTERVAL <= args.rounds <= most:
        raise UserError(f"--rounds: must be between {MIN_ROUNDS_FOR_INTERVAL} and {most} (with --pairs "
                        f"{args.pairs}), got {args.rounds}")
    if not 0 < args.target < 1:
        raise UserError(f"--target: must be above 0 and below 1 (0.05: a 5% slowdown), got {args.target:g}")
    if not 0.5 <= args.power < 1:
        raise UserError(f"--power: must be at least 0.5 and below 1, got {args.power:g}")
    if not 10 <= args.trials <= MAX_TRIALS:
        raise UserError(f"--trials: must be between 10 and {MAX_TRIALS}, got {args.trials}")


def calibration_suite(suite, case_ids, pairs, pair_rounds):
    """The suite as the A/A run measures it: the chosen cases, each timed in rounds of as many iterations
    as `run` would time (its times scaled to the calibration's rounds), under a rule of `pairs` pairs of
    `pair_rounds` rounds that stops at its first look; nothing profiled, rounds interleaved."""
    from speedstats.analysis.calibration import calibration_rule
    from speedstats.bench.schedule import RoundPlan

    if case_ids:
        known = [case.id for case in suite.cases]
        for case_id in case_ids:
            if case_id not in known:
                from speedstats.text import did_you_mean

                raise UserError(f"--case: no case {case_id!r} in suite {suite.name!r}"
                                f"{did_you_mean(case_id, known) or ' (the cases: ' + ', '.join(known) + ')'}")
        suite.cases = [case for case in suite.cases if case.id in case_ids]
    rule = calibration_rule(suite.head_vs_base, pairs, pair_rounds)
    for case in suite.cases:
        plan = RoundPlan.for_case(case, True, suite.head_vs_base)
        if case.rounds >= suite.head_vs_base.first_rounds:  # the suite's own rounds, of `times` each
            case.rounds = rule.first_rounds
        else:
            case.times = plan.iterations * rule.first_rounds
    suite.head_vs_base, suite.attribute, suite.interleave, suite.confirm = rule, "never", True, False
    return suite


def case_costs(case):
    """(a round of the head and the base together, a fresh pair's start) in seconds, from the A/A
    results of a case: the median rounds, and the median over pairs of the slower of its two starts
    (they start together)."""
    from speedstats.contenders import BASE, HEAD

    head, base = case.frameworks[HEAD], case.frameworks[BASE]
    iterations = head.round_iterations or 1
    round_s = (head.per_iter_s + base.per_iter_s) * iterations
    starts = [max(h, b) for h, b in zip(head.setup_starts_s, base.setup_starts_s)]
    start_s = statistics.median(starts) if starts else max(head.setup_s or 0.0, base.setup_s or 0.0)
    return round_s, start_s


def calibrate_case(case, rule, target, power, trials, seed=0):
    """A calibration.CaseCalibration of one case's A/A results (an error when it has none to read)."""
    from speedstats.analysis import calibration as analysis
    from speedstats.calibration import CaseCalibration

    if case.failure:
        return CaseCalibration(id=case.id, error=case.error or "no figures")
    if case.disturbance:
        why = f"measured on a disturbed machine: {case.disturbance['text']}"
        return CaseCalibration(id=case.id, error=why)
    paired = case.paired
    if paired is None or not paired.ratios:
        return CaseCalibration(id=case.id, error="no head-vs-base rounds")
    found = analysis.scatter(paired.ratios, paired.stages)
    round_s, start_s = case_costs(case)
    noise = analysis.Noise(found.round_sd, found.process_sd, round_s, start_s)
    told = analysis.resolution(rule, noise, target, power, trials, seed, pairs=found.pairs)
    smallest = told.smallest
    return CaseCalibration(
        id=case.id, pairs=found.pairs, rounds=found.rounds, round_sd=found.round_sd,
        round_sd_low=found.round_sd_low, round_sd_high=found.round_sd_high, process_sd=found.process_sd,
        process_sd_low=found.process_sd_low, process_sd_high=found.process_sd_high, round_s=round_s,
        pair_start_s=start_s, resolves=None if smallest is None else smallest.change,
        resolves_wall_s=None if smallest is None else smallest.wall_s, no_change_wall_s=told.no_change_wall_s,
        target_rule=None if told.target_rule is None else told.target_rule.to_dict())


def _pct(value):
    return "-" if value is None else f"{value:.1%}"


def _duration(seconds):
    from speedstats.pipeline import clock_text

    return "-" if seconds is None or not math.isfinite(seconds) else clock_text(seconds)


def report_table(calibration):
    """The calibration as an aligned text table, a case a line, then what the columns say."""
    target = f"{calibration.target:.0%}".replace(".0%", "%")
    head = ["CASE", "PAIRS/ROUNDS", "ROUND SD (95%)", "PROCESS SD (95%)", "RESOLVES", "TAKES",
            f"TO RESOLVE {target}"]
    rows = []
    for case in calibration.cases:
        if case.error:
            rows.append([case.id, "-", "-", "-", "-", "-", f"no figures: {case.error}"])
            continue
        process_high = "?" if case.process_sd_high is None else f"{case.process_sd_high:.1%}"
        rule = case.target_rule
        needs = ("none of the rules tried (at most 10 pairs of 40 rounds)" if rule is None else
                 f"{rule['process_pairs']} pairs x {rule['pair_rounds']} rounds, band "
                 f"{rule['min_effect']:.1%}: {_duration(rule['wall_s'])}")
        rows.append([case.id, f"{case.pairs}/{case.rounds}",
                     f"{case.round_sd:.1%} ({case.round_sd_low:.1%}-{case.round_sd_high:.1%})",
                     f"{case.process_sd:.1%} ({case.process_sd_low:.1%}-{process_high})",
                     "over 100%" if case.resolves is None else f"+{case.resolves:.0%}",
                     _duration(case.resolves_wall_s), needs])
    widths = [max(len(row[i]) for row in [head] + rows) for i in range(len(head) - 1)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1]
             for row in [head] + rows]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def calibrate_command(args):
    from speedstats.fsutil import write_stdout

    return calibrate(args, write_stdout)


def calibrate(args, write_table):
    """The A/A run and its calibration (the module's docstring); the table goes to write_table(text).
    args: calibrate's flags (doctor's, with add_calibrate_options and --out and --lock-timeout set)."""
    from speedstats import calibration as store
    from speedstats.contenders import HEAD
    from speedstats.gpuinfo import device_name
    from speedstats.history import utc_now
    from speedstats.pipeline import (
        RunOptions,
        build_requests,
        cache_path,
        check_driver_or_fail,
        check_frameworks_installed,
        check_outputs,
        keep_builds_or_fail,
        lock_timeout_or_fail,
        measure,
        prepare_builds,
        resolve_device,
        skip_cases_beyond_the_gpus,
    )
    from speedstats.suite import load_suite

    check_options(args)
    suite = load_suite(args.suite, args.profile)
    rule = suite.head_vs_base  # the rule `run` applies, which the calibration judges
    head_build = args.oneflow or suite.builds.oneflow or "installed"
    options = RunOptions(suite=args.suite, profile=args.profile, device=args.device, out=args.out,
                         cache_dir=args.cache_dir, keep_builds=args.keep_builds, oneflow=head_build,
                         baseline_oneflow=head_build, flowvision=args.flowvision, pip_args=args.pip_args,
                         only="oneflow", no_confirm=True, attribute="never", lock_timeout=args.lock_timeout)
    calibration_suite(suite, args.case, args.pairs, args.rounds)
    requests, contenders = build_requests(suite, options)
    check_frameworks_installed(sorted({r.family for r in requests if r.installed}))
    device = resolve_device(args.device)
    skipped = skip_cases_beyond_the_gpus(suite, device, _progress)  # as `run` skips them, before the lock
    keep_builds = keep_builds_or_fail(args.keep_builds)
    out = check_outputs(options)
    cache = cache_path(args.cache_dir)
    lock_timeout = lock_timeout_or_fail(suite, args.lock_timeout)
    gpu_name = device_name(device)
    path = store.calibration_path(cache, gpu_name)
    _progress(f"speedstats calibrate: suite {suite.name!r}, {len(suite.cases)} cases, the same OneFlow build "
              f"as head and base in {args.pairs} pairs of processes of {args.rounds} rounds each, on "
              f"{gpu_name}")
    builds = prepare_builds(requests, cache, keep_builds, _progress)
    if device == "cuda":
        check_driver_or_fail(builds, device, _progress)
    results = measure(suite, device, out, cache, builds, contenders, options, lock_timeout, _progress,
                      skipped)
    _progress(f"speedstats calibrate: simulating the rule on each case's noise ({args.trials} runs a change)")
    cases = [calibrate_case(case, rule, args.target, args.power, args.trials) for case in results.cases]
    version = (builds[HEAD].provenance.get("packages") or {}).get("oneflow", {}).get("version")
    calibration = store.Calibration(
        device=device, gpu_name=gpu_name, measured_at=utc_now(), suite=suite.name,
        runner=store.runner_name(), build=version, pairs=args.pairs, pair_rounds=args.rounds,
        target=args.target, power=args.power, trials=args.trials, rule=rule.to_dict(), cases=cases)
    measured = [case for case in cases if not case.error]
    for case in measured:
        case.measured_at = calibration.measured_at
    if measured:
        try:
            earlier = store.read_calibration(path)
        except UserError as exc:
            _progress(f"speedstats calibrate: replacing {path.name}: {exc}")
            earlier = None
        store.write_calibration(path, store.merged(calibration, earlier, calibration.runner))
    write_table(report_table(calibration))
    where = f"wrote {path}" if measured else "no case gave figures: no calibration written"
    _progress(f"speedstats calibrate: {where}; the A/A results in {out / 'results.json'}. RESOLVES: the "
              f"smallest slowdown the suite's rule calls a regression in {args.power:.0%} of simulated runs "
              f"(its process_sd as run takes it from this calibration), TAKES its head-vs-base wall time")
    if any(case.failure for case in results.cases):
        return EXIT_CASE_FAILED
    if any(case.disturbance for case in results.cases):
        return EXIT_DISTURBED
    return 0


def add_calibrate_options(p):
    """The flags of the A/A measurement and of what it is judged for (`doctor --calibrate` takes them
    too)."""
    p.add_argument("--pairs", type=int, default=DEFAULT_PAIRS, metavar="N",
                   help="pairs of head and base processes per case (default: %(default)s; at most 10)")
    p.add_argument("--rounds", type=int, default=DEFAULT_PAIR_ROUNDS, metavar="N",
                   help="rounds per pair of processes, each of the iterations 'run' times in a round "
                        "(default: %(default)s)")
    p.add_argument("--target", type=float, default=0.05, metavar="CHANGE",
                   help="the slowdown the rule should resolve, as a fraction (default: %(default)s, 5%%)")
    p.add_argument("--power", type=float, default=0.95, metavar="SHARE",
                   help="how often a slowdown must be called a regression to count as resolved "
                        "(default: %(default)s)")
    p.add_argument("--trials", type=int, default=200, metavar="N",
                   help="simulated runs per change and rule (default: %(default)s)")
    p.add_argument("--case", action="append", metavar="ID",
                   help="calibrate this case of the suite only (repeat for more; default: every case)")


def register(subparsers):
    p = subparsers.add_parser(
        "calibrate",
        help="measure this runner's noise (A/A) and what the head-vs-base rule can tell in it",
        description="Run the suite's cases with the same OneFlow build as head and as base, in --pairs "
        "pairs of processes of --rounds rounds each, and print per case the round-to-round and "
        "process-to-process scatter (sd of log head/base, with 95%% intervals), the smallest slowdown "
        "the suite's rule resolves here and its wall time, and the cheapest rule (pairs, rounds, band) "
        "found that resolves --target. The calibration is kept in the build cache, one file per GPU "
        "name; 'run' pools each case's process sd into its rule's prior. Exit 0, 2 on bad input, 3 when a "
        "case gave no figures, 4 when the device stayed busy, 7 when a case was measured on a disturbed "
        "machine.",
    )
    add_suite_options(p, cache_help="the build cache, where the calibration is kept too")
    p.add_argument("--oneflow", metavar="BUILD",
                   help="the OneFlow build measured against itself (default: the suite's, else 'installed')")
    p.add_argument("--flowvision", metavar="BUILD", help="flowvision for the OneFlow build")
    p.add_argument("--pip-args", metavar="ARGS", help="extra pip arguments for requirements")
    p.add_argument("--out", metavar="DIR", default="speedstats-calibrate",
                   help="where the A/A run's results.json goes (default: %(default)s)")
    p.add_argument("--lock-timeout", type=float, metavar="SECONDS",
                   help="how long to wait for another run on the same device (default: the suite's)")
    add_calibrate_options(p)
    p.set_defaults(func=calibrate_command)
