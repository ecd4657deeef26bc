"""`speedstats record`: a run of the default branch appended to main's history in the data branch, then
one tracking issue per shift that history shows (github/tracking.py).

On a push to the default branch, a schedule or a manual run of it, the action's `run` with `history-branch`
(or this command after `run`) appends the run's results to the GPU's file of the data branch
(github/databranch.py), with the job's token (`contents: write`). Anything else never writes it: a pull
request's run (a fork's above all: its code and figures are not the default branch's), a push to another
branch, a tag; those are told so in a warning, and the step passes. A cancelled run, or one that failed
before any case, is not recorded either. After appending, the GPU's history is analysed for change points
and each new shift of a case opens its tracking issue, or updates the open one (`issues: write`;
--no-issues: none).
"""
from __future__ import annotations

import sys

from speedstats import actions_io
from speedstats.actions_io import check_sha, workflow_command
from speedstats.errors import UserError
from speedstats.github import context
from speedstats.github.client import ReadOnlyToken
from speedstats.github.databranch import DEFAULT_BRANCH, DataBranch
from speedstats.github.options import add_common_options
from speedstats.github.session import guarded, make_client
from speedstats.history import DEFAULT_MAX_RUNS, SHORT_SHA, history_file_name, history_line

# The events whose run measures the default branch itself; a schedule's run is always the default branch.
RECORDED_EVENTS = ("push", "schedule", "workflow_dispatch")
MIN_MAX_RUNS = 20


def register(subparsers):
    p = subparsers.add_parser(
        "record",
        help="append a run of the default branch to its history in a data branch",
        description="Append the run's results (results.json) to main's history: one file per GPU in a "
        "branch of the repository (default: speedstats-data), written through the GitHub API with "
        "the token (it needs `contents: write`); two jobs appending at once both land. Only a push to the "
        "default branch, a schedule or a manual run of it writes: on a pull request (a fork's above all) "
        "it warns and writes nothing. Exit 0, 2 on bad input or a token without the permission, 5 when "
        "GitHub cannot be reached.",
    )
    p.add_argument("--results", required=True, metavar="FILE", help="the run's results.json")
    p.add_argument("--branch", default=DEFAULT_BRANCH, metavar="NAME",
                   help="the data branch (default: %(default)s); made with the first run")
    p.add_argument("--max-runs", type=int, default=DEFAULT_MAX_RUNS, metavar="N",
                   help="runs a GPU's file keeps; past them the oldest are summarised into one line "
                   "(default: %(default)s)")
    p.add_argument("--commit", metavar="SHA", help="the commit the run measured (default: $GITHUB_SHA)")
    p.add_argument("--no-issues", action="store_true",
                   help="open or update no tracking issue (by default a new shift of a case on this GPU "
                   "opens one, or updates the open one; the token needs `issues: write`)")
    add_common_options(p, pull_request=False)
    p.set_defaults(func=record_command)


def not_recorded_because(event, default_branch, ref):
    """Why this job must not write main's history (None when it may): its event, or its branch."""
    if event.pr_number is not None or (event.name and event.name not in RECORDED_EVENTS):
        what = f"a {event.name} event" if event.name else "a pull request's run"
        return f"{what} never writes main's history (only a push to the default branch or a schedule does)"
    if ref is not None and default_branch is not None and ref != f"refs/heads/{default_branch}":
        return f"the run is for {ref}, not the default branch {default_branch}"
    return None


def check_branch_name(name):
    if not name or name.startswith(("-", "/", "refs/")) or name.endswith(("/", ".lock")) or ".." in name \
            or any(c.isspace() or c in "~^:?*[\\" or ord(c) < 32 for c in name):
        raise UserError(f"--branch: not a branch name git accepts: {name!r}")
    return name


def record_command(args, err=None):
    from speedstats import results as results_model

    err = err or sys.stderr
    if args.max_runs < MIN_MAX_RUNS:
        raise UserError(f"--max-runs: must be at least {MIN_MAX_RUNS}, got {args.max_runs}")
    check_branch_name(args.branch)
    commit = args.commit or actions_io.commit_sha()
    if commit is not None:
        check_sha(commit, "--commit" if args.commit else "GITHUB_SHA")
    results = results_model.load(args.results)
    if results.cancelled or results.error or not results.cases:
        why = "it was cancelled" if results.cancelled else "it measured no case"
        print(f"speedstats: {args.results}: not recorded in main's history: {why}", file=err)
        return 0
    event = actions_io.read_event()
    repo = context.resolve_repo(args.repo, event=event)
    why = not_recorded_because(event, None, None)
    if why is not None:
        print(workflow_command("warning", f"speedstats: not recorded: {why}"))
        return 0
    client = make_client(args)
    path = history_file_name(results.gpu_name)
    line = history_line(results, commit=commit)
    if client is None or args.dry_run:
        print(f"speedstats: dry run: would append the run of {(commit or 'no commit')[:SHORT_SHA]} to {path} "
              f"of branch {args.branch} of {repo} (at most {args.max_runs} runs)", file=err)
        return 0

    def work():
        default_branch = event.default_branch or client.default_branch(repo)
        why = not_recorded_because(event, default_branch, actions_io.git_ref())
        if why is not None:
            print(workflow_command("warning", f"speedstats: not recorded: {why}"))
            return 0
        branch = DataBranch(client, repo, args.branch, err)
        try:
            written = branch.append_run(path, line, args.max_runs, commit)
        except ReadOnlyToken as refused:
            raise UserError(f"could not write the data branch {args.branch} of {repo}: {refused}; the token "
                            f"needs `{refused.permission}` (add it to the job's `permissions:`)") from None
        short = (commit or "no commit")[:SHORT_SHA]
        if written.commit is None:
            print(f"speedstats: {branch}: {path} has the run of {short} already", file=err)
        else:
            tries = f" ({written.attempts} tries: other jobs wrote the branch too)" * (written.attempts > 1)
            print(f"speedstats: {branch}: appended the run of {short} to {path} in commit "
                  f"{written.commit[:12]}{tries}", file=err)
        if not args.no_issues:
            track_issues(args, client, repo, branch, path, written, results, err)
        return 0

    return guarded(work, client)


def track_issues(args, client, repo, branch, path, written, results, err):
    """The tracking issues of the GPU's history as this run left it."""
    from speedstats.analysis.changepoints import by_machine
    from speedstats.github.tracking import Tracker
    from speedstats.history import read_history_text

    data = written.files.get(path)
    if data is None:  # the run was there already: the file as the branch has it
        data = branch.read(client.branch_head(repo, branch.branch), path) or b""
    history = read_history_text(data.decode("utf-8", "replace"), path)
    entries = by_machine(history.entries).get((results.device, results.gpu_name), [])
    author = args.author or client.login()
    try:
        outcomes = Tracker(client, repo, author, branch, err=err).track(entries, path)
    except ReadOnlyToken as refused:
        raise UserError(f"the run is recorded, but the tracking issues of {repo} could not be written: "
                        f"{refused}; the token needs `{refused.permission}` (add it to the job's "
                        "`permissions:`), or give --no-issues") from None
    for outcome in outcomes:
        print(f"speedstats: {repo}: {outcome.text}", file=err)
