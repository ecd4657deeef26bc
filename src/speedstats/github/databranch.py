"""Main's history kept in a data branch of the repository, written through the Git Data API with the job's
token (`contents: write`): no server, no artifact that expires.

The branch (`speedstats-data` by default) holds:

    README.md                        what the branch is, written with its first commit
    history/<GPU>.jsonl              one history file per GPU (history.history_file_name), the lines that
                                     `run --history` writes; bounded: past `max_runs` runs the oldest are
                                     summarised into one line (history.appended), never dropped silently
    plots/<GPU>/<case>-<commit>.png  the plot a tracking issue shows (github/tracking.py)

Writing is read, change, commit, move: read the branch's head and the files to change, commit the new
files on top of that head, and move the branch to the commit as a fast-forward only. When another job
moved it in between (two GPUs' jobs finishing at once), GitHub refuses with 422 "Update is not a fast
forward" (or "Reference already exists" when both created the branch), and the writer reads the new head
and makes its change again on top of it, up to MAX_ATTEMPTS times with a random wait between tries; so
every job's run lands and none overwrites another's. A try whose move GitHub stored but did not confirm
(a 5xx after the write) finds its own commit at the head and stops there.
"""
from __future__ import annotations

import random
import sys
from dataclasses import dataclass
from typing import Callable

from speedstats.errors import GitHubUnreachable
from speedstats.github.client import RefMoved
from speedstats.history import SHORT_SHA, appended

DEFAULT_BRANCH = "speedstats-data"
MAX_ATTEMPTS = 12
RETRY_WAIT_S = (0.5, 3.0)  # a random wait in this range, times the attempt, before trying again
README_PATH = "README.md"
README = """# speedstats data

This branch is written by speedstats (`speedstats record`, the action on the default branch): one
history file per GPU in `history/`, a JSON line per run of the default branch (its commit, when it was
recorded, its results), and the plots that its tracking issues show in `plots/`. When a file passes its
bound, its oldest runs are summarised into one line that says so.

Read it with `git fetch origin speedstats-data` and `git show origin/speedstats-data:history/<GPU>.jsonl`,
then `speedstats changes FILE` (the shifts) or `speedstats trend FILE --out DIR` (the plots). Do not
commit here by hand while jobs write: each job only fast-forwards the branch.
"""


@dataclass
class Written:
    """What one change of the branch did: the commit (None when nothing changed) and how many tries it
    took."""

    commit: str | None
    attempts: int
    files: dict[str, bytes]


class DataBranch:
    """One data branch of one repository, changed through a GitHubClient."""

    def __init__(self, client, repo, branch=DEFAULT_BRANCH, err=None):
        self.client, self.repo, self.branch = client, repo, branch
        self.err = err or sys.stderr

    def __str__(self):
        return f"{self.repo}@{self.branch}"

    def read(self, head, path):
        """The bytes of the file at path on head (a BranchHead, or None for no branch), or None."""
        if head is None:
            return None
        blob = self.client.branch_files(self.repo, head).get(path)
        if blob is None:
            return None
        return self.client.blob(self.repo, blob, f"read {path} of the data branch {self}")

    def change(self, message, make: Callable[[object], dict[str, bytes] | None], attempts=MAX_ATTEMPTS):
        """Commit the files make(head) returns ({path: bytes}; None or {}: nothing to do) on the branch's
        head, creating the branch with its README when there is none; make is called again on the new head
        after another writer moved the branch. Returns a Written."""
        for attempt in range(1, attempts + 1):
            head = self.client.branch_head(self.repo, self.branch)
            files = make(head)
            if not files:
                return Written(None, attempt, {})
            if head is None:
                files = {README_PATH: README.encode("utf-8"), **files}
            commit = self.client.commit_files(self.repo, head, self.branch, files, message)
            try:
                self.client.move_branch(self.repo, head, self.branch, commit)
                return Written(commit, attempt, files)
            except RefMoved as moved:
                now = self.client.branch_head(self.repo, self.branch)
                if now is not None and now.sha == commit:  # our move was stored though GitHub did not say so
                    return Written(commit, attempt, files)
                if attempt == attempts:
                    break
                wait = random.uniform(*RETRY_WAIT_S) * attempt
                self.client.notice(f"{self}: the branch moved while this run wrote it ({moved}); reading it "
                                   f"again, try {attempt + 1} of {attempts} in {wait:.1f}s")
                self.client.policy.sleep(wait)
        raise GitHubUnreachable(f"{self}: gave up after {attempts} tries: other writers kept moving the "
                                "branch")

    def append_run(self, path, line, max_runs, commit):
        """Append one history line to the file at path (history.appended, bounded by max_runs)."""
        def make(head):
            old = self.read(head, path)
            text = old.decode("utf-8", "replace") if old is not None else ""
            if line in text:  # this very run (its results and the second it was recorded) is there already
                return None
            return {path: appended(text, line, max_runs).encode("utf-8")}

        short = commit[:SHORT_SHA] if commit else "a run"
        return self.change(f"speedstats: the run of {short} in {path}", make)
