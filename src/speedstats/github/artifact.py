"""`speedstats post-from-artifact`: post a fork's results from a `workflow_run` workflow.

The benchmark workflow (read-only token on a fork's pull request) uploads a results bundle as an
artifact. This command runs in the privileged workflow that `workflow_run` starts when the benchmark
finishes: it downloads the artifact through the Actions REST API and checks that the bundle belongs
to the run that made it before posting anything. The run's head commit is GitHub's word, not the
bundle's; the pull request must be one of the run's (same-repository pull requests) or, for a fork,
one whose head repository is the run's and whose commits include the run's head commit. So a fork
can have its results posted on its own pull request only.
"""

from __future__ import annotations

import sys

from speedstats import actions_io
from speedstats.bundle import MAX_ARCHIVE_BYTES, read_artifact_zip, read_bundle_zip
from speedstats.errors import UserError
from speedstats.github import context
from speedstats.github.markers import DOCS_PREVIEW, SPEED_STATS
from speedstats.github.options import add_common_options, add_mode_option
from speedstats.github.post import docs_preview_text
from speedstats.github.session import find_artifact, guarded, make_client, post_kind, run_guard
from speedstats.suite import JUDGING_PROFILE_HELP, JUDGING_SUITE_HELP

DEFAULT_ARTIFACT = "speedstats-bundle"
# A workflow run's conclusion, as the automerge guard's job status.
_GUARD_STATUS = {"failure": "failure", "timed_out": "failure", "startup_failure": "failure",
                 "cancelled": "cancelled", "success": "success"}


def register(subparsers):
    p = subparsers.add_parser(
        "post-from-artifact", help="post a results bundle uploaded by another workflow run (fork-safe)",
        description="Download the results bundle artifact of a workflow run, check that it belongs to that "
                    "run's pull request, and post the Speed stats comment (and optionally the docs-preview "
                    "link and the automerge guard). For a workflow started by `workflow_run`. With "
                    "--dry-run it still downloads and checks the bundle.")
    p.add_argument("--run-id", type=int, metavar="ID",
                   help="the run that uploaded the bundle (default: the triggering workflow_run's id)")
    p.add_argument("--artifact-name", default=DEFAULT_ARTIFACT, metavar="NAME",
                   help=f"name of the bundle artifact (default: {DEFAULT_ARTIFACT})")
    add_mode_option(p)
    text = p.add_mutually_exclusive_group()
    text.add_argument("--verbatim", action="store_true",
                      help="UNSAFE: post the bundle's comment.md as it is. That text was written by the pull "
                           "request's own workflow, so a fork can post anything under the bot's name. By "
                           "default the body is rendered here from the bundle's results.json")
    text.add_argument("--rerender", action="store_true",
                      help="render the body from the bundle's results.json (the default; kept for old "
                           "workflows)")
    p.add_argument("--suite", metavar="FILE", help=JUDGING_SUITE_HELP)
    p.add_argument("--profile", metavar="NAME", help=JUDGING_PROFILE_HELP)
    p.add_argument("--docs-base-url", metavar="URL", help="also post the docs-preview link under this base")
    p.add_argument("--automerge-job", metavar="NAME",
                   help="also run the automerge guard for this job name, with the run's conclusion as status")
    p.add_argument("--automerge-label", default="automerge", metavar="LABEL",
                   help="label the guard removes (default: automerge)")
    add_common_options(p, pull_request=False)
    p.set_defaults(func=post_from_artifact_command)


def fetch_bundle(client, repo, run_id, artifact_name):
    """(run, bundle): the run as GitHub describes it and the bundle its artifact holds."""
    run = client.workflow_run(repo, run_id)
    artifact, where = find_artifact(client, repo, run_id, artifact_name, MAX_ARCHIVE_BYTES,
                                    option="--artifact-name", run_text=f"run {run_id} of {repo}",
                                    limit_text=f"the {MAX_ARCHIVE_BYTES} a bundle may have")
    data = client.download(artifact.download_url, f"download {where}", MAX_ARCHIVE_BYTES)
    return run, read_bundle_zip(data, where)


def fetch_results(client, repo, run_id, artifact_name):
    """The results.json of a run's artifact (the examples' `speedstats-results`, or a results bundle): at
    the archive's root or in its one top-level folder, read as every results file is."""
    from speedstats.results import loads

    artifact, where = find_artifact(client, repo, run_id, artifact_name, MAX_ARCHIVE_BYTES,
                                    option="--artifact-name", run_text=f"run {run_id} of {repo}",
                                    limit_text=f"the {MAX_ARCHIVE_BYTES} a results artifact may have")
    data = client.download(artifact.download_url, f"download {where}", MAX_ARCHIVE_BYTES)

    def from_files(read, where):
        raw = read("results.json")
        if raw is None:
            raise UserError(f"{where}: no results.json in it")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UserError(f"{where}: results.json: not UTF-8 text: {exc.reason}") from None
        return loads(text, where=f"{where}: results.json")

    return read_artifact_zip(data, where, "results.json", from_files)


def verify(client, repo, run, bundle, where):
    """The Target to post on, once the bundle is shown to belong to the run; UserError otherwise."""
    refuse = f"{where}: refusing to post:"
    if bundle.repo != repo:
        raise UserError(f"{refuse} the bundle is for {bundle.repo}, this is {repo}")
    if bundle.run_id != run.id:
        raise UserError(f"{refuse} the bundle says run {bundle.run_id}, it was uploaded by run {run.id}")
    if bundle.head_sha != run.head_sha:
        raise UserError(f"{refuse} the bundle says commit {bundle.head_sha[:12]}, run {run.id} ran "
                        f"{run.head_sha[:12]}")
    target = context.Target(repo=repo, pr_number=bundle.pr_number, head_sha=run.head_sha, run_id=run.id)
    if run.pull_requests:
        if bundle.pr_number not in run.pull_requests:
            listed = ", ".join(f"#{n}" for n in run.pull_requests)
            raise UserError(f"{refuse} the bundle names pull request #{bundle.pr_number}, run {run.id} "
                            f"belongs to {listed}")
        return target
    # A fork's run lists no pull requests; the pull request must come from the run's repository and
    # contain its commit.
    head_sha, head_repo = client.pull(target)
    if head_repo != run.head_repo:
        raise UserError(f"{refuse} pull request #{bundle.pr_number} comes from {head_repo}, run {run.id} "
                        f"from {run.head_repo}")
    if head_sha != run.head_sha and run.head_sha not in client.pull_commits(target):
        raise UserError(f"{refuse} commit {run.head_sha[:12]} of run {run.id} is not in pull request "
                        f"#{bundle.pr_number}")
    return target


def render_body(bundle, args):
    from speedstats.render import render_speed_stats
    from speedstats.suite import judging_suite
    from speedstats.verdict import judge

    results = bundle.results
    suite = judging_suite(results, args.suite, args.profile)
    return render_speed_stats(results, suite, judge(results, suite))


def post_from_artifact_command(args):
    event = actions_io.read_event()
    repo = context.resolve_repo(args.repo, event=event)
    run_id = args.run_id or event.run_id
    if not run_id:
        raise UserError("--run-id: no run (give --run-id ID, or run from a workflow_run event)")
    if args.docs_base_url is not None and not args.docs_base_url.startswith(("https://", "http://")):
        raise UserError(f"--docs-base-url: must be an http(s) URL, got {args.docs_base_url!r}")
    client = make_client(args)
    if client is None:
        raise UserError("token: none given; post-from-artifact needs one to read the run, even with "
                        "--dry-run")

    def run():
        where = f"artifact {args.artifact_name!r} of run {run_id}"
        workflow_run, bundle = fetch_bundle(client, repo, run_id, args.artifact_name)
        if bundle.pr_number is None:
            print(f"speedstats: {where}: the run was not for a pull request; nothing to comment on",
                  file=sys.stderr)
            return 0
        target = verify(client, repo, workflow_run, bundle, where)
        if args.verbatim and bundle.body is None:
            raise UserError(f"--verbatim: {where}: the bundle has no comment.md")
        body = bundle.body if args.verbatim else render_body(bundle, args)
        code = post_kind(args, target, client, SPEED_STATS, body)
        if args.docs_base_url:
            link = docs_preview_text(args.docs_base_url.rstrip("/"), target.owner, target.name,
                                     target.pr_number)
            code = code or post_kind(args, target, client, DOCS_PREVIEW, link, emit_url=False)
        if args.automerge_job:
            status = _GUARD_STATUS.get(workflow_run.conclusion or "", "success")
            code = code or run_guard(args, target, client, args.automerge_job, args.automerge_label, status)
        return code

    return guarded(run, client)
