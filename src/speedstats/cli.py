"""The `speedstats` command line: one subcommand per job a workflow step does.

Each command module exposes `register(subparsers)`; modules import only light libraries at import
time, so `speedstats render` and the GitHub commands work without torch or oneflow installed.
"""

import argparse
import importlib
import sys

from speedstats import __version__
from speedstats.errors import UserError

COMMAND_MODULES = (
    "speedstats.bench.cli",  # run
    "speedstats.render_cli",  # render, parse
    "speedstats.analysis.cli",  # compare, trend
    "speedstats.github.cli",  # comment, docs-preview, automerge-guard, post-from-artifact, fetch-baseline
)


def build_parser():
    parser = argparse.ArgumentParser(
        prog="speedstats",
        description="Benchmark OneFlow against PyTorch and post the Speed stats comment on a pull request.",
    )
    parser.add_argument("--version", action="version", version=f"speedstats {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"speedstats: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("speedstats: interrupted", file=sys.stderr)
        return 130
