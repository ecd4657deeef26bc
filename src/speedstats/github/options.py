"""The flags the GitHub commands share, each declared here once with one help text.

A command module adds them with add_common_options (and add_mode_option where it posts a comment),
then declares its own flags. No command imports another's flags.
"""

import argparse

from speedstats.github.client import COMMAND_DEADLINE_ENV, DEFAULT_COMMAND_DEADLINE_S, MAX_DEADLINE_S
from speedstats.github.context import DEFAULT_API_URL

AUTHOR_HELP = ("the login whose comments are the bot's (default: the token's own login from GET /user; "
               "github-actions[bot] when the token cannot read it, as GITHUB_TOKEN cannot). Give it for "
               "a GitHub App's installation token, e.g. my-app[bot]. A marker on anyone else's comment "
               "is ignored")


def add_common_options(parser, *, pull_request=True, dry_run=True, author=True, deadline_note=""):
    """--repo, --token, --api-url and --github-deadline (deadline_note ends its help); with pull_request,
    --pr, --head-sha and --run-id (the pull request to act on); with dry_run, --dry-run; with author,
    --author (whose comments are the bot's)."""
    if pull_request:
        parser.add_argument("--pr", type=int, metavar="N",
                            help="pull request number (default: the one of the triggering event)")
    parser.add_argument("--repo", metavar="OWNER/NAME", help="repository (default: $GITHUB_REPOSITORY)")
    if pull_request:
        parser.add_argument("--head-sha", metavar="SHA",
                            help="head commit the results belong to "
                                 "(default: from the event, else the PR's head)")
        parser.add_argument("--run-id", type=int, metavar="ID",
                            help="workflow run id (default: $GITHUB_RUN_ID)")
    parser.add_argument("--token", help="GitHub token (default: $GITHUB_TOKEN, then $INPUT_TOKEN); "
                                        "prefer the environment, a flag shows in the process list")
    parser.add_argument("--api-url", metavar="URL",
                        help=f"REST API base URL (default: $GITHUB_API_URL or {DEFAULT_API_URL})")
    add_deadline_option(parser, deadline_note)
    if dry_run:
        parser.add_argument("--dry-run", action="store_true",
                            help="print what would be sent; write nothing")
    else:
        parser.set_defaults(dry_run=False)
    if author:
        parser.add_argument("--author", metavar="LOGIN", help=AUTHOR_HELP)


def _deadline(text):
    """An argparse type: a positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    if value > MAX_DEADLINE_S:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_DEADLINE_S:g} seconds (a week), got {text!r}")
    return value


def add_deadline_option(parser, note=""):
    parser.add_argument("--github-deadline", type=_deadline, metavar="SECONDS",
                        help="give up on GitHub (exit 5) after this long, every call, retry and wait of the "
                             f"command together (default: ${COMMAND_DEADLINE_ENV}, else "
                             f"{DEFAULT_COMMAND_DEADLINE_S:g}){note}")


def add_mode_option(parser):
    parser.add_argument("--mode", choices=("update", "new"), default="update",
                        help="update: edit the bot's earlier comment, keeping one (default); "
                             "new: post a fresh one")
