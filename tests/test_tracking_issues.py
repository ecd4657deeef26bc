"""One tracking issue per shift of main's history (github/tracking.py, through `speedstats record`) against
the loopback GitHub: opened once for a shift and never again for it, a later shift that undoes it a comment
on it (open or closed), two jobs opening one at once left with one, `issues: write` named, and nothing live
in what is posted whatever the case id and GPU name hold."""

import re
import threading

import pytest
from markdown_it import MarkdownIt

from fakegithub import FakeGitHub, actions_env, event_payload, run_speedstats
from histories import GPU, commit_of, history_runs, history_text
from speedstats.github.markers import SPEED_SHIFT, parse_marker
from speedstats.github.tracking import LABEL
from speedstats.history import history_file_name

REPO = "o/r"
TOKEN = "ghs_track"
BRANCH = "speedstats-data"
PATH = history_file_name(GPU)
BOT = "github-actions[bot]"
PARSER = MarkdownIt("commonmark").enable("table")


@pytest.fixture
def gh():
    with FakeGitHub() as fake:
        fake.add_token(TOKEN)
        fake.add_repo(REPO)
        yield fake


def seed(gh, runs):
    gh.add_branch(REPO, BRANCH, {PATH: history_text(runs)})


def record(gh, tmp_path, commit, results, *args, subprocess_=False, token=TOKEN):
    path = tmp_path / f"results-{commit[:8]}.json"
    path.write_text(results.to_json(), encoding="utf-8")
    env = actions_env(gh, token, REPO, tmp_path, event_name="push", event=event_payload("push", REPO),
                      GITHUB_SHA=commit, GITHUB_REF="refs/heads/main", GITHUB_SERVER_URL="https://github.example")
    return run_speedstats(["record", "--results", path, *args], env, subprocess_=subprocess_)


def record_runs(gh, tmp_path, runs):
    for commit, results in runs:
        result = record(gh, tmp_path, commit, results)
        assert result.rc == 0, result.err


PLOTS = f"https://github.example/{REPO}/blob/{BRANCH}/plots/"
OWN_HTML = r"<details>|</details>|<summary>[^<]*</summary>|<!-- speedstats:[^>]* -->"


def live_markup(body):
    """Links, images, raw HTML and mentions GitHub would make of a body: the marker at its end, the
    <details> block and the plot of the data branch (where matplotlib is installed) aside."""
    found = []

    def walk(tokens):
        for token in tokens:
            if token.type in ("link_open", "image"):
                found.append(token.attrs.get("href") or token.attrs.get("src"))
            elif token.type in ("html_block", "html_inline"):
                found.append(re.sub(OWN_HTML, "", token.content).strip())
            elif token.type == "text" and re.search(r"@\w", token.content):
                found.append(token.content)
            walk(token.children or [])

    walk(PARSER.parse(body))
    return [item for item in found if item and not item.startswith(PLOTS)]


def test_a_shift_opens_one_issue_and_the_next_runs_do_not_open_another(gh, tmp_path):
    runs = history_runs(42, shift_at=20, shift=0.10)
    seed(gh, runs[:40])
    result = record(gh, tmp_path, *runs[40])
    assert result.rc == 0, result.err
    (issue,) = gh.issues(REPO)
    assert f"speedstats: {REPO}: opened issue #{issue['number']}: " in result.err
    assert issue["labels"] == [LABEL] and issue["login"] == BOT and issue["state"] == "open"
    title = issue["title"]
    assert title.startswith(f"speedstats: resnet50-bs16 on {GPU} ") and title.endswith(
        f"% slower since {commit_of(20)[:7]}")
    body = issue["body"]
    marker = parse_marker(body)
    assert (marker.kind, marker.fields) == (SPEED_SHIFT, {"case": "resnet50-bs16", "gpu": GPU,
                                                          "shifts": f"{commit_of(20)}:slower"})
    assert body.startswith(f"**resnet50-bs16** on **{GPU}**: OneFlow's time per iteration on the default "
                           f"branch got ")
    compare = f"https://github.example/{REPO}/compare/{commit_of(19)}...{commit_of(20)}"
    assert f"[{commit_of(19)[:7]}...{commit_of(20)[:7]}]({compare})" in body
    assert "PyTorch, the control, did not shift there: the change is OneFlow's." in body
    assert f"| 21 | {commit_of(20)[:7]} | 2026-01-21T03:00:00Z | " in body  # the runs around it
    assert f"Found by `speedstats record` in {PATH} of the branch {BRANCH} (41 runs of this GPU)" in body
    assert live_markup(body) == [compare]

    record_runs(gh, tmp_path, runs[41:])
    assert [i["number"] for i in gh.issues(REPO)] == [issue["number"]]
    assert gh.issues(REPO)[0]["body"] == body and gh.comments(REPO, issue["number"]) == []
    assert len(gh.requests_matching("POST", f"/repos/{REPO}/issues")) == 1


def test_a_later_shift_that_undoes_it_comments_on_the_open_issue(gh, tmp_path):
    runs = history_runs(40, shift_at=15, shift=0.10)
    back = history_runs(14, first=40, seed=8)  # the time back where it was before run 15
    seed(gh, runs)
    record_runs(gh, tmp_path, back[:1])
    (opened,) = gh.issues(REPO)
    record_runs(gh, tmp_path, back[1:])
    (issue,) = gh.issues(REPO)
    assert (issue["number"], issue["title"]) == (opened["number"], opened["title"])
    (comment,) = gh.comments(REPO, issue["number"])
    assert comment["body"].startswith("A later shift on the default branch, shift 2: **-")
    assert "It undoes shift 1 (+" in comment["body"] and f"from {commit_of(15)[:7]})" in comment["body"]
    compare = f"https://github.example/{REPO}/compare/{commit_of(39)}...{commit_of(40)}"
    assert live_markup(comment["body"]) == [compare]
    assert parse_marker(issue["body"]).fields["shifts"] == f"{commit_of(15)}:slower,{commit_of(40)}:faster"
    assert "Shift 2: It undoes shift 1" in issue["body"] and issue["state"] == "open"


def test_a_closed_issue_is_not_opened_again_and_a_shift_undoing_it_comments_there(gh, tmp_path):
    runs = history_runs(40, shift_at=15, shift=0.10)
    seed(gh, runs)
    record_runs(gh, tmp_path, history_runs(1, first=40, shift_at=0, shift=0.10, seed=9))
    (issue,) = gh.issues(REPO)
    number = issue["number"]
    gh._repos[REPO][number].state = "closed"  # a maintainer closed it
    record_runs(gh, tmp_path, history_runs(3, first=41, shift_at=0, shift=0.10, seed=10))
    assert [(i["number"], i["state"]) for i in gh.issues(REPO)] == [(number, "closed")]
    record_runs(gh, tmp_path, history_runs(14, first=44, seed=11))  # back where it was
    assert [(i["number"], i["state"]) for i in gh.issues(REPO)] == [(number, "closed")]
    (comment,) = gh.comments(REPO, number)
    assert "It undoes shift 1" in comment["body"]


def test_two_jobs_opening_the_issue_at_once_leave_one_open(gh, tmp_path):
    runs = history_runs(42, shift_at=20, shift=0.10)
    seed(gh, runs[:40])
    gh.hold("POST", f"/repos/{REPO}/issues", parties=2, timeout_s=30)
    outcomes = []

    def job(i):
        folder = tmp_path / f"job{i}"
        folder.mkdir()
        outcomes.append(record(gh, folder, *runs[40 + i], subprocess_=True))

    jobs = [threading.Thread(target=job, args=(i,)) for i in (0, 1)]
    for thread in jobs:
        thread.start()
    for thread in jobs:
        thread.join(timeout=120)
    assert [o.rc for o in outcomes] == [0, 0], [o.err for o in outcomes]
    issues = gh.issues(REPO)
    assert [i["state"] for i in issues] == ["open", "closed"]
    (note,) = gh.comments(REPO, issues[1]["number"])
    first = issues[0]["number"]
    assert note["body"] == f"A duplicate of #{first}, which tracks this shift: two jobs opened one at once."


def test_a_token_without_issues_write_is_told_which_permission_and_the_run_is_kept(gh, tmp_path):
    gh.add_token("ghs_noissues", issues=False)
    runs = history_runs(41, shift_at=20, shift=0.10)
    seed(gh, runs[:40])
    result = record(gh, tmp_path, *runs[40], token="ghs_noissues")
    assert result.rc == 2
    assert result.err.splitlines()[-1].startswith(
        f"speedstats: error: the run is recorded, but the tracking issues of {REPO} could not be written: ")
    assert "the token needs `issues: write`" in result.err and "ghs_noissues" not in result.err
    assert gh.branch_file(REPO, BRANCH, PATH).decode().count("\n") == 41
    assert record(gh, tmp_path, *history_runs(1, first=41, seed=3)[0], "--no-issues",
                  token="ghs_noissues").rc == 0


def test_nothing_from_the_data_is_live_in_what_is_posted(gh, tmp_path):
    hostile_case = "x](https://e.vil) @alice <img src=x> `code` | cell"
    hostile_gpu = "GPU ![a](http://e.vil/x.png) @bob <b>"
    hostile_commit = "@carol [x](https://e.vil) <i>"  # a commit as someone wrote it into the file
    runs = history_runs(41, shift_at=20, shift=0.10, gpu_name=hostile_gpu)
    for _, results in runs:
        results.cases[0].id = hostile_case
    runs[20] = (hostile_commit, runs[20][1])
    gh.add_branch(REPO, BRANCH, {history_file_name(hostile_gpu): history_text(runs[:40])})
    result = record(gh, tmp_path, *runs[40])
    assert result.rc == 0, result.err
    (issue,) = gh.issues(REPO)
    assert live_markup(issue["body"]) == []  # no compare link without two commits
    assert "@\u2060alice" in issue["body"] and "@\u2060bob" in issue["title"]
    assert issue["title"].endswith("since @\u2060carol \\[x\\](https:/\u2060/e.vil) \u2039i>")
    assert parse_marker(issue["body"]).fields == {"case": hostile_case, "gpu": hostile_gpu,
                                                  "shifts": f"{hostile_commit}:slower"}
    # the next run finds the marker with its hostile fields and opens nothing more
    (commit, results), = history_runs(1, first=41, shift_at=0, shift=0.10, seed=4, gpu_name=hostile_gpu)
    results.cases[0].id = hostile_case
    assert record(gh, tmp_path, commit, results).rc == 0
    assert len(gh.issues(REPO)) == 1


def test_a_marker_on_someone_elses_issue_is_not_the_bots(gh, tmp_path):
    runs = history_runs(41, shift_at=20, shift=0.10)
    seed(gh, runs[:40])
    forged = (f"copied\n\n<!-- speedstats:{SPEED_SHIFT} case=resnet50-bs16 gpu={GPU.replace(' ', '%20')} "
              f"shifts={commit_of(20)}%3Aslower -->")
    gh.add_issue(REPO, 1, title="someone's", body=forged, author="mallory")
    assert record(gh, tmp_path, *runs[40]).rc == 0
    assert [i["login"] for i in gh.issues(REPO)] == ["mallory", BOT]


def test_the_plot_is_committed_to_the_data_branch_and_shown(gh, tmp_path):
    pytest.importorskip("matplotlib")
    runs = history_runs(41, shift_at=20, shift=0.10)
    seed(gh, runs[:40])
    assert record(gh, tmp_path, *runs[40]).rc == 0
    (issue,) = gh.issues(REPO)
    png = f"plots/{history_file_name(GPU)[8:-6]}/resnet50-bs16-{commit_of(20)[:12]}.png"
    assert gh.branch_file(REPO, BRANCH, png)[:8] == b"\x89PNG\r\n\x1a\n"
    url = f"https://github.example/{REPO}/blob/{BRANCH}/{png}?raw=true"
    assert f"![resnet50-bs16 on {GPU}]({url})" in issue["body"]
    assert url.startswith(PLOTS)
