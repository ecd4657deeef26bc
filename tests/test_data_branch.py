"""Main's history in a data branch (`speedstats record`, github/databranch.py) against the loopback GitHub's
Git Data API: the branch made with the first run, later runs appended, two jobs appending at once both
landing (the fake refuses a move that is not a fast-forward, as GitHub does), a bounded file, and no write
from a pull request's run."""

import json
import threading

import pytest

from fakegithub import NOT_FAST_FORWARD, FakeGitHub, actions_env, event_payload, run_speedstats
from histories import commit_of, history_runs, history_text, run_results
from speedstats.history import history_file_name, read_history_text

REPO = "o/r"
TOKEN = "ghs_data"
BRANCH = "speedstats-data"
GPU_FILE = history_file_name("NVIDIA A100-SXM4-80GB")


@pytest.fixture
def gh():
    with FakeGitHub() as fake:
        fake.add_token(TOKEN)
        fake.add_repo(REPO)
        yield fake


def results_file(tmp_path, results, name="results.json"):
    path = tmp_path / name
    path.write_text(results.to_json(), encoding="utf-8")
    return path


def push_env(gh, tmp_path, commit, ref="refs/heads/main", event="push", **extra):
    return actions_env(gh, TOKEN, REPO, tmp_path, event_name=event, event=event_payload(event, REPO),
                       GITHUB_SHA=commit, GITHUB_REF=ref, **extra)


def record(gh, tmp_path, results, commit, *args, subprocess_=False, **env):
    path = results_file(tmp_path, results, f"results-{commit[:8]}.json")
    return run_speedstats(["record", "--results", path, *args], push_env(gh, tmp_path, commit, **env),
                          subprocess_=subprocess_)


def branch_history(gh, path=GPU_FILE):
    data = gh.branch_file(REPO, BRANCH, path)
    assert data is not None, f"{path} is not on the branch"
    return read_history_text(data.decode("utf-8"), path)


def test_the_first_run_makes_the_branch_and_the_next_ones_append(gh, tmp_path):
    runs = history_runs(3)
    for commit, results in runs:
        result = record(gh, tmp_path, results, commit)
        assert result.rc == 0, result.err
        assert f"appended the run of {commit[:7]} to {GPU_FILE}" in result.err
    history = branch_history(gh)
    assert history.problems == [] and history.summaries == []
    assert [e.commit for e in history.entries] == [commit for commit, _ in runs]
    assert history.entries[2].results.cases[0].frameworks["oneflow"].per_iter_s == \
        runs[2][1].cases[0].frameworks["oneflow"].per_iter_s
    commits = gh.branch_commits(REPO, BRANCH)
    assert len(commits) == 3 and commits[-1]["parents"] == []  # the branch's first commit is its own root
    assert set(commits[0]["tree"]) == {"README.md", GPU_FILE}
    assert "speedstats changes" in gh.branch_file(REPO, BRANCH, "README.md").decode()
    # fast-forwards only: each commit's parent is the one before
    assert [c["parents"] for c in commits[:-1]] == [[c["sha"]] for c in commits[1:]]


def test_each_gpu_has_a_file_of_its_own(gh, tmp_path):
    assert record(gh, tmp_path, run_results(0.04), commit_of(1)).rc == 0
    assert record(gh, tmp_path, run_results(0.02, gpu_name="NVIDIA H100 80GB HBM3"), commit_of(1)).rc == 0
    tree = gh.branch_commits(REPO, BRANCH)[0]["tree"]
    assert set(tree) == {"README.md", GPU_FILE, "history/NVIDIA_H100_80GB_HBM3.jsonl"}
    assert len(branch_history(gh, "history/NVIDIA_H100_80GB_HBM3.jsonl").entries) == 1


@pytest.mark.parametrize("held", ["PATCH /repos/o/r/git/refs/heads/speedstats-data",
                                  "POST /repos/o/r/git/refs"])
def test_two_gpus_jobs_appending_at_once_both_land(gh, tmp_path, held):
    """Both jobs read the same head (or both find no branch), both commit on it, and the fake lets one
    move the branch: the other is refused as GitHub refuses it, reads the new head and appends again."""
    if held.startswith("PATCH"):
        assert record(gh, tmp_path, run_results(0.04), commit_of(0)).rc == 0
    method, path = held.split(" ")
    gh.hold(method, path, parties=2, timeout_s=30)
    a100, h100 = run_results(0.041), run_results(0.021, gpu_name="NVIDIA H100 80GB HBM3")
    outcomes = {}

    def job(name, results):
        outcomes[name] = record(gh, tmp_path / name, results, commit_of(1), subprocess_=True)

    for name in ("a100", "h100"):
        (tmp_path / name).mkdir()
    jobs = [threading.Thread(target=job, args=args) for args in (("a100", a100), ("h100", h100))]
    for thread in jobs:
        thread.start()
    for thread in jobs:
        thread.join(timeout=120)
    assert [outcomes[n].rc for n in ("a100", "h100")] == [0, 0], [outcomes[n].err for n in outcomes]
    refused = [r for r in gh.requests_matching(method, path) if r.status == 422]
    assert len(refused) == 1
    message = NOT_FAST_FORWARD if method == "PATCH" else "Reference already exists"
    assert sum(message in outcomes[n].err and "reading it again" in outcomes[n].err for n in outcomes) == 1
    assert sum("2 tries: other jobs wrote the branch too" in outcomes[n].err for n in outcomes) == 1
    assert len(branch_history(gh).entries) == (2 if method == "PATCH" else 1)
    assert len(branch_history(gh, "history/NVIDIA_H100_80GB_HBM3.jsonl").entries) == 1
    commits = gh.branch_commits(REPO, BRANCH)
    assert [c["parents"] for c in commits[:-1]] == [[c["sha"]] for c in commits[1:]]


def test_the_same_gpu_appending_twice_at_once_keeps_both_runs(gh, tmp_path):
    assert record(gh, tmp_path, run_results(0.04), commit_of(0)).rc == 0
    gh.hold("PATCH", "/repos/o/r/git/refs/heads/speedstats-data", parties=2, timeout_s=30)
    outcomes = []

    def job(i):
        folder = tmp_path / f"job{i}"
        folder.mkdir()
        outcomes.append(record(gh, folder, run_results(0.04 + i / 1000), commit_of(i), subprocess_=True))

    jobs = [threading.Thread(target=job, args=(i,)) for i in (1, 2)]
    for thread in jobs:
        thread.start()
    for thread in jobs:
        thread.join(timeout=120)
    assert [o.rc for o in outcomes] == [0, 0], [o.err for o in outcomes]
    assert sorted(e.commit for e in branch_history(gh).entries) == sorted([commit_of(0), commit_of(1),
                                                                           commit_of(2)])


def test_a_move_stored_behind_a_server_error_is_not_appended_twice(gh, tmp_path):
    assert record(gh, tmp_path, run_results(0.04), commit_of(0)).rc == 0
    gh.fail("PATCH", "/repos/o/r/git/refs/heads/speedstats-data", status=502, after=True)
    result = record(gh, tmp_path, run_results(0.05), commit_of(1))
    assert result.rc == 0, result.err
    assert [e.commit for e in branch_history(gh).entries] == [commit_of(0), commit_of(1)]


def test_a_bounded_file_summarises_its_oldest_runs_and_says_so(gh, tmp_path):
    runs = history_runs(25)
    gh.add_branch(REPO, BRANCH, {GPU_FILE: history_text(runs[:24])})
    result = record(gh, tmp_path, runs[24][1], runs[24][0], "--max-runs", "20")
    assert result.rc == 0, result.err
    history = branch_history(gh)
    assert [e.commit for e in history.entries] == [c for c, _ in runs[24 - 19:]]
    (summary,) = history.summaries
    assert (summary.runs, summary.first_commit, summary.last_commit) == (5, commit_of(0), commit_of(4))
    assert summary.gpu_name == "NVIDIA A100-SXM4-80GB" and "summarised" in summary.note
    (case,) = summary.cases
    assert case.id == "resnet50-bs16" and case.frameworks["oneflow"].runs == 5
    assert history.summary_note().startswith("5 older run(s) are summarised in the file (commits ")
    first_line = json.loads(gh.branch_file(REPO, BRANCH, GPU_FILE).decode().splitlines()[0])
    assert first_line["schema"] == "speedstats/history-summary/v1"


@pytest.mark.parametrize("event, head_repo", [("pull_request", "o/r"), ("pull_request", "someone/r"),
                                              ("pull_request_target", "someone/r"), ("workflow_run", None)])
def test_a_pull_requests_run_never_writes_the_history(gh, tmp_path, event, head_repo):
    payload = event_payload(event, REPO, number=7, head_sha=commit_of(9), run_id=5, head_repo=head_repo)
    env = actions_env(gh, TOKEN, REPO, tmp_path, event_name=event, event=payload, GITHUB_SHA=commit_of(9),
                      GITHUB_REF="refs/pull/7/merge")
    result = run_speedstats(["record", "--results", results_file(tmp_path, run_results(0.04))], env)
    assert result.rc == 0, result.err
    assert result.out.startswith("::warning::speedstats: not recorded: ")
    assert "never writes main's history" in result.out
    assert gh.requests == []  # not even a read


def test_a_push_to_another_branch_is_not_recorded(gh, tmp_path):
    result = record(gh, tmp_path, run_results(0.04), commit_of(1), ref="refs/heads/feature")
    assert result.rc == 0
    assert "not recorded: the run is for refs/heads/feature, not the default branch main" in result.out
    assert gh.branch_commits(REPO, BRANCH) == []


def test_a_token_without_contents_write_is_told_which_permission(gh, tmp_path):
    gh.add_token("ghs_read", contents=False)
    path = results_file(tmp_path, run_results(0.04))
    env = push_env(gh, tmp_path, commit_of(1), GITHUB_TOKEN="ghs_read")
    result = run_speedstats(["record", "--results", path], env)
    assert result.rc == 2
    assert result.err.startswith(f"speedstats: error: could not write the data branch {BRANCH} of {REPO}: ")
    assert "the token needs `contents: write`" in result.err and "ghs_read" not in result.err


def test_a_cancelled_run_is_not_recorded(gh, tmp_path):
    results = run_results(0.04)
    results.cancelled = True
    result = record(gh, tmp_path, results, commit_of(1))
    assert result.rc == 0 and "not recorded in main's history: it was cancelled" in result.err
    assert gh.requests == []


@pytest.mark.parametrize("args, message", [
    (["--max-runs", "5"], "--max-runs: must be at least 20, got 5"),
    (["--branch", "bad..name"], "--branch: not a branch name git accepts: 'bad..name'"),
    (["--commit", "abc"], "--commit: must be a full commit sha (40 hex digits), got 'abc'"),
])
def test_bad_flags_are_one_line(gh, tmp_path, args, message):
    result = record(gh, tmp_path, run_results(0.04), commit_of(1), *args)
    assert (result.rc, result.err) == (2, f"speedstats: error: {message}\n")
