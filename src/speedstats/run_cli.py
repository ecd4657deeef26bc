"""`speedstats run`: its flags; the run itself is speedstats.pipeline."""

from dataclasses import fields


def run_command(args):
    from speedstats.pipeline import RunOptions, run

    return run(RunOptions(**{f.name: getattr(args, f.name) for f in fields(RunOptions)}))


CACHE_HELP = "where the installed builds and the generated dataset are kept"


def add_suite_options(p, cache_help=CACHE_HELP):
    """The flags that say which suite runs, and where: the suite, the device and the build cache;
    `run`, `doctor` and `calibrate` take them alike."""
    p.add_argument("--suite", metavar="FILE", help="suite YAML (may extend a profile with 'extends:')")
    p.add_argument("--profile", metavar="NAME", help="built-in suite: default (GPU) or smoke (CPU, minutes)")
    p.add_argument("--device", choices=("cpu", "cuda", "auto"), default="auto",
                   help="where to run; auto picks cuda when NVML sees a GPU (default: auto)")
    p.add_argument("--cache-dir", metavar="DIR",
                   help=f"{cache_help} (default: $SPEEDSTATS_CACHE, else .cache/speedstats)")
    p.add_argument("--keep-builds", type=int, metavar="N",
                   help="the cache keeps the N most recently used builds and deletes older ones that no "
                   "run is using (default: $SPEEDSTATS_KEEP_BUILDS, else 8)")


def add_suite_and_build_options(p):
    """The suite's flags (add_suite_options) and each contender's build; `run` and `doctor` take them
    alike. Returns the builds' group."""
    from speedstats.contenders import FAMILIES

    add_suite_options(p)
    builds = p.add_argument_group(
        "builds", "What each contender runs (default: the suite's 'builds:', else what this environment "
        "has). "
        "BUILD is 'installed', a wheel file, a folder of wheels, a glob such as 'wheelhouse/oneflow-*.whl', "
        "or pip requirements such as 'oneflow==0.9.1.dev20240101+cu118'.")
    builds.add_argument("--oneflow", metavar="BUILD", help="the OneFlow build under test (the head)")
    builds.add_argument("--baseline-oneflow", metavar="BUILD",
                        help="a OneFlow build to judge the head against, measured in the same run")
    builds.add_argument("--pytorch", metavar="BUILD", help="torch and torchvision, the reference")
    builds.add_argument("--flowvision", metavar="BUILD", help="flowvision for both OneFlow builds")
    builds.add_argument("--pip-args", metavar="ARGS",
                        help="extra pip arguments for requirements, e.g. '--extra-index-url URL'")
    builds.add_argument("--only", choices=FAMILIES,
                        help="measure one framework only, as the old --only-oneflow/--only-pytorch "
                        "(with a baseline, 'oneflow' runs the head and the base)")
    return builds


def register(subparsers):
    p = subparsers.add_parser(
        "run",
        help="run the benchmark suite with OneFlow and PyTorch",
        description="Run every case of the suite with both frameworks, write OUT/results.json and "
        "OUT/comment.md, and print the comment. Exit 0 when the verdict passes, 1 when it fails, "
        "2 on bad input, 3 when a case produced no figures, 4 when the device stayed busy, 6 on an "
        "internal error, 7 when a case was measured on a disturbed machine (other processes on the CPU, "
        "a throttled or busy GPU; see the suite's 'disturbance:').",
    )
    builds = add_suite_and_build_options(p)
    p.add_argument("--out", metavar="DIR", default="speedstats-out",
                   help="output folder (default: %(default)s)")
    p.add_argument("--templates", metavar="DIR", help="template folder overriding the built-in one")
    p.add_argument("--rounds", type=int, metavar="N", help="timed rounds per case (overrides the suite)")
    p.add_argument("--bundle", metavar="DIR", help="also write a results bundle for actions/upload-artifact")
    p.add_argument("--history", metavar="FILE", help="append this run to a JSON Lines history file")
    p.add_argument("--lock-timeout", type=float, metavar="SECONDS",
                   help="how long to wait for another run on the same device (default: the suite's)")
    p.add_argument("--quiet", action="store_true", help="do not print the comment on stdout")
    builds.add_argument("--only-oneflow", dest="only", action="store_const", const="oneflow",
                        help="the same as --only oneflow, the old script's spelling")
    builds.add_argument("--only-pytorch", dest="only", action="store_const", const="pytorch",
                        help="the same as --only pytorch, the old script's spelling")
    builds.add_argument("--no-confirm", action="store_true",
                        help="do not measure flagged cases again before judging them")
    p.add_argument("--attribute", choices=("slower", "always", "never"),
                   help="profiled rounds of head and base after the timed ones, to say where the head "
                        "spends more time: for a slower head (the default), every case, or none "
                        "(overrides the suite's 'attribute')")
    p.add_argument("--no-calibration", action="store_true",
                   help="do not take the rule's process_sd from this runner's calibration ('speedstats "
                        "calibrate'; a suite that sets head_vs_base.process_sd keeps its own)")
    p.add_argument("--required-label", metavar="LABEL",
                   help="a failed verdict exits 1 only when the pull request carries LABEL (read through "
                        "the API with $GITHUB_TOKEN, else from the event payload); otherwise exit 0. The "
                        "comment and the verdict output still show the failure")
    p.add_argument("--baseline-missing", metavar="REASON",
                   help="why there is no baseline build (fetch-baseline --optional's baseline-missing "
                        "output): without --baseline-oneflow, a line after the Speed stats block says it")
    p.set_defaults(func=run_command)
