"""Posting: the Speed-stats comment (update or new), the docs-preview link and the automerge guard.

Update mode keeps one comment per kind on a pull request. It finds the bot's comment by its marker
on a comment by `author` (the CLI passes the token's own login, so a marker that someone else copied
into their comment is neither taken as newer results nor edited) or, for a pull request that the old
bot commented on, by the old bot's text; it edits that comment, or creates one. Find-then-create is not
atomic, so after every write it lists again and, when two runs both created one, keeps the newest body
(by the head commit's place in the pull request) in the oldest comment and deletes the others. Every run
that sees the duplicates makes the same choice, so concurrent runs converge on one comment.
"""
from __future__ import annotations

import secrets
import sys
from dataclasses import dataclass

from speedstats.github.markers import (
    AUTOMERGE_REMOVED,
    DOCS_PREVIEW,
    fit_body,
    is_legacy,
    make_marker,
    parse_marker,
)

MODES = ("update", "new")


@dataclass
class Outcome:
    action: str  # created, updated, unchanged, kept-newer, skipped, dry-run
    message: str
    comment: object | None = None  # client.Comment
    previous: object | None = None  # the marker of the comment found before writing (a Marker), if any
    listing: list | None = None  # the comments as listed before writing

    @property
    def url(self):
        return self.comment.html_url if self.comment is not None else None


def docs_preview_text(base_url, owner, repo, number):
    from speedstats.render import render_docs_preview

    return render_docs_preview(base_url, owner, repo, number)


def automerge_removed_text(job, label="automerge"):
    from speedstats.render import render_automerge_removed

    return render_automerge_removed(job, label)


def _same_author(comment, author):
    return author is None or comment.login.lower() == author.lower()


def own_comments(comments, kind, author=None):
    """The bot's comments of a kind: the marker on a comment by `author` (None: any author, for tests
    and tools that read a thread they trust)."""
    out = []
    for comment in comments:
        marker = parse_marker(comment.body)
        if marker is not None and marker.kind == kind and _same_author(comment, author):
            out.append(comment)
    return out


def legacy_comments(comments, kind, author=None):
    """The old bot's comments of a kind: its text, no marker, posted by a bot (or by `author`)."""
    return [c for c in comments
            if parse_marker(c.body) is None and is_legacy(kind, c.body)
            and (c.login.lower() == author.lower() if author else c.user_type == "Bot")]


class HeadOrder:
    """Orders results by their head commit's place in the pull request (later is newer, unknown
    first), then by run id (a later run of the same commit is newer), then by run attempt.

    current_head, the pull request's head as the API gives it now, when known, outranks the commit
    list: results of the current head are newer than any other, even past the 250 commits that the
    list shows or after a force-push."""

    def __init__(self, client, target, current_head=None):
        self.client, self.target = client, target
        self.current_head = current_head
        self._index = None

    def rank(self, sha):
        if sha is None:
            return -1
        if self._index is None:
            commits = self.client.pull_commits(self.target)
            self._index = {c: i for i, c in enumerate(commits)}
        return self._index.get(sha, -1)

    def keys(self, markers):
        """A sort key per marker; the commit list is fetched only when the heads differ."""
        # Results of the current head outrank the others, so the commit list is needed only between
        # two other heads.
        heads = {m.head_sha for m in markers}
        several_heads = len(heads - {self.current_head} if self.current_head is not None else heads) > 1
        return [(self.current_head is not None and m.head_sha == self.current_head,
                 self.rank(m.head_sha) if several_heads else 0, m.run_id or -1, m.run_attempt or -1)
                for m in markers]

    def newer(self, marker_a, marker_b):
        """True when marker_a's results are known to be newer than marker_b's."""
        key_a, key_b = self.keys([marker_a, marker_b])
        return key_a > key_b


def resolve_duplicates(client, target, kind, comments, author=None, order=None, own_body=None):
    """Keep one comment of a kind: the newest body in the oldest comment; delete the others.

    own_body, what this run wrote, is a candidate even when a concurrent run has since deleted or
    overwritten the comment that carried it, so an older run's late write does not stick. Every run
    seeing the same comments makes the same choice. Returns the surviving comment (or None).
    """
    mine = own_comments(comments, kind, author)
    if not mine:
        return None
    candidates = [(parse_marker(c.body), c.id, c.body) for c in mine]
    if own_body is not None:
        candidates.append((parse_marker(own_body), float("inf"), own_body))
    order = order or HeadOrder(client, target)
    keys = order.keys([marker for marker, _, _ in candidates])
    winner = max(zip(keys, candidates), key=lambda pair: (pair[0], pair[1][1]))[1][2]
    keep = min(mine, key=lambda c: c.id)
    if keep.body != winner:
        client.edit_comment(keep, winner)
    for comment in mine:
        if comment is not keep:
            client.delete_comment(comment)
    if len(mine) > 1:
        client.notice(f"{target}: {len(mine)} {kind} comments found (concurrent runs); kept "
                      f"comment {keep.id}")
    return keep


def _print_plan(out, lines, body=None):
    print("speedstats: dry run, nothing is sent", file=out)
    for line in lines:
        print(line, file=out)
    if body is not None:
        print(file=out)
        print(body, file=out)


def post_comment(client, target, kind, body, mode="update", author=None, dry_run=False, out=None,
                 api_url="", extra_fields=None, current_head=None):
    """Post or update one comment of a kind with its marker. client may be None for an offline dry run.

    extra_fields go into the marker after head and run; current_head (the pull request's head now)
    makes a comment showing that head win over results of any other (see HeadOrder).
    """
    out = out or sys.stdout
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    fields = {"head": target.head_sha, "run": target.run_id} if kind != DOCS_PREVIEW else {}
    fields.update(extra_fields or {})
    if mode == "new":
        fields["post"] = secrets.token_hex(6)
    full = fit_body(body, make_marker(kind, **fields).render())
    create_url = f"POST {api_url}/repos/{target.repo}/issues/{target.pr_number}/comments"
    if client is None:
        what = "(no token: existing comments were not looked up)" if mode == "update" else ""
        _print_plan(out, [f"{create_url} {what}".rstrip()], full)
        return Outcome("dry-run", "dry run")

    comments = client.list_comments(target)
    if mode == "new":
        if dry_run:
            _print_plan(out, [create_url], full)
            return Outcome("dry-run", "dry run")
        created = client.create_comment(target, full,
                                        lambda cs: next((c for c in cs if c.body == full), None))
        return Outcome("created", f"{target}: created comment {created.id}", created)

    mine = own_comments(comments, kind, author)
    legacy = legacy_comments(comments, kind, author)
    existing = (min(mine, key=lambda c: c.id) if mine
                else (max(legacy, key=lambda c: c.id) if legacy else None))
    order = HeadOrder(client, target, current_head)
    existing_marker = parse_marker(existing.body) if existing is not None else None
    if existing is not None:
        if existing.body == full or (existing_marker is None and existing.body == body):
            outcome = Outcome("unchanged", f"{target}: comment {existing.id} is already up to date", existing)
        elif existing_marker is not None and order.newer(existing_marker, parse_marker(full)):
            outcome = Outcome("kept-newer", f"{target}: comment {existing.id} has newer results (commit "
                                            f"{(existing_marker.head_sha or '?')[:12]}, run "
                                            f"{existing_marker.run_id}); left as it is", existing)
        elif dry_run:
            _print_plan(out, [f"PATCH {api_url}/repos/{target.repo}/issues/comments/{existing.id}"], full)
            return Outcome("dry-run", "dry run", existing)
        else:
            client.edit_comment(existing, full)
            outcome = Outcome("updated", f"{target}: updated comment {existing.id}", existing)
    elif dry_run:
        _print_plan(out, [create_url], full)
        return Outcome("dry-run", "dry run")
    else:
        created = client.create_comment(target, full, lambda cs: next(
            (c for c in own_comments(cs, kind, author) if c.body == full), None))
        outcome = Outcome("created", f"{target}: created comment {created.id}", created)
    if outcome.action in ("created", "updated") or len(mine) > 1:
        survivor = resolve_duplicates(client, target, kind, client.list_comments(target), author, order,
                                      own_body=full if outcome.action in ("created", "updated") else None)
        if survivor is not None:
            outcome.comment = survivor
    outcome.previous, outcome.listing = existing_marker, comments
    return outcome


def automerge_guard(client, target, job, label="automerge", status="failure", dry_run=False, out=None,
                    api_url="", author=None):
    """When the job failed and the pull request has the label: remove it, then say so once."""
    out = out or sys.stdout
    if status != "failure":
        return Outcome("skipped", f"{target}: job {job!r} status is {status}; automerge label left alone")
    body = automerge_removed_text(job, label)
    full = fit_body(body, make_marker(AUTOMERGE_REMOVED, job=job, head=target.head_sha,
                                      run=target.run_id).render())
    delete_url = f"DELETE {api_url}/repos/{target.repo}/issues/{target.pr_number}/labels/{label}"
    create_url = f"POST {api_url}/repos/{target.repo}/issues/{target.pr_number}/comments"
    if client is None:
        _print_plan(out, [f"{delete_url} (when the label is present; no token to look)", create_url], full)
        return Outcome("dry-run", "dry run")
    present = [name for name in client.labels(target) if name.lower() == label.lower()]
    if not present:
        return Outcome("skipped", f"{target}: no {label!r} label; nothing to do")
    if dry_run:
        _print_plan(out, [delete_url, create_url], full)
        return Outcome("dry-run", "dry run")
    if not client.remove_label(target, present[0]):
        return Outcome("skipped", f"{target}: the {label!r} label was removed by another run")
    said = [c for c in client.list_comments(target) if c.body == full and _same_author(c, author)]
    if said:
        return Outcome("unchanged", f"{target}: removed label {label!r}; already said so", said[0])
    created = client.create_comment(target, full, lambda cs: next((c for c in cs if c.body == full), None))
    return Outcome("created", f"{target}: removed label {label!r} and commented", created)
