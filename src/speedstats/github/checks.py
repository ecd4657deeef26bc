"""A check run per GPU, `speedstats / <GPU>`, on the pull request's head commit: what branch protection
can require, since a failed verdict is a green step where `required-label` forgives it.

`comment --results` (the action's run-and-comment) makes one, named after the GPU as the results name
it; `report` one per GPU of the matrix, named after its key. The conclusion follows the verdict alone:
success when it passed, failure when it failed (whether or not the step failed), neutral when there is
none (cancelled, missing) and for a pass that a fork's run reported (it wrote its own figures; its
failures still count). GitHub lets a required check with a neutral conclusion pass.

GitHub keeps every check run created, and shows the newest of a name. A re-run updates the newest
check run of the name on the commit rather than adding one; one that already says the same is left
alone. Only a GitHub App's token may write check runs: the Actions GITHUB_TOKEN (with `checks:
write`) or an app's installation token; a personal access token gets 403.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone

from speedstats.actions_io import workflow_command
from speedstats.errors import UserError
from speedstats.github import context
from speedstats.github.client import AppTokenOnly, ReadOnlyToken
from speedstats.text import markdown_safe, one_line

SUCCESS, FAILURE, NEUTRAL = "success", "failure", "neutral"
NAME_PREFIX = "speedstats / "
NAME_LIMIT = 100  # characters of the GPU's part of the name
TITLE_LIMIT = 200
REASON_LIMIT = 300
MAX_SUMMARY_CHARS = 65535  # GitHub refuses a longer output summary (422)
DISABLE_HINT = "turn the check runs off with --no-check-run (the action's `check-run: false`)"


@dataclass
class Check:
    """One GPU's check run: its conclusion, the output's title, and the reasons (markdown-safe lines)."""

    gpu: str
    conclusion: str
    title: str
    lines: list[str] = field(default_factory=list)

    @property
    def name(self):
        return NAME_PREFIX + one_line(self.gpu, NAME_LIMIT)


def untrusted_pass(check):
    """A pass reported by a fork's run made neutral: its run wrote its own figures."""
    if check.conclusion != SUCCESS:
        return check
    note = ("The results come from a fork's run, which can write any figures: its pass is not vouched for "
            "(a failure would be reported as one).")
    return Check(check.gpu, NEUTRAL, f"{check.title}, not vouched for", [note, *check.lines])


def from_verdict(gpu, results, verdict):
    """The check of one run's results and its verdict."""
    if results.cancelled:
        return Check(gpu, NEUTRAL, "no verdict: the run was cancelled",
                     [markdown_safe(f"cancelled after {len(results.cases)} cases", REASON_LIMIT)])
    lines = [markdown_safe(reason, REASON_LIMIT) for reason in verdict.reasons]
    if verdict.passed:
        return Check(gpu, SUCCESS, f"pass (score {verdict.score})", lines)
    return Check(gpu, FAILURE, f"fail (score {verdict.score})", lines or ["the verdict failed"])


def from_results_file(path, suite_path=None, profile=None):
    """The check of a run's results.json, judged by the suite that judges it (as render does)."""
    from speedstats import results as results_model
    from speedstats.suite import judging_suite
    from speedstats.verdict import judge

    results = results_model.load(path)
    verdict = judge(results, judging_suite(results, suite_path, profile))
    return from_verdict(results.gpu_name or results.device, results, verdict)


def summary(check, head_sha, link, link_text):
    """The output's summary: the verdict, the commit, the link, then the reasons, one line each,
    as many as fit GitHub's limit."""
    head = f" at commit {head_sha[:12]}" if head_sha else ""
    text = f"**{markdown_safe(check.title, TITLE_LIMIT)}** on {markdown_safe(check.gpu, NAME_LIMIT)}{head}"
    text += f"; [{link_text}]({link})." if link else "."
    lines = [f"- {line}" for line in check.lines]
    kept = []
    room = MAX_SUMMARY_CHARS - len(text) - 200  # the note on what was left out
    for line in lines:
        room -= len(line) + 1
        if room < 0:
            break
        kept.append(line)
    if len(kept) < len(lines):
        kept.append(f"- and {len(lines) - len(kept)} more, in the comment")
    return text + ("\n\n" + "\n".join(kept) if kept else "")


def _fields(check, head_sha, link, link_text):
    fields = {"conclusion": check.conclusion,
              "output": {"title": one_line(f"{check.gpu}: {check.title}", TITLE_LIMIT),
                         "summary": summary(check, head_sha, link, link_text)}}
    if link:
        fields["details_url"] = link
    return fields


def _same(existing, fields):
    output = fields["output"]
    return (existing.status == "completed" and existing.conclusion == fields["conclusion"]
            and existing.details_url == fields.get("details_url", existing.details_url)
            and existing.title == output["title"] and existing.summary == output["summary"])


def publish(client, target, checks, comment_url, run_url, dry_run=False, api_url="", out=None, err=None):
    """Create or update each check run on the target's head commit, linking the comment (or the run when
    there is none); the exit status. A fork's read-only token is warned of (0); any other token without
    `checks: write`, or a personal access token, is a UserError."""
    out, err = out or sys.stdout, err or sys.stderr
    link, link_text = (comment_url, "the Speed stats comment") if comment_url else (run_url, "the run")
    for check in checks:
        fields = _fields(check, target.head_sha, link, link_text)
        if client is None or dry_run:
            print(f"POST {api_url}/repos/{target.repo}/check-runs ({check.name!r}: {check.conclusion}, "
                  f"or PATCH the newest of that name on commit {target.head_sha or '(the head)'})", file=out)
            continue
        try:
            verb = _write(client, target, check.name, fields)
        except ReadOnlyToken as refused:
            return _refused(target, check, refused, err)
        except AppTokenOnly as exc:
            raise UserError(f"{exc}: only a GitHub App's token can create check runs (the job's "
                            "GITHUB_TOKEN with `checks: write` is one); a personal access token cannot. "
                            f"Give the job's token, or {DISABLE_HINT}") from None
        print(f"speedstats: {target}: {verb} check run {check.name!r} ({check.conclusion}) on commit "
              f"{target.head_sha[:12]}", file=err)
    return 0


def _write(client, target, name, fields):
    existing = client.check_runs(target.repo, target.head_sha, name)
    if existing and _same(existing[0], fields):
        return "left"
    fields = dict(fields, completed_at=datetime.now(timezone.utc))
    if existing:
        client.edit_check_run(existing[0], fields)
        return "updated"
    before = {c.id for c in existing}
    client.create_check_run(target.repo, name, target.head_sha, fields, lambda: next(
        (c for c in client.check_runs(target.repo, target.head_sha, name) if c.id not in before), None))
    return "created"


def _refused(target, check, refused, err):
    what = f"create the check run {check.name!r}"
    if not context.read_only_because_fork(target):
        raise UserError(f"could not {what} on {target}: {refused}; the token needs `{refused.permission}` "
                        f"(add it to the job's `permissions:`), or {DISABLE_HINT}")
    print(workflow_command("warning", f"speedstats: could not {what} on {target}: the token cannot write "
                           "there (a pull request from a fork gets a read-only token)"), file=err)
    return 0
