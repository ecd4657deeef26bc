"""One tracking issue per shift of main's history, per case and GPU: what `speedstats record` does after it
appended a run (the token needs `issues: write`).

With the run in its GPU's file, OneFlow's series of each case is analysed (analysis.changepoints), and each
change point is held against the shifts that the bot's issues already track, read from the marker that
ends their bodies (`<!-- speedstats:speed-shift case=... gpu=... shifts=<commit>:slower,... -->`,
markers.py): open and closed issues alike, opened by the bot's own login only (anyone may paste a marker).
A change point is a tracked shift when it goes the same way and its first run after is within NEAR runs of
the tracked one's (a change point found again with more runs may move by a run or two). A new one:

- an open issue of the case and GPU: its body is written again with every shift it tracks, and a comment
  gives the new shift and whether it undoes the one before it (the runs after it held against the runs
  before that one: "undoes" when that interval holds no change or the change is under the smallest shift
  reported, else "partly");
- none open, and the new shift undoes the last shift of the newest closed one: a comment there (it stays
  closed), and its marker takes the new shift;
- else a new issue (label LABEL): the shift with its interval, the commits between the last run before it
  and the first after, PyTorch's series at the same place (a control that shifted too points at the runner
  rather than a commit), the runs around it, and the case's plot, committed to the data branch under
  plots/ where matplotlib is installed.

Only the head's (OneFlow's) series opens issues. Two jobs of the same GPU that open an issue for the same
case at once converge: the one that finds an older open issue of the case and GPU beside its own closes its
own as a duplicate. Everything posted is rendered by render.py, every string from the data escaped.
"""
from __future__ import annotations

import re
import sys
import tempfile
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from speedstats.analysis.changepoints import DEFAULT_MIN_CHANGE, case_series, history_shifts, segments_ratio
from speedstats.contenders import HEAD, PYTORCH
from speedstats.github import context
from speedstats.github.markers import SPEED_SHIFT, fit_body, make_marker, parse_marker
from speedstats.history import history_file_name
from speedstats.text import markdown_safe, one_line, time_text, trusted

LABEL = "speedstats-shift"
NEAR = 2  # runs: a change point this close to a tracked one, the same way, is that shift
PLOT_RUNS = 60  # the newest runs the plot shows
RUNS_AROUND = 5  # runs on each side of the newest shift in the issue's table
SLOWER, FASTER = "slower", "faster"
TITLE_LIMIT = 200
_SHA = re.compile(r"^[0-9a-f]{7,40}$")


@dataclass
class Tracked:
    """A tracking issue of the bot, and the shifts its marker names: [(commit of the first run after,
    slower or faster)]."""

    issue: object  # client.IssueInfo
    case_id: str
    gpu_name: str
    shifts: list = field(default_factory=list)


@dataclass
class Outcome:
    action: str  # opened, updated, commented, closed-duplicate, dry-run
    case_id: str
    number: int | None
    text: str


def direction(shift):
    return SLOWER if shift.point.slower else FASTER


def parse_shifts(value):
    pairs = []
    for item in (value or "").split(","):
        commit, _, way = item.partition(":")
        if commit and way in (SLOWER, FASTER):
            pairs.append((commit, way))
    return pairs


def shifts_value(pairs):
    return ",".join(f"{commit}:{way}" for commit, way in pairs)


def tracked_issues(client, repo, author):
    """The bot's tracking issues of repo (open and closed), newest first."""
    found = []
    for issue in client.issues_by(repo, author):
        marker = parse_marker(issue.body)
        if marker is None or marker.kind != SPEED_SHIFT or issue.login.lower() != author.lower():
            continue
        found.append(Tracked(issue, marker.fields.get("case", ""), marker.fields.get("gpu", ""),
                             parse_shifts(marker.fields.get("shifts"))))
    return found


def _positions(entries):
    """{commit: [positions of its runs]}."""
    positions = {}
    for position, entry in enumerate(entries):
        if entry.commit:
            positions.setdefault(entry.commit, []).append(position)
    return positions


def _first_position(shift):
    return shift.series.positions[shift.point.index]


def _matches(shift, pair, positions):
    commit, way = pair
    return way == direction(shift) and any(abs(p - _first_position(shift)) <= NEAR
                                           for p in positions.get(commit, ()))


def _commit_text(entry):
    """A run's commit as the issue prints it, safe inside the project's own sentences: 7 hex digits, or
    whatever else the file holds made markdown-safe, or its line."""
    if entry.commit and _SHA.match(entry.commit):
        return trusted(entry.commit[:7])
    return markdown_safe(entry.commit, 40) if entry.commit else trusted(f"line {entry.line}")


def _compare_link(repo, server, before, after):
    if before.commit and after.commit and _SHA.match(before.commit) and _SHA.match(after.commit):
        return trusted(f"[{before.commit[:7]}...{after.commit[:7]}]({server}/{repo}/compare/"
                       f"{before.commit}...{after.commit})")
    return trusted("not recorded")


def _percent(fraction):
    return f"{fraction * 100:+.1f}%"


def _undo_text(earlier, later, number):
    """Whether `later` (a Shift) undoes `earlier` (the change point before it in the same series), said
    from the runs before the earlier and after the later; None when they go the same way."""
    if earlier.point.slower == later.point.slower:
        return None
    values = later.series.values
    before = values[earlier.point.before.start:earlier.point.before.end]
    after = values[later.point.after.start:later.point.after.end]
    ratio, low, high = segments_ratio(before, after)
    span = f"{_percent(ratio - 1)} ({_percent(low - 1)} to {_percent(high - 1)})"
    earlier_text = (f"shift {number} ({_percent(earlier.point.change)} from "
                    f"{_commit_text(earlier.first_after)})")
    if low <= 1 <= high or abs(ratio - 1) < DEFAULT_MIN_CHANGE:  # no shift left that would be reported
        return trusted(f"It undoes {earlier_text}: the runs after it are within {span} of the runs before "
                       "that shift.")
    return trusted(f"It partly undoes {earlier_text}: the runs after it are still {span} from the runs "
                   "before that shift.")


def _shift_view(number, shift, repo, server, undo):
    point = shift.point
    return {"number": number, "change": trusted(_percent(point.change)),
            "interval": trusted(f"{_percent(point.low - 1)} to {_percent(point.high - 1)}"),
            "before": trusted(time_text(point.before.median_s, shift.kind)),
            "after": trusted(time_text(point.after.median_s, shift.kind)),
            "last_before": _commit_text(shift.last_before),
            "last_before_date": shift.last_before.recorded_at or "-",
            "first_after": _commit_text(shift.first_after),
            "first_after_date": shift.first_after.recorded_at or "-",
            "commits": _compare_link(repo, server, shift.last_before, shift.first_after), "undo": undo}


def _control_text(shift, entries):
    control = case_series(entries, shift.case_id, PYTORCH)
    if not control.values:
        return trusted("PyTorch, the control, was not measured on these runs.")
    for point in control.change_points():
        if abs(control.positions[point.index] - _first_position(shift)) <= NEAR:
            return trusted(f"PyTorch, the control, shifted at the same runs ({_percent(point.change)}): the "
                           "runner may have changed rather than OneFlow.")
    return trusted("PyTorch, the control, did not shift there: the change is OneFlow's.")


def _runs_table(shift, entries):
    first = _first_position(shift)
    rows = []
    for position in range(max(first - RUNS_AROUND, 0), min(first + RUNS_AROUND, len(entries))):
        entry = entries[position]
        case = next((c for c in entry.results.cases if c.id == shift.case_id), None)
        times = {}
        for role in (HEAD, PYTORCH):
            fw = case.frameworks.get(role) if case is not None and not case.error else None
            ok = fw is not None and fw.ok
            times[role] = trusted(time_text(fw.per_iter_s, case.kind) if ok else "-")
        when = entry.recorded_at or "-"
        rows.append({"number": position + 1, "commit": _commit_text(entry), "recorded_at": when,
                     "oneflow": times[HEAD], "pytorch": times[PYTORCH]})
    return rows


@dataclass
class IssueText:
    title: str
    body: str  # with its marker
    pairs: list  # the shifts its marker names
    views: list  # each shift's view, in order


def issue_text(shifts, tracked_pairs, gone, entries, *, repo, server, branch, path, plot_url):
    """The title and body of the issue tracking `shifts` (Shift, in order) of one case on one GPU."""
    from speedstats.render import render_shift_issue

    newest = shifts[-1]
    views = []
    for number, shift in enumerate(shifts, start=1):
        earlier = shifts[number - 2] if number > 1 else None
        views.append(_shift_view(number, shift, repo, server,
                                 _undo_text(earlier, shift, number - 1) if earlier else None))
    size = f"{abs(newest.point.change) * 100:.1f}% {direction(newest)}"
    since = _commit_text(newest.first_after)
    headline = (f"got {size} from commit {since} on" if len(shifts) == 1
                else f"shifted {len(shifts)} times; the newest made it {size} from commit {since} on")
    context_ = {"case_id": newest.case_id, "gpu_name": newest.gpu_name, "headline": trusted(headline),
                "shifts": views, "control": _control_text(newest, entries),
                "gone": trusted(", ".join(gone)) if gone else None, "plot_url": plot_url,
                "runs": _runs_table(newest, entries), "path": path, "branch": branch, "total": len(entries)}
    pairs = list(tracked_pairs)
    for shift in shifts:
        pair = (shift.first_after.commit, direction(shift))
        if not any(_matches(shift, known, _positions(entries)) for known in pairs):
            pairs.append(pair)
    marker = make_marker(SPEED_SHIFT, case=newest.case_id, gpu=newest.gpu_name, shifts=shifts_value(pairs))
    body = fit_body(render_shift_issue(context_), marker.render())
    title = one_line(f"speedstats: {newest.case_id} on {newest.gpu_name} {size} since {since}", TITLE_LIMIT)
    return IssueText(re.sub("@(?!\u2060)", "@\u2060", title), body, pairs, views)  # no mention


def _plot(entries, shift, branch_name, repo, server):
    """({path: PNG bytes}, its URL) of the case's plot for the data branch, or ({}, None) without
    matplotlib."""
    from speedstats.analysis.trend import file_name, plot_case
    from speedstats.errors import UserError

    gpu = Path(history_file_name(shift.gpu_name)).stem
    path = f"plots/{gpu}/{file_name(shift.case_id)[:-4]}-{(shift.first_after.commit or 'none')[:12]}.png"
    with tempfile.TemporaryDirectory() as folder:
        try:
            plot_case(entries[-PLOT_RUNS:], shift.case_id, Path(folder) / "plot.png")
        except UserError:  # matplotlib is not installed here: the issue goes without its plot
            return {}, None
        data = (Path(folder) / "plot.png").read_bytes()
    url = (f"{server}/{repo}/blob/{urllib.parse.quote(branch_name, safe='')}/{urllib.parse.quote(path)}"
           "?raw=true")
    return {path: data}, trusted(url)


class Tracker:
    """The tracking issues of one GPU's history in one repository."""

    def __init__(self, client, repo, author, branch=None, dry_run=False, err=None, environ=None):
        self.client, self.repo, self.author, self.branch = client, repo, author, branch
        self.dry_run, self.err = dry_run, err or sys.stderr
        api_url = client.api_url if client is not None else context.DEFAULT_API_URL
        self.server = context.server_url(api_url, environ)

    def track(self, entries, path):
        """Open, update or comment on the issues of the new shifts of `entries` (one GPU's history, oldest
        first); returns the Outcomes."""
        shifts = [s for s in history_shifts(entries, [HEAD]) if s.first_after.commit]
        if not shifts:
            return []
        tracked = tracked_issues(self.client, self.repo, self.author)
        positions = _positions(entries)
        plans, plots = [], {}
        for case_id in dict.fromkeys(s.case_id for s in shifts):
            case_shifts = [s for s in shifts if s.case_id == case_id]
            gpu = case_shifts[0].gpu_name
            mine = [t for t in tracked if t.case_id == case_id and t.gpu_name == gpu]
            new = [s for s in case_shifts
                   if not any(_matches(s, pair, positions) for t in mine for pair in t.shifts)]
            if not new:
                continue
            plan = _plan(case_shifts, new, mine, positions)
            if self.branch is not None and not self.dry_run:
                files, plan.plot_url = _plot(entries, new[-1], self.branch.branch, self.repo, self.server)
                plots.update(files)
            plans.append(plan)
        if plots:
            self.branch.change("speedstats: the plots of tracking issues", lambda head: plots)
        outcomes = []
        for plan in plans:
            outcomes += self._carry_out(plan, entries, path)
        return outcomes

    def _carry_out(self, plan, entries, path):
        positions = _positions(entries)
        pairs = plan.tracked.shifts if plan.tracked is not None else []
        gone = [commit[:7] for commit, way in pairs if _SHA.match(commit)
                and not any(_matches(s, (commit, way), positions) for s in plan.shifts)]
        text = issue_text(plan.shifts, pairs, gone, entries, repo=self.repo, server=self.server,
                          branch=self.branch.branch if self.branch is not None else "", path=path,
                          plot_url=plan.plot_url)
        case_id = plan.shifts[-1].case_id
        if plan.kind == "open":
            if self.dry_run:
                return [Outcome("dry-run", case_id, None, f"would open an issue: {text.title}")]
            issue = self.client.create_issue(self.repo, text.title, text.body, [LABEL], lambda: next(
                (i for i in self.client.issues_by(self.repo, self.author) if i.body == text.body), None))
            opened = Outcome("opened", case_id, issue.number, f"opened issue #{issue.number}: {text.title}")
            return [opened, *self._settle(case_id, plan.shifts[-1].gpu_name, issue)]
        issue = plan.tracked.issue
        if self.dry_run:
            return [Outcome("dry-run", case_id, issue.number,
                            f"would update issue #{issue.number} and comment on it")]
        if issue.body != text.body:
            self.client.edit_issue(self.repo, issue, body=text.body)
        for index, shift in enumerate(plan.shifts):
            if any(shift is n for n in plan.new):
                self.client.comment_on_issue(self.repo, issue, _comment(text.views[index]), self.author)
        action = "updated" if issue.state == "open" else "commented on"
        where = "" if issue.state == "open" else " (closed)"
        return [Outcome(action, case_id, issue.number,
                        f"{action} issue #{issue.number}{where}: a later shift of {case_id}")]

    def _settle(self, case_id, gpu_name, issue):
        """Close our new issue as a duplicate when an older open one of the same case and GPU is there (two
        jobs opened one at once)."""
        older = [t.issue.number for t in tracked_issues(self.client, self.repo, self.author)
                 if t.case_id == case_id and t.gpu_name == gpu_name and t.issue.state == "open"
                 and t.issue.number < issue.number]
        if not older:
            return []
        self.client.comment_on_issue(self.repo, issue, f"A duplicate of #{min(older)}, which tracks this "
                                     "shift: two jobs opened one at once.", self.author)
        self.client.edit_issue(self.repo, issue, state="closed", state_reason="not_planned")
        return [Outcome("closed-duplicate", case_id, issue.number,
                        f"closed issue #{issue.number} as a duplicate of #{min(older)}")]


@dataclass
class Plan:
    kind: str  # open: a new issue; update: the open one; comment: the closed one whose last shift it undoes
    shifts: list  # the shifts the issue's body lists, in order
    new: list  # those of them that are new
    tracked: Tracked | None = None
    plot_url: str | None = None


def _plan(case_shifts, new, mine, positions):
    def its(tracked):
        return [s for s in case_shifts if any(s is n for n in new)
                or any(_matches(s, pair, positions) for pair in tracked.shifts)]

    open_ = sorted((t for t in mine if t.issue.state == "open"), key=lambda t: t.issue.number)
    if open_:
        return Plan("update", its(open_[0]), new, open_[0])
    if mine and len(new) == 1:
        newest = max(mine, key=lambda t: t.issue.number)
        index = next(i for i, s in enumerate(case_shifts) if s is new[0])
        earlier = case_shifts[index - 1] if index > 0 else None
        if (earlier is not None and newest.shifts and _matches(earlier, newest.shifts[-1], positions)
                and _undo_text(earlier, new[0], 1) is not None):
            return Plan("comment", its(newest), new, newest)
    return Plan("open", new, new)


def _comment(view):
    from speedstats.render import render_shift_comment

    return render_shift_comment({"shift": view})
