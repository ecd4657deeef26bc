"""A check run per GPU, `speedstats / <GPU>`, against the loopback GitHub: from run-and-comment's posting
step (the action's planned `comment --results` line) and from the matrix `report`; the fake's Checks API
refuses what GitHub refuses."""

import shlex

import pytest
import requests

from actions_runner import HEAD, PR, REPO, TOKEN, action_env, planned
from fakegithub import actions_env, event_payload, run_speedstats
from matrix_shards import RUN, SHA1, fork_report, make_shard, results_json, shard_zip
from matrix_shards import TOKEN as MATRIX_TOKEN
from matrix_shards import report as matrix_report

GPU = "NVIDIA A100-SXM4-80GB"
NAME = f"speedstats / {GPU}"


@pytest.fixture
def gh(fake_github):
    server = fake_github(TOKEN)
    server.add_pull(REPO, PR, head_sha=HEAD)
    return server


def post_after_run(gh, tmp_path, monkeypatch, inputs=None, event=None, **results):
    """What run-and-comment does after a run that wrote its files: the entrypoint's second planned
    command, run in the workspace with the step's environment."""
    workspace = tmp_path / "workspace"
    out = workspace / "speedstats-out"
    out.mkdir(parents=True, exist_ok=True)
    gpu_name = results.pop("gpu_name", GPU)
    (out / "results.json").write_text(results_json(gpu_name, **results), encoding="utf-8")
    (out / "comment.md").write_text("Speed stats as the run rendered them", encoding="utf-8")
    _, line = planned(tmp_path, **(inputs or {})).splitlines()
    env = action_env(workspace, gh.url, inputs, event=event)
    env["SPEEDSTATS_GITHUB_TIME_SCALE"] = "0.001"
    monkeypatch.chdir(workspace)
    return run_speedstats(shlex.split(line)[1:], env)


def comment_url(gh):
    (comment,) = gh.comments(REPO, PR)
    return f"{gh.url}/{REPO}/pull/{PR}#issuecomment-{comment['id']}"


def test_run_and_comment_plans_the_check_run_from_the_results_unless_turned_off(tmp_path):
    assert planned(tmp_path, suite=".github/speed.yml", pr="7").splitlines()[1] == (
        "speedstats comment --body-file speedstats-out/comment.md --mode update --results "
        "speedstats-out/results.json --suite .github/speed.yml --pr 7")
    assert planned(tmp_path, **{"check-run": "false"}).splitlines()[1] == (
        "speedstats comment --body-file speedstats-out/comment.md --mode update")
    assert planned(tmp_path, command="report", gpus='["a100"]', **{"check-run": "false"}) == (
        "speedstats report --gpus '[\"a100\"]' --shards speedstats-shards --notify-on-flip author "
        "--no-check-run\n")


def test_a_failed_verdict_is_a_failed_check_run_on_the_head_linking_the_comment(gh, tmp_path, monkeypatch):
    result = post_after_run(gh, tmp_path, monkeypatch, error="CUDA out of memory")
    assert result.rc == 0, result.err
    (check,) = gh.check_runs(REPO)
    link = comment_url(gh)
    assert check["name"] == NAME and check["head_sha"] == HEAD
    assert (check["status"], check["conclusion"], check["details_url"]) == ("completed", "failure", link)
    assert check["output"] == {
        "title": f"{GPU}: fail (score 2)",
        "summary": f"**fail (score 2)** on {GPU} at commit {HEAD[:12]}; [the Speed stats comment]({link})."
                   "\n\n- resnet50-bs2: failed: oneflow: CUDA out of memory"}
    assert f"created check run '{NAME}' (failure) on commit {HEAD[:12]}" in result.err


def test_a_rerun_updates_the_check_run_rather_than_adding_one(gh, tmp_path, monkeypatch):
    assert post_after_run(gh, tmp_path, monkeypatch, error="CUDA out of memory").rc == 0
    result = post_after_run(gh, tmp_path, monkeypatch)  # the re-run passed
    assert result.rc == 0, result.err
    (check,) = gh.check_runs(REPO, HEAD)
    assert check["name"] == NAME and check["conclusion"] == "success"
    assert check["output"]["title"] == f"{GPU}: pass (score 0)"
    assert len(gh.requests_matching("POST", f"/repos/{REPO}/check-runs")) == 1
    assert len(gh.requests_matching("PATCH", f"/repos/{REPO}/check-runs/*")) == 1
    # the same verdict again: nothing to write
    assert post_after_run(gh, tmp_path, monkeypatch).rc == 0
    assert len(gh.requests_matching("PATCH", f"/repos/{REPO}/check-runs/*")) == 1


def test_a_cancelled_run_is_a_neutral_check_run(gh, tmp_path, monkeypatch):
    assert post_after_run(gh, tmp_path, monkeypatch, cancelled=True).rc == 0
    (check,) = gh.check_runs(REPO)
    assert check["conclusion"] == "neutral"
    assert check["output"]["title"] == f"{GPU}: no verdict: the run was cancelled"


def test_check_run_false_creates_none(gh, tmp_path, monkeypatch):
    result = post_after_run(gh, tmp_path, monkeypatch, {"check-run": "false"}, error="CUDA out of memory")
    assert result.rc == 0, result.err
    assert len(gh.comments(REPO, PR)) == 1 and gh.check_runs(REPO) == []


def test_the_check_run_fails_even_where_required_label_forgives_the_verdict(gh, tmp_path):
    (tmp_path / "results.json").write_text(results_json(GPU, error="CUDA out of memory"), encoding="utf-8")
    (tmp_path / "comment.md").write_text("Speed stats", encoding="utf-8")
    env = actions_env(gh, TOKEN, REPO, tmp_path, event=event_payload("pull_request", REPO, PR, HEAD),
                      GITHUB_RUN_ID=4242)
    result = run_speedstats(["comment", "--body-file", tmp_path / "comment.md", "--results",
                             tmp_path / "results.json", "--verdict", "fail", "--required-label",
                             "need-pass-speed-test"], env)
    assert result.rc == 0, result.err  # no label: the step passes ...
    assert "(required-label): the step does not fail" in result.err
    assert [c["conclusion"] for c in gh.check_runs(REPO)] == ["failure"]  # ... and the check fails


def test_a_token_without_checks_write_on_a_branch_exits_2_naming_it(gh, tmp_path, monkeypatch):
    gh.add_token("ghs_noChecks", checks=False)
    result = post_after_run(gh, tmp_path, monkeypatch, {"token": "ghs_noChecks"})
    assert result.rc == 2
    assert result.err.splitlines()[-1] == (
        f"speedstats: error: could not create the check run '{NAME}' on {REPO}#{PR}: create check run "
        f"'{NAME}' on commit {HEAD[:12]} in {REPO}: GitHub answered 403 Resource not accessible by "
        "integration; the token needs `checks: write` (add it to the job's `permissions:`), or turn the "
        "check runs off with --no-check-run (the action's `check-run: false`)")
    assert len(gh.comments(REPO, PR)) == 1 and gh.check_runs(REPO) == []


def fork_event():
    return {"action": "synchronize", "number": PR, "repository": {"full_name": REPO},
            "pull_request": {"number": PR, "head": {"sha": HEAD, "repo": {"full_name": "someone/r"}},
                             "base": {"repo": {"full_name": REPO}}}}


def test_on_a_forks_pull_request_a_refused_check_run_is_a_warning(gh, tmp_path, monkeypatch):
    gh.add_token("ghs_noChecks", checks=False)
    result = post_after_run(gh, tmp_path, monkeypatch, {"token": "ghs_noChecks"}, event=fork_event())
    assert result.rc == 0, result.err
    assert (f"::warning::speedstats: could not create the check run '{NAME}' on {REPO}#{PR}: the token "
            "cannot write there (a pull request from a fork gets a read-only token)") in result.err
    assert gh.check_runs(REPO) == []


def test_a_forks_read_only_token_warns_once_and_tries_no_check_run(gh, tmp_path, monkeypatch):
    gh.add_token("ghs_readOnly", write=False)
    result = post_after_run(gh, tmp_path, monkeypatch, {"token": "ghs_readOnly"}, event=fork_event())
    assert result.rc == 0, result.err
    assert result.out.count("::warning::") == 1 and "could not post the comment" in result.out
    assert not gh.requests_matching("POST", f"/repos/{REPO}/check-runs")


def test_a_personal_access_token_is_told_it_cannot_create_check_runs(gh, tmp_path, monkeypatch):
    gh.add_token("ghp_person", login="perf-bot", user_type="User")
    result = post_after_run(gh, tmp_path, monkeypatch, {"token": "ghp_person"})
    assert result.rc == 2
    last = result.err.splitlines()[-1]
    assert "GitHub answered 403 You must authenticate via a GitHub App." in last
    assert last.endswith("only a GitHub App's token can create check runs (the job's GITHUB_TOKEN with "
                         "`checks: write` is one); a personal access token cannot. Give the job's token, or "
                         "turn the check runs off with --no-check-run (the action's `check-run: false`)")


def test_hostile_reasons_stay_text_and_the_summary_fits_githubs_limit(gh, tmp_path):
    from speedstats.github import checks

    hostile = "@everyone [free](https://evil.example) `x` | y"
    check = checks.Check("a100", checks.FAILURE, "fail", [])
    check.lines = [checks.markdown_safe(f"{hostile} {i} " + "z" * 250, checks.REASON_LIMIT)
                   for i in range(400)]
    text = checks.summary(check, HEAD, "https://github.example/o/r/pull/7#issuecomment-1", "the comment")
    assert len(text) <= checks.MAX_SUMMARY_CHARS
    assert text.endswith(" more, in the comment")
    assert "@everyone" not in text and "](https://evil" not in text and "\\[free\\]" in text


# -- the matrix report: one check run per GPU of the matrix, named by its key ---------------------------


@pytest.fixture
def matrix_gh(fake_github):
    server = fake_github(MATRIX_TOKEN)
    server.add_pull(REPO, PR, head_sha=SHA1)
    return server


def checks_by_name(gh, sha=SHA1):
    return {c["name"]: c for c in gh.check_runs(REPO, sha)}


def test_report_makes_a_check_run_per_gpu(matrix_gh, tmp_path):
    gh = matrix_gh
    make_shard(tmp_path, "a100")
    make_shard(tmp_path, "v100", error="CUDA out of memory")
    result = matrix_report(gh, tmp_path)
    assert result.rc == 0, result.err
    link = comment_url(gh)
    found = checks_by_name(gh)
    assert sorted(found) == ["speedstats / a100", "speedstats / t4", "speedstats / v100"]
    assert {name: c["conclusion"] for name, c in found.items()} == {
        "speedstats / a100": "success", "speedstats / v100": "failure", "speedstats / t4": "neutral"}
    assert {c["details_url"] for c in found.values()} == {link}
    assert found["speedstats / v100"]["output"] == {
        "title": "v100: fail",
        "summary": f"**fail** on v100 at commit {SHA1[:12]}; [the Speed stats comment]({link})."
                   "\n\n- resnet50-bs2: failed: oneflow: CUDA out of memory"}
    assert found["speedstats / t4"]["output"]["title"] == "t4: no verdict: missing"
    assert "no results from this GPU" in found["speedstats / t4"]["output"]["summary"]


def test_a_second_report_updates_each_gpus_check_run(matrix_gh, tmp_path):
    gh = matrix_gh
    make_shard(tmp_path, "a100")
    make_shard(tmp_path, "v100", error="CUDA out of memory")
    assert matrix_report(gh, tmp_path, gpus=["a100", "v100"]).rc == 0
    make_shard(tmp_path, "v100", attempt=2)  # the re-run of the failed GPU passed
    result = matrix_report(gh, tmp_path, gpus=["a100", "v100"], attempt=2)
    assert result.rc == 0, result.err
    assert len(gh.check_runs(REPO)) == 2
    assert {n: c["conclusion"] for n, c in checks_by_name(gh).items()} == {
        "speedstats / a100": "success", "speedstats / v100": "success"}
    assert len(gh.requests_matching("POST", f"/repos/{REPO}/check-runs")) == 2


def test_report_with_no_check_run_creates_none(matrix_gh, tmp_path):
    make_shard(tmp_path, "a100")
    assert matrix_report(matrix_gh, tmp_path, "--no-check-run").rc == 0
    assert matrix_gh.check_runs(REPO) == [] and len(matrix_gh.comments(REPO, PR)) == 1


def test_report_with_a_token_without_checks_write_exits_2_naming_it(matrix_gh, tmp_path):
    matrix_gh.add_token(MATRIX_TOKEN, checks=False)
    make_shard(tmp_path, "a100")
    result = matrix_report(matrix_gh, tmp_path)
    assert result.rc == 2
    assert "the token needs `checks: write`" in result.err.splitlines()[-1]


def test_a_forks_pass_is_neutral_and_its_failure_a_failure(fake_github, tmp_path):
    gh = fake_github(MATRIX_TOKEN)
    gh.add_pull(REPO, PR, head_sha=SHA1, head_repo="fork/r")
    gh.add_workflow_run(REPO, RUN, SHA1, pull_requests=[], conclusion="failure", head_repo="fork/r")
    for gpu, error in (("a100", None), ("v100", "CUDA out of memory")):
        folder = make_shard(tmp_path, gpu, error=error)
        gh.add_artifact(REPO, RUN, folder.name, shard_zip(folder))
    result = fork_report(gh, tmp_path)
    assert result.rc == 0, result.err
    found = checks_by_name(gh)
    assert {n: c["conclusion"] for n, c in found.items()} == {
        "speedstats / a100": "neutral", "speedstats / v100": "failure"}
    assert found["speedstats / a100"]["output"]["title"] == "a100: pass, not vouched for"
    assert "a fork's run, which can write any figures" in found["speedstats / a100"]["output"]["summary"]


# -- the fake's Checks API refuses what GitHub refuses ----------------------------------------------------


@pytest.mark.parametrize("payload, message", [
    ({"head_sha": HEAD}, '"name" wasn\'t supplied.'),
    ({"name": "x"}, '"head_sha" wasn\'t supplied.'),
    ({"name": "x", "head_sha": "f" * 40}, f"No commit found for SHA: {'f' * 40}"),
    ({"name": "x", "head_sha": HEAD, "conclusion": "passed"}, "For 'properties/conclusion', \"passed\""),
    ({"name": "x", "head_sha": HEAD, "conclusion": "success", "status": "in_progress"},
     '"conclusion" can only be given with a status of "completed".'),
    ({"name": "x", "head_sha": HEAD, "status": "completed"}, '"conclusion" wasn\'t supplied.'),
    ({"name": "x", "head_sha": HEAD, "completed_at": "2024-01-01T00:00:00Z"},
     '"conclusion" wasn\'t supplied.'),
    ({"name": "x", "head_sha": HEAD, "conclusion": "success", "output": {"title": "t"}},
     '"summary" wasn\'t supplied.'),
    ({"name": "x", "head_sha": HEAD, "conclusion": "success",
      "output": {"title": "t", "summary": "s" * 65536}},
     "Only 65535 characters are allowed; 65536 were supplied."),
])
def test_the_fake_refuses_a_check_run_as_github_does(gh, payload, message):
    answer = requests.post(f"{gh.url}/repos/{REPO}/check-runs", json=payload,
                           headers={"Authorization": f"token {TOKEN}"}, timeout=10)
    assert answer.status_code == 422 and message in answer.json()["message"]
    assert gh.check_runs(REPO) == []


def test_the_fake_lists_the_newest_of_a_name_unless_asked_for_all(gh):
    auth = {"Authorization": f"token {TOKEN}"}
    for conclusion in ("failure", "success"):
        answer = requests.post(f"{gh.url}/repos/{REPO}/check-runs", headers=auth, timeout=10, json={
            "name": "speedstats / a100", "head_sha": HEAD, "conclusion": conclusion})
        assert answer.status_code == 201 and answer.json()["status"] == "completed"
    url = f"{gh.url}/repos/{REPO}/commits/{HEAD}/check-runs"
    latest = requests.get(url, params={"check_name": "speedstats / a100"}, headers=auth, timeout=10).json()
    assert [c["conclusion"] for c in latest["check_runs"]] == ["success"]
    every = requests.get(url, params={"filter": "all"}, headers=auth, timeout=10).json()
    assert [c["conclusion"] for c in every["check_runs"]] == ["success", "failure"]
    other = requests.get(url, params={"check_name": "other"}, headers=auth, timeout=10).json()
    assert other == {"total_count": 0, "check_runs": []}
