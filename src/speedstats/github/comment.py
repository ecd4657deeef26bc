"""`speedstats comment` and `speedstats docs-preview`: post (or update) a comment on a pull request."""

from speedstats import actions_io
from speedstats.errors import UserError
from speedstats.fsutil import read_text
from speedstats.github import checks, context
from speedstats.github.labels import LabelLookup, check_label, verdict_fails_step
from speedstats.github.markers import DOCS_PREVIEW, SPEED_STATS
from speedstats.github.options import add_common_options, add_mode_option
from speedstats.github.post import docs_preview_text
from speedstats.github.session import guarded, make_client, post_kind, post_outcome, target_or_none
from speedstats.suite import JUDGING_PROFILE_HELP, JUDGING_SUITE_HELP


def register(subparsers):
    p = subparsers.add_parser(
        "comment", help="post or update the Speed stats comment on a pull request",
        description="Post the Speed stats comment (a rendered body file) on a pull request.")
    p.add_argument("--body-file", required=True, metavar="FILE", help="the comment body ('-' for stdin)")
    p.add_argument("--verdict", choices=("pass", "fail"),
                   help="the run's verdict (its `verdict` output), for --required-label")
    p.add_argument("--required-label", metavar="LABEL",
                   help="after posting, exit 1 when --verdict is fail and the pull request carries LABEL "
                        "(as the old bot's need-pass-speed-test)")
    p.add_argument("--results", metavar="FILE",
                   help="the run's results.json: after posting, create or update the check run "
                        "'speedstats / <GPU>' on the head commit with its verdict (the token needs "
                        "`checks: write`)")
    p.add_argument("--suite", metavar="FILE", help=JUDGING_SUITE_HELP)
    p.add_argument("--profile", metavar="NAME", help=JUDGING_PROFILE_HELP)
    add_check_run_option(p)
    add_mode_option(p)
    add_common_options(p)
    p.set_defaults(func=comment_command)

    p = subparsers.add_parser("docs-preview", help="post the API docs preview link on a pull request",
                              description="Post 'View latest API docs preview at: "
                                          "{base}/docs/{owner}/{repo}/pr/{n}/' on a pull request.")
    p.add_argument("--base-url", required=True, metavar="URL", help="where the docs previews are served")
    add_mode_option(p)
    add_common_options(p)
    p.set_defaults(func=docs_preview_command)


def add_check_run_option(parser):
    parser.add_argument("--no-check-run", action="store_true",
                        help="create no check run 'speedstats / <GPU>' (for a token that cannot: a personal "
                             "access token, or one without `checks: write`)")


def comment_command(args):
    if args.required_label is not None:
        check_label(args.required_label)
        if args.verdict is None:
            raise UserError("--required-label: needs --verdict pass|fail (the run's verdict output)")
    body = read_text(args.body_file, "comment body")
    if not body.strip():
        raise UserError(f"{args.body_file}: the comment body is empty")
    check = None
    if args.results is not None and not args.no_check_run:
        check = checks.from_results_file(args.results, args.suite, args.profile)
    target = target_or_none(args)
    if target is None:
        return 0
    client = make_client(args)

    def post():
        outcome = post_outcome(args, target, client, SPEED_STATS, body)
        if check is None or outcome is None or outcome.action == "kept-newer":
            return 0  # refused on a fork, or a newer run's comment (whose run keeps the check runs)
        api_url = context.resolve_api_url(args.api_url)
        run_url = context.run_url(target.repo, target.run_id, api_url) if target.run_id else None
        return checks.publish(client, target, [check], outcome.url, run_url, dry_run=args.dry_run,
                              api_url=api_url)

    code = guarded(post, client)
    if code == 0 and args.required_label is not None and args.verdict == "fail":
        lookup = LabelLookup(target, list(actions_io.read_event().labels), None,
                             context.resolve_api_url(args.api_url))
        return guarded(lambda: 1 if verdict_fails_step(args.required_label, lookup, client) else 0, client)
    return code


def docs_preview_command(args):
    base = args.base_url.rstrip("/")
    if not base.startswith(("https://", "http://")):
        raise UserError(f"--base-url: must be an http(s) URL, got {args.base_url!r}")
    target = target_or_none(args)
    if target is None:
        return 0
    client = make_client(args)
    body = docs_preview_text(base, target.owner, target.name, target.pr_number)
    return guarded(lambda: post_kind(args, target, client, DOCS_PREVIEW, body), client)
