"""GitHub commands: comment, docs-preview, automerge-guard, post-from-artifact, fetch-baseline.

They run inside a GitHub Actions job (GITHUB_TOKEN, GITHUB_REPOSITORY, GITHUB_EVENT_PATH,
GITHUB_API_URL) or from a shell with --repo/--pr/--token. PyGithub is imported only when a command
runs, so `speedstats --help` stays quick.
"""

import argparse
import sys

from speedstats.errors import SpeedstatsError, UserError
from speedstats.fsutil import read_text
from speedstats.github import context
from speedstats.github.markers import DOCS_PREVIEW, SPEED_STATS

FORKS_DOC = "docs/forks.md"
AUTHOR_HELP = ("the login whose comments are the bot's (default: the token's own login from GET /user; "
               "github-actions[bot] when the token cannot read it, as GITHUB_TOKEN cannot). Give it for a "
               "GitHub App's installation token, e.g. my-app[bot]. A marker on anyone else's comment is ignored")


def _deadline(text):
    """An argparse type: a positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def deadline_option(parser, extra=""):
    from speedstats.github.client import COMMAND_DEADLINE_ENV, DEFAULT_COMMAND_DEADLINE_S

    parser.add_argument("--github-deadline", type=_deadline, metavar="SECONDS",
                        help="give up on GitHub (exit 5) after this long, every call, retry and wait of the "
                             f"command together (default: ${COMMAND_DEADLINE_ENV}, else "
                             f"{DEFAULT_COMMAND_DEADLINE_S:g}){extra}")


def _common(parser, author=True):
    parser.add_argument("--pr", type=int, metavar="N",
                        help="pull request number (default: the one of the triggering event)")
    parser.add_argument("--repo", metavar="OWNER/NAME", help="repository (default: $GITHUB_REPOSITORY)")
    parser.add_argument("--head-sha", metavar="SHA",
                        help="head commit the results belong to (default: from the event, else the PR's head)")
    parser.add_argument("--run-id", type=int, metavar="ID", help="workflow run id (default: $GITHUB_RUN_ID)")
    parser.add_argument("--token", help="GitHub token (default: $GITHUB_TOKEN, then $INPUT_TOKEN); "
                                        "prefer the environment, a flag shows in the process list")
    parser.add_argument("--api-url", metavar="URL",
                        help=f"REST API base URL (default: $GITHUB_API_URL or {context.DEFAULT_API_URL})")
    parser.add_argument("--dry-run", action="store_true", help="print what would be sent; write nothing")
    deadline_option(parser)
    if author:
        parser.add_argument("--author", metavar="LOGIN", help=AUTHOR_HELP)


def _mode(parser, default="update"):
    parser.add_argument("--mode", choices=("update", "new"), default=default,
                        help="update: edit the bot's earlier comment, keeping one (default); new: post a fresh one")


def register(subparsers):
    p = subparsers.add_parser("comment", help="post or update the Speed stats comment on a pull request",
                              description="Post the Speed stats comment (a rendered body file) on a pull request.")
    p.add_argument("--body-file", required=True, metavar="FILE", help="the comment body ('-' for stdin)")
    p.add_argument("--verdict", choices=("pass", "fail"),
                   help="the run's verdict (its `verdict` output), for --required-label")
    p.add_argument("--required-label", metavar="LABEL",
                   help="after posting, exit 1 when --verdict is fail and the pull request carries LABEL "
                        "(as the old bot's need-pass-speed-test)")
    _mode(p)
    _common(p)
    p.set_defaults(func=comment_command)

    p = subparsers.add_parser("docs-preview", help="post the API docs preview link on a pull request",
                              description="Post 'View latest API docs preview at: "
                                          "{base}/docs/{owner}/{repo}/pr/{n}/' on a pull request.")
    p.add_argument("--base-url", required=True, metavar="URL", help="where the docs previews are served")
    _mode(p)
    _common(p)
    p.set_defaults(func=docs_preview_command)

    p = subparsers.add_parser("automerge-guard", help="remove the automerge label when a CI job failed",
                              description="When the job failed and the pull request carries the label, "
                                          "remove the label and say which job failed (once).")
    p.add_argument("--job", required=True, metavar="NAME", help="name of the job, as the comment reports it")
    p.add_argument("--label", default="automerge", help="the label to remove (default: automerge)")
    p.add_argument("--status", choices=("failure", "success", "cancelled"), default="failure",
                   help="the job's status, e.g. ${{ job.status }} (default: failure, for an `if: failure()` step)")
    _common(p, author=False)
    p.set_defaults(func=automerge_guard_command)

    from speedstats.github import artifact, baseline

    artifact.register(subparsers, _mode)
    baseline.register(subparsers)


# -- shared steps ----------------------------------------------------------------------------------------


def make_client(args, environ=None):
    """A GitHubClient, or None for a dry run without a token. Raises UserError without a token."""
    token = context.resolve_token(args.token, environ)
    api_url = context.resolve_api_url(args.api_url, environ)
    if token is None:
        if args.dry_run:
            return None
        raise UserError("token: none given (set GITHUB_TOKEN, or pass --token)")
    from speedstats.github.client import GitHubClient, RetryPolicy

    return GitHubClient(token, api_url, RetryPolicy.from_env(environ, getattr(args, "github_deadline", None)))


def target_or_none(args):
    """The target pull request, or None (after saying why) when the event has none."""
    try:
        return context.resolve_target(pr=args.pr, repo=args.repo, head_sha=args.head_sha, run_id=args.run_id)
    except context.NoPullRequest as exc:
        print(f"speedstats: {exc}", file=sys.stderr)
        return None


def report_read_only(target, body, what):
    """A fork's read-only token: warn in the job log and put the body in the job summary; exit 0."""
    from speedstats.actions_io import append_summary

    summary = append_summary(body)
    where = "it is in the job summary instead" if summary else "it follows"
    print(f"::warning::speedstats: could not {what} on {target}: the token cannot write there (a pull request "
          f"from a fork gets a read-only token); {where}. To post from forks, see {FORKS_DOC}.")
    if not summary:
        print(body)
    return 0


def guarded(run, client):
    """Run a command body; its errors keep their exit status and lose the token. (Anything else is a
    bug, which the CLI reports as an internal error, the token redacted there too.)"""
    try:
        return run()
    except SpeedstatsError as exc:
        if client is not None:
            raise type(exc)(client.redact(exc)) from None
        raise


def emit_comment_url(outcome):
    from speedstats.actions_io import set_output

    if outcome.url and not set_output("comment-url", outcome.url):
        print(outcome.url)


def post_kind(args, target, client, kind, body, emit_url=True):
    from speedstats.github.client import ReadOnlyToken
    from speedstats.github.post import post_comment

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
    except ReadOnlyToken:
        return report_read_only(target, body, "post the comment")
    if outcome.action != "dry-run":
        print(f"speedstats: {outcome.message}", file=sys.stderr)
        if emit_url:
            emit_comment_url(outcome)
    return 0


# -- commands --------------------------------------------------------------------------------------------


def comment_command(args):
    if args.required_label is not None:
        from speedstats.github.labels import check_label

        check_label(args.required_label)
        if args.verdict is None:
            raise UserError("--required-label: needs --verdict pass|fail (the run's verdict output)")
    body = read_text(args.body_file, "comment body")
    if not body.strip():
        raise UserError(f"{args.body_file}: the comment body is empty")
    target = target_or_none(args)
    if target is None:
        return 0
    client = make_client(args)
    code = guarded(lambda: post_kind(args, target, client, SPEED_STATS, body), client)
    if code == 0 and args.required_label is not None and args.verdict == "fail":
        from speedstats.github.labels import LabelLookup, event_labels, verdict_fails_step

        lookup = LabelLookup(target, event_labels(), None, context.resolve_api_url(args.api_url))
        return guarded(lambda: 1 if verdict_fails_step(args.required_label, lookup, client) else 0, client)
    return code


def docs_preview_command(args):
    from speedstats.github.post import docs_preview_text

    base = args.base_url.rstrip("/")
    if not base.startswith(("https://", "http://")):
        raise UserError(f"--base-url: must be an http(s) URL, got {args.base_url!r}")
    target = target_or_none(args)
    if target is None:
        return 0
    client = make_client(args)
    body = docs_preview_text(base, target.owner, target.name, target.pr_number)
    return guarded(lambda: post_kind(args, target, client, DOCS_PREVIEW, body), client)


def run_guard(args, target, client, job, label, status):
    from speedstats.github.client import ReadOnlyToken
    from speedstats.github.post import automerge_guard, automerge_removed_text

    try:
        author = getattr(args, "author", None) or (client.login() if client is not None else None)
        outcome = automerge_guard(client, target, job, label=label, status=status, dry_run=args.dry_run,
                                  api_url=context.resolve_api_url(args.api_url), author=author)
    except ReadOnlyToken:
        return report_read_only(target, automerge_removed_text(job, label), f"remove the {label!r} label")
    if outcome.action != "dry-run":
        print(f"speedstats: {outcome.message}", file=sys.stderr)
    return 0


def automerge_guard_command(args):
    if not args.job.strip():
        raise UserError("--job: must not be empty")
    if not args.label.strip():
        raise UserError("--label: must not be empty")
    target = target_or_none(args)
    if target is None:
        return 0
    if args.status != "failure":  # nothing to do, and no need for a token
        print(f"speedstats: {target}: job {args.job!r} status is {args.status}; the {args.label!r} label is "
              "left alone", file=sys.stderr)
        return 0
    client = make_client(args)
    return guarded(lambda: run_guard(args, target, client, args.job, args.label, args.status), client)

