"""What the GitHub commands do the same way: make the client, find the target pull request, guard
against errors that would show the token, post (or, on a fork's read-only token, report instead), run
the automerge guard, and find a run's artifact.

The commands (comment.py, automerge_guard.py, artifact.py, baseline.py) build on these; nothing here
imports a command.
"""

import sys

from speedstats.actions_io import append_summary, set_output, workflow_command
from speedstats.errors import SpeedstatsError, UserError
from speedstats.github import context
from speedstats.github.client import GitHubClient, Gone, ReadOnlyToken, RetryPolicy
from speedstats.github.markers import SPEED_STATS
from speedstats.github.post import automerge_guard, automerge_removed_text, post_comment

FORKS_DOC = "docs/forks.md"


def make_client(args, environ=None):
    """A GitHubClient, or None for a dry run without a token. Raises UserError without a token."""
    token = context.resolve_token(args.token, environ)
    api_url = context.resolve_api_url(args.api_url, environ)
    if token is None:
        if args.dry_run:
            return None
        raise UserError("token: none given (set GITHUB_TOKEN, or pass --token)")
    return GitHubClient(token, api_url, RetryPolicy.from_env(environ, getattr(args, "github_deadline", None)))


def target_or_none(args):
    """The target pull request, or None (after saying why) when the event has none."""
    try:
        return context.resolve_target(pr=args.pr, repo=args.repo, head_sha=args.head_sha, run_id=args.run_id)
    except context.NoPullRequest as exc:
        print(f"speedstats: {exc}", file=sys.stderr)
        return None


def guarded(run, client):
    """Run a command body; its errors keep their exit status and lose the token. (Anything else is a
    bug, which the CLI reports as an internal error, the token redacted there too.)"""
    try:
        return run()
    except SpeedstatsError as exc:
        if client is not None:
            raise type(exc)(client.redact(exc)) from None
        raise


def report_read_only(target, body, what, refused):
    """A write refused with 403 'Resource not accessible': on a fork's pull request (read-only token by
    design) warn in the job log and put the body in the job summary, exit 0; anywhere else the token
    lacks a permission, a UserError naming it."""
    if not context.read_only_because_fork(target):
        raise UserError(f"could not {what} on {target}: {refused}; the token needs `{refused.permission}` "
                        "(add it to the workflow's or the job's `permissions:`)")
    summary = append_summary(body)
    where = "it is in the job summary instead" if summary else "it follows"
    print(workflow_command("warning", f"speedstats: could not {what} on {target}: the token cannot write "
                           f"there (a pull request from a fork gets a read-only token); {where}. "
                           f"To post from forks, see {FORKS_DOC}."))
    if not summary:
        print(body)
    return 0


def emit_comment_url(outcome):
    if outcome.url and not set_output("comment-url", outcome.url):
        print(outcome.url)


def post_kind(args, target, client, kind, body, emit_url=True):
    """Post (or update, with --mode update) the comment of `kind` on the target; the exit status."""
    post_outcome(args, target, client, kind, body, emit_url)
    return 0


def post_outcome(args, target, client, kind, body, emit_url=True):
    """post_kind's work; the Outcome, or None when a fork's read-only token was refused (and warned of)."""
    if client is not None and target.head_sha is None and kind == SPEED_STATS:
        target.head_sha = client.pull(target)[0]
    api_url = context.resolve_api_url(args.api_url)
    author = getattr(args, "author", None)
    if author is not None and not author.strip():
        raise UserError("--author: must not be empty")
    if client is not None and not author and args.mode == "update":  # a new comment needs no finding
        author = client.login()
    try:
        outcome = post_comment(client, target, kind, body, mode=args.mode, author=author,
                               dry_run=args.dry_run, api_url=api_url)
    except ReadOnlyToken as refused:
        report_read_only(target, body, "post the comment", refused)
        return None
    if outcome.action != "dry-run":
        print(f"speedstats: {outcome.message}", file=sys.stderr)
        if emit_url:
            emit_comment_url(outcome)
    return outcome


def run_guard(args, target, client, job, label, status):
    """The automerge guard on the target: when the job failed, remove `label` and say so (once)."""
    try:
        author = getattr(args, "author", None) or (client.login() if client is not None else None)
        outcome = automerge_guard(client, target, job, label=label, status=status, dry_run=args.dry_run,
                                  api_url=context.resolve_api_url(args.api_url), author=author)
    except ReadOnlyToken as refused:
        return report_read_only(target, automerge_removed_text(job, label), f"remove the {label!r} label",
                                refused)
    if outcome.action != "dry-run":
        print(f"speedstats: {outcome.message}", file=sys.stderr)
    return 0


def find_artifact(client, repo, run_id, name, max_bytes, *, option, run_text, limit_text, expired_hint=""):
    """(artifact, where): the run's artifact called `name`, there, unexpired and at most max_bytes.

    Each failure is a one-line UserError (Gone for an expired artifact); `option` names the flag that
    chose the artifact.
    """
    artifacts = client.artifacts(repo, run_id)
    matching = [a for a in artifacts if a.name == name]
    if not matching:
        names = ", ".join(sorted({a.name for a in artifacts})) or "none"
        raise UserError(f"{option}: {run_text} has no artifact named {name!r} (its artifacts: {names})")
    artifact = matching[0]
    where = f"artifact {name!r} of run {run_id}"
    if artifact.expired:
        raise Gone(f"{where}: expired; GitHub no longer has it{expired_hint}")
    if artifact.size > max_bytes:
        raise UserError(f"{where}: {artifact.size} bytes, more than {limit_text}")
    return artifact, where
