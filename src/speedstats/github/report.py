"""`speedstats report`: one Speed stats comment for a matrix of GPU runners.

The matrix jobs each leave a shard (see shards.py); the report job, which needs them all and runs
unless the run was cancelled, reads the shards (a folder per artifact, or for a fork's run the run's
artifacts through the API) and posts one comment: each GPU's Speed stats block byte for byte, then a
row per GPU of the matrix with its verdict and state (passed, failed, missing, cancelled), each
linking its job. The GPUs expected come from the same JSON the matrix is built from, so a GPU that
never reported is missing and the overall verdict is incomplete, never pass.

The marker carries the head commit, run id, attempt and verdict: a report never replaces a comment
showing newer results (the pull request's current head first, then the commit order, run id and
attempt; see post.HeadOrder), and racing reports converge on the newer. A body longer than GitHub's
limit is cut per GPU, each cut block closed and pointing at its job. When the verdict turns red, a
short new comment says so (alerts.py).
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field

from speedstats import actions_io
from speedstats.errors import UserError
from speedstats.github import alerts, checks, context, shards
from speedstats.github.client import ReadOnlyToken
from speedstats.github.markers import CLOSERS_ROOM, MAX_COMMENT_CHARS, SPEED_STATS, closers, make_marker
from speedstats.github.options import add_common_options
from speedstats.github.post import post_comment
from speedstats.github.session import (
    emit_comment_url,
    guarded,
    make_client,
    report_read_only,
    run_guard,
    target_or_none,
)
from speedstats.suite import JUDGING_PROFILE_HELP, JUDGING_SUITE_HELP
from speedstats.text import markdown_safe

REPORT_TEMPLATE = "matrix_report.md.j2"
PASSED, FAILED, MISSING, CANCELLED = "passed", "failed", "missing", "cancelled"
STATES = (PASSED, FAILED, MISSING, CANCELLED)
DETAILS_LIMIT = 300
MAX_ATTEMPT = 1000  # GitHub re-runs a workflow run at most 50 times
_JOB_FAILED = ("failure", "timed_out", "startup_failure")


@dataclass
class GpuRow:
    gpu: str
    state: str
    link: str
    name: str = ""  # the GPU's name as its results give it
    verdict: str = ""  # the cell: marks and score
    details: str = ""  # the cell: one line, markdown-safe
    body: str | None = None  # the Speed stats block
    failures: list[str] = field(default_factory=list)  # what failed, one markdown-safe line each


def overall_verdict(rows):
    states = {row.state for row in rows}
    if FAILED in states:
        return "fail"
    return "incomplete" if states & {MISSING, CANCELLED} else "pass"


class Judge:
    """Renders and judges a shard's results against the suite that judges them (suite.judging_suite_source,
    as render and post-from-artifact do), each suite loaded once."""

    def __init__(self, suite_path=None, profile=None):
        self.suite_path, self.profile = suite_path, profile
        self._suites = {}

    def suite(self, results):
        from speedstats.suite import judging_suite_source, load_suite

        key = judging_suite_source(results.suite, self.suite_path, self.profile)
        if key not in self._suites:
            self._suites[key] = load_suite(*key)
        return self._suites[key]

    def render(self, results):
        """(verdict, body): the results judged, and their Speed stats block."""
        from speedstats.render import render_speed_stats
        from speedstats.verdict import judge

        suite = self.suite(results)
        verdict = judge(results, suite)
        return verdict, render_speed_stats(results, suite, verdict)


def _cell(text):
    return markdown_safe(text, DETAILS_LIMIT)


def build_rows(gpus, chosen, jobs, judge, run_url, verbatim=True):
    """One GpuRow per expected GPU, in the matrix's order."""
    from speedstats.render import GPU_NAME_LIMIT
    from speedstats.verdict import FAIL_MARK, PASS_MARK

    rows = []
    for gpu in gpus:
        shard, job = chosen.get(gpu), jobs.get(gpu)
        row = GpuRow(gpu, MISSING, (job.html_url if job is not None and job.html_url else None) or run_url)
        if shard is not None and shard.results_json is not None:
            results = shard.results
            verdict, rendered_body = judge.render(results)
            row.name = markdown_safe(results.gpu_name, GPU_NAME_LIMIT)
            row.body = shard.body if verbatim and shard.body else rendered_body
            score = verdict.score
            row.verdict = PASS_MARK + "pass" if verdict.passed else f"{FAIL_MARK}fail (score {score})"
            if results.cancelled or shard.status == "cancelled":
                row.state = CANCELLED
                row.details = _cell(f"cancelled after {len(results.cases)} cases")
            elif verdict.passed:
                row.state = PASSED
            else:
                row.state = FAILED
                row.failures = [_cell(reason) for reason in verdict.reasons] or [_cell("the verdict failed")]
        elif shard is not None:
            row.state = CANCELLED if shard.status == "cancelled" else FAILED
            text = shard.error or "no results"
            if row.state == FAILED:
                row.failures = [_cell(text)]
            else:
                row.details = _cell(text)
        elif job is not None and job.conclusion in _JOB_FAILED:
            row.state = FAILED
            what = job.conclusion.replace("_", " ")
            row.failures = [_cell(f"the job {what} before it uploaded its results")]
        elif job is not None and job.conclusion == "cancelled":
            row.state = CANCELLED
            row.details = _cell("the job was cancelled before it uploaded its results")
        else:
            seen = f"its job is {job.conclusion or job.status}" if job else "no job of this run ran it"
            row.details = _cell(f"no results from this GPU ({seen})")
        if row.failures:
            row.details = "; ".join(row.failures)
            if len(row.details) > DETAILS_LIMIT:
                row.details = row.details[: DETAILS_LIMIT - 1].rstrip() + "\u2026"
        rows.append(row)
    return rows


# -- the body, cut per GPU to fit ---------------------------------------------------------------------------


def _cut_note(gpu, omitted, total, link):
    return (f"\n\n_({gpu}: cut to fit GitHub's limit of {MAX_COMMENT_CHARS} characters per comment, "
            f"{omitted} of {total} characters left out; the full figures are in [its job]({link}))_")


def cut_block(block, budget, gpu, link):
    """The block cut at a line boundary to at most `budget` characters, its code fence and
    <details> closed, with a note pointing at the job; the block itself when it fits."""
    if len(block) <= budget:
        return block
    total = len(block)
    reserve = len(_cut_note(gpu, total, total, link)) + CLOSERS_ROOM
    kept = block[: max(budget - reserve, 0)]
    kept = kept[: kept.rindex("\n")] if "\n" in kept else ""
    return kept + closers(kept) + _cut_note(gpu, total - len(kept), total, link)


def budgets(sizes, room):
    """Characters each block may keep: the small ones whole, the rest an equal share of what is left."""
    out = dict.fromkeys(range(len(sizes)), 0)
    pending = sorted(range(len(sizes)), key=lambda i: sizes[i])
    while pending:
        share = room // len(pending)
        i = pending[0]
        if sizes[i] <= share:
            out[i] = sizes[i]
            room -= sizes[i]
            pending.pop(0)
        else:
            for j in pending:
                out[j] = share
            break
    return [out[i] for i in range(len(sizes))]


def render_report(rows, verdict, head_sha, run_id, attempt, run_url, marker_chars, templates_dir=None):
    """The report body, cut per GPU when body and marker would pass GitHub's limit."""
    from speedstats.render import render_template
    from speedstats.text import trusted

    counts = {state: sum(1 for row in rows if row.state == state) for state in STATES}
    # Each block was rendered here (or posted --verbatim, UNSAFE by its own help); the links are the
    # run's and its jobs', from GitHub: printed as they are. Every other string is escaped.
    shown = [dict(vars(row), link=trusted(row.link)) for row in rows]

    def render(bodies):
        blocks = [{"gpu": row.gpu, "body": trusted(body)} for row, body in zip(with_body, bodies)]
        return render_template(REPORT_TEMPLATE, {
            "blocks": blocks, "rows": shown, "verdict": verdict, "counts": counts, "head_sha": head_sha,
            "run_id": run_id, "attempt": attempt, "run_url": trusted(run_url)}, templates_dir)

    with_body = [row for row in rows if row.body is not None]
    full = render([row.body for row in with_body])
    limit = MAX_COMMENT_CHARS - marker_chars
    if len(full) <= limit:
        return full
    room = limit - len(render(["" for _ in with_body]))
    allowed = budgets([len(row.body) for row in with_body], room)
    return render([cut_block(row.body, allowed_i, row.gpu, row.link)
                   for row, allowed_i in zip(with_body, allowed)])


# -- the command --------------------------------------------------------------------------------------------


def register(subparsers):
    p = subparsers.add_parser(
        "report", help="post one Speed stats comment for a matrix of GPU runners",
        description="Read the shards of a matrix run (the folders download-artifact made, or the run's "
                    "artifacts for a fork) and post one comment: each GPU's Speed stats block, then a table "
                    "of the GPUs with their verdict and state. Exit 0 when posted (whatever the verdict).")
    gpus = p.add_mutually_exclusive_group(required=True)
    gpus.add_argument("--gpus", metavar="JSON", help="the GPU keys of the matrix, the JSON it is built from: "
                                                     "[\"a100\", ...] or {\"gpu\": [...]}")
    gpus.add_argument("--gpus-file", metavar="FILE", help="the same JSON, from a file")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--shards", metavar="DIR",
                        help="folder holding a folder per shard artifact (download-artifact with a pattern, "
                             "without merge-multiple); default: speedstats-shards")
    source.add_argument("--from-run", action="store_true",
                        help="download the shards of run --run-id (default: the triggering workflow_run) "
                             "through the API, each checked against the run (for forks)")
    p.add_argument("--attempt", type=_attempt, metavar="N",
                   help="the run's attempt (default: $GITHUB_RUN_ATTEMPT; with --from-run, the run's)")
    p.add_argument("--job-name", default=shards.DEFAULT_JOB_NAME, metavar="FORMAT",
                   help="the matrix jobs' names, {gpu} for the key (default: %(default)r); their states "
                        "and links come from the run's jobs (actions: read)")
    p.add_argument("--suite", metavar="FILE", help=JUDGING_SUITE_HELP)
    p.add_argument("--profile", metavar="NAME", help=JUDGING_PROFILE_HELP)
    p.add_argument("--rerender", action="store_true",
                   help="render each block from its results.json (always so with --from-run) instead of "
                        "posting the job's comment.md")
    p.add_argument("--notify-on-flip", default="author", metavar="WHO",
                   help="when the verdict turns from pass or incomplete to fail, post a new comment "
                        "mentioning: author (the pull request's, default), a list of logins, or off")
    p.add_argument("--automerge-job", metavar="NAME",
                   help="also remove the automerge label (saying this job failed) when a GPU failed")
    p.add_argument("--automerge-label", default="automerge", metavar="LABEL",
                   help="label that --automerge-job removes (default: automerge)")
    p.add_argument("--no-check-run", action="store_true",
                   help="create no check run 'speedstats / <GPU>' per GPU (by default each GPU gets one on "
                        "the head commit; the token needs `checks: write`)")
    add_common_options(p)
    p.set_defaults(func=report_command, mode="update")


def _gpus(args):
    if args.gpus_file:
        from speedstats.fsutil import read_text

        return shards.parse_gpus(read_text(args.gpus_file, "--gpus-file"), f"--gpus-file {args.gpus_file}")
    return shards.parse_gpus(args.gpus)


def _attempt(text):
    """An argparse type: a run's attempt, 1 to MAX_ATTEMPT."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if not 1 <= value <= MAX_ATTEMPT:
        raise argparse.ArgumentTypeError(f"must be between 1 and {MAX_ATTEMPT}, got {text!r}")
    return value


def report_command(args):
    shards.check_job_name(args.job_name)
    gpus = _gpus(args)
    mentions = alerts.parse_notify(args.notify_on_flip)
    event = actions_io.read_event()
    repo = context.resolve_repo(args.repo, event=event)
    api_url = context.resolve_api_url(args.api_url)
    client = make_client(args)
    if args.from_run:
        run_id = args.run_id or event.run_id
        if not run_id:
            raise UserError("--run-id: no run (give --run-id ID, or run from a workflow_run event)")
        if client is None:
            raise UserError("token: none given; --from-run needs one to read the run, even with --dry-run")
    else:
        run_id = args.run_id or actions_io.run_id()
        if not run_id:
            raise UserError("--run-id: no run (give --run-id ID, or run inside GitHub Actions)")
    run_url = context.run_url(repo, run_id, api_url)

    def run():
        jobs = {}
        if args.from_run:
            workflow_run = client.workflow_run(repo, run_id)
            attempt = args.attempt or workflow_run.run_attempt
            found = shards.collect_artifacts(client, repo, run_id, attempt)
            head_sha = workflow_run.head_sha
        else:
            attempt = args.attempt or actions_io.run_attempt() or 1
            found = shards.collect_folders(args.shards or "speedstats-shards")
            head_sha = found[0].head_sha if found else None
        shards.check_same_run(found, repo, run_id, head_sha, f"run {run_id} of {repo}")
        target = _target(args, client, repo, run_id, found, event, head_sha,
                         workflow_run if args.from_run else None)
        if target is None:
            return 0
        if client is not None:
            jobs = _jobs(client, repo, run_id, gpus, args.job_name)
        unknown = sorted({s.gpu for s in found} - set(gpus))
        if unknown:
            print(f"speedstats: shards of GPUs not in the matrix are left out: {', '.join(unknown)}",
                  file=sys.stderr)
        chosen = shards.latest_per_gpu(found, jobs, attempt)
        judge = Judge(args.suite, args.profile)
        rows = build_rows(gpus, chosen, jobs, judge, run_url, verbatim=not (args.rerender or args.from_run))
        verdict = overall_verdict(rows)
        # A fork's run wrote its own results: its passes are not vouched for (checks.untrusted_pass).
        forked = args.from_run and workflow_run.head_repo != repo
        return post_report(args, client, target, rows, verdict, attempt, run_url, mentions, api_url, forked)

    return guarded(run, client)


def _target(args, client, repo, run_id, found, event, head_sha, workflow_run):
    if args.from_run:
        if not found:
            raise UserError(f"run {run_id} of {repo}: no shard artifact ({shards.ARTIFACT_PREFIX}*); "
                            "nothing to report")
        if found[0].pr_number is None:
            print(f"speedstats: run {run_id} was not for a pull request; nothing to comment on",
                  file=sys.stderr)
            return None
        from speedstats.github.artifact import verify

        return verify(client, repo, workflow_run, found[0], f"the shards of run {run_id}")
    if head_sha is None and args.head_sha is None:
        args.head_sha = event.head_sha or actions_io.commit_sha()
    target = target_or_none(args)
    if target is None:
        return None
    if head_sha is not None:
        target.head_sha = head_sha
    target.run_id = run_id
    if found and found[0].pr_number not in (None, target.pr_number):
        raise UserError(f"the shards name pull request #{found[0].pr_number}, this is {target}")
    return target


def _jobs(client, repo, run_id, gpus, job_name):
    try:
        return shards.jobs_by_gpu(client.run_jobs(repo, run_id), gpus, job_name)
    except (UserError, ReadOnlyToken) as exc:  # no actions: read; the shards alone still tell a lot
        print(actions_io.workflow_command(
            "warning", f"speedstats: could not list the jobs of run {run_id} ({exc}); a GPU whose job left "
            "no shard shows as missing, and rows link the run"), file=sys.stderr)
        return {}


def row_check(row, forked=False):
    """The check run of a GPU's row: success passed, failure failed, neutral missing or cancelled."""
    if row.state == PASSED:
        check = checks.Check(row.gpu, checks.SUCCESS, "pass", [])
        return checks.untrusted_pass(check) if forked else check
    if row.state == FAILED:
        return checks.Check(row.gpu, checks.FAILURE, "fail", list(row.failures))
    return checks.Check(row.gpu, checks.NEUTRAL, f"no verdict: {row.state}",
                        [row.details] if row.details else [])


def post_report(args, client, target, rows, verdict, attempt, run_url, mentions, api_url, forked=False):
    fields = {"attempt": attempt, "verdict": verdict}
    marker = make_marker(SPEED_STATS, head=target.head_sha, run=target.run_id, **fields).render()
    body = render_report(rows, verdict, target.head_sha, target.run_id, attempt, run_url, len(marker))
    failed = [row.gpu for row in rows if row.state == FAILED]
    actions_io.set_output("verdict", verdict)
    actions_io.set_output("failed-gpus", ",".join(failed))
    author = args.author
    if author is not None and not author.strip():
        raise UserError("--author: must not be empty")
    current_head = pr_author = None
    if client is not None:
        current_head, pr_author = client.pull_author(target)
        author = author or client.login()
    try:
        outcome = post_comment(client, target, SPEED_STATS, body, author=author, dry_run=args.dry_run,
                               api_url=api_url, extra_fields=fields, current_head=current_head)
    except ReadOnlyToken as refused:
        return report_read_only(target, body, "post the report", refused)
    if outcome.action != "dry-run":
        print(f"speedstats: {outcome.message} (verdict {verdict})", file=sys.stderr)
        emit_comment_url(outcome)
    if not args.no_check_run and outcome.action != "kept-newer":  # else the newer run's checks stand
        checks.publish(client, target, [row_check(row, forked) for row in rows], outcome.url, run_url,
                       dry_run=args.dry_run, api_url=api_url)
    if outcome.action == "dry-run":
        return 0
    shown = outcome.comment is not None and outcome.comment.body == body + marker
    if shown and outcome.action in ("created", "updated"):
        logins = None if mentions == alerts.OFF else [pr_author] if mentions == alerts.AUTHOR else mentions
        alerts.announce(client, target, outcome, verdict, rows, logins, author, run_url)
    if failed and args.automerge_job:
        return run_guard(args, target, client, args.automerge_job, args.automerge_label, "failure")
    return 0
