"""`speedstats shard` and `speedstats report` against the loopback GitHub: one comment for a GPU matrix.

Each matrix job packs its results as a shard; the report job reads the shards (a folder per artifact, as
download-artifact lays them out, or a fork's run's artifacts through the API) and posts one comment.
"""

import json
import re
from concurrent.futures import ThreadPoolExecutor

import pytest

from fakegithub import actions_env, event_payload, run_speedstats
from matrix_shards import (
    GPUS,
    PR,
    REPO,
    RUN,
    SHA1,
    SHA2,
    SHA3,
    SHA4,
    TOKEN,
    block,
    default_suite_shards,
    fork_report,
    make_shard,
    report,
    results_json,
    shard_zip,
)
from speedstats.github import shards


def job_env(monkeypatch, sha, run_id, attempt):
    for name, value in {"GITHUB_REPOSITORY": REPO, "GITHUB_RUN_ID": str(run_id), "GITHUB_SHA": sha,
                        "GITHUB_RUN_ATTEMPT": str(attempt)}.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def gh(fake_github):
    server = fake_github(TOKEN)
    server.add_pull(REPO, PR, head_sha=SHA1, author="octo-author", labels=["automerge"])
    return server


def stats_comments(gh):
    return [c for c in gh.comments(REPO, PR) if "speedstats:speed-stats" in c["body"]]


def alerts(gh):
    return [c for c in gh.comments(REPO, PR) if "speedstats:speed-alert" in c["body"]]


def marker_of(body):
    return re.search(r"<!-- speedstats:speed-stats (.*) -->\Z", body).group(1)


def job_url(gh, job_id, run_id=RUN):
    return f"{gh.url}/{REPO}/actions/runs/{run_id}/job/{job_id}"


def run_url(gh, run_id=RUN):
    return f"{gh.url}/{REPO}/actions/runs/{run_id}"


def test_three_gpus_one_failed_one_missing_is_one_comment_failing(gh, tmp_path):
    make_shard(tmp_path, "a100")
    make_shard(tmp_path, "v100", error="CUDA out of memory")
    gh.add_workflow_run(REPO, RUN, SHA1, pull_requests=[PR])
    a100 = gh.add_job(REPO, RUN, "speed-stats (a100)")
    v100 = gh.add_job(REPO, RUN, "speed-stats (v100)", conclusion="failure")
    result = report(gh, tmp_path)
    assert result.rc == 0, result.err
    (comment,) = gh.comments(REPO, PR)
    assert comment["body"] == (
        f"**a100**\n\n{block('NVIDIA A100')}\n\n"
        f"**v100**\n\n{block('NVIDIA V100', error='CUDA out of memory')}\n\n"
        "| GPU | Verdict | State | Details |\n| --- | --- | --- | --- |\n"
        f"| a100 (NVIDIA A100) | ✔️ pass | [passed]({job_url(gh, a100)}) |  |\n"
        f"| v100 (NVIDIA V100) | ❌ fail (score 2) | [failed]({job_url(gh, v100)}) "
        "| resnet50-bs2: failed: oneflow: CUDA out of memory |\n"
        f"| t4 |  | [missing]({run_url(gh)}) | no results from this GPU (no job of this run ran it) |\n\n"
        "Overall: **fail** (1 of 3 GPUs passed, 1 failed, 1 missing) at commit 111111111111, "
        f"[run {RUN}, attempt 1]({run_url(gh)})"
        f"\n\n<!-- speedstats:speed-stats head={SHA1} run={RUN} attempt=1 verdict=fail -->")
    outputs = (tmp_path / "output").read_text()
    assert "verdict=fail\n" in outputs and "failed-gpus=v100\n" in outputs


def test_a_missing_gpu_makes_the_verdict_incomplete_never_pass(gh, tmp_path):
    make_shard(tmp_path, "a100")
    make_shard(tmp_path, "v100")
    result = report(gh, tmp_path)
    assert result.rc == 0, result.err
    (comment,) = stats_comments(gh)
    assert marker_of(comment["body"]).endswith("verdict=incomplete")
    assert "Overall: **incomplete** (2 of 3 GPUs passed, 1 missing)" in comment["body"]


def test_a_job_that_failed_before_its_figures_is_a_failed_row_with_its_error(gh, tmp_path):
    make_shard(tmp_path, "a100")
    make_shard(tmp_path, "v100", status="failure", results=False)
    gh.add_workflow_run(REPO, RUN, SHA1, pull_requests=[PR])
    gh.add_job(REPO, RUN, "speed-stats (t4)", conclusion="failure")
    result = report(gh, tmp_path)
    assert result.rc == 0, result.err
    body = stats_comments(gh)[0]["body"]
    assert "**v100**" not in body and "**t4**" not in body  # no figures, no block
    assert ("| v100 |  | [failed](" + run_url(gh) + ") | no results.json: the benchmark stopped before "
            "writing results |") in body
    assert "| t4 |  | [failed](" in body and "| the job failure before it uploaded its results |" in body
    assert "Overall: **fail** (1 of 3 GPUs passed, 2 failed)" in body


def test_a_cancelled_shard_is_a_cancelled_row_and_the_verdict_incomplete(gh, tmp_path):
    make_shard(tmp_path, "a100")
    make_shard(tmp_path, "v100", status="cancelled", cancelled=True)
    gh.add_workflow_run(REPO, RUN, SHA1, pull_requests=[PR])
    gh.add_job(REPO, RUN, "speed-stats (v100)", conclusion="cancelled")
    t4 = gh.add_job(REPO, RUN, "speed-stats (t4)", conclusion="cancelled")
    result = report(gh, tmp_path)
    assert result.rc == 0, result.err
    body = stats_comments(gh)[0]["body"]
    assert block("NVIDIA V100", cancelled=True) in body  # the block says it was cancelled, as the old job's
    assert "| [cancelled](" in body and "| cancelled after 1 cases |" in body
    assert (f"| t4 |  | [cancelled]({job_url(gh, t4)}) "
            "| the job was cancelled before it uploaded its results |") in body
    assert "Overall: **incomplete** (1 of 3 GPUs passed, 2 cancelled)" in body
    assert marker_of(body).endswith("verdict=incomplete")


def test_attempt_2_replaces_the_failed_gpu_and_attempt_1_never_wins(gh, tmp_path):
    gh.add_workflow_run(REPO, RUN, SHA1, pull_requests=[PR])
    for gpu in GPUS:
        make_shard(tmp_path, gpu, error="CUDA error: device-side assert" if gpu == "v100" else None)
        gh.add_job(REPO, RUN, f"speed-stats ({gpu})", conclusion="failure" if gpu == "v100" else "success")
    assert report(gh, tmp_path).rc == 0
    assert marker_of(stats_comments(gh)[0]["body"]).endswith("attempt=1 verdict=fail")
    # Re-run failed jobs: v100 runs again as attempt 2 and passes; the others keep their attempt-1 shards.
    gh.rerun(REPO, RUN)
    make_shard(tmp_path, "v100", attempt=2)
    v100 = gh.add_job(REPO, RUN, "speed-stats (v100)", run_attempt=2)
    result = report(gh, tmp_path, attempt=2)
    assert result.rc == 0, result.err
    (comment,) = gh.comments(REPO, PR)
    assert block("NVIDIA V100") in comment["body"] and "device-side assert" not in comment["body"]
    assert f"| v100 (NVIDIA V100) | ✔️ pass | [passed]({job_url(gh, v100)}) |  |" in comment["body"]
    assert marker_of(comment["body"]).endswith(f"run={RUN} attempt=2 verdict=pass")
    # A third attempt whose v100 job failed before uploading: the attempt-2 shard does not stand in.
    gh.rerun(REPO, RUN)
    gh.add_job(REPO, RUN, "speed-stats (v100)", conclusion="failure", run_attempt=3)
    assert report(gh, tmp_path, attempt=3).rc == 0
    (comment,) = stats_comments(gh)
    assert "**v100**" not in comment["body"]
    assert "| the job failure before it uploaded its results |" in comment["body"]


def test_without_the_jobs_the_highest_attempt_wins(gh, tmp_path):
    make_shard(tmp_path, "a100", error="first try failed")
    make_shard(tmp_path, "a100", attempt=2)
    make_shard(tmp_path, "a100", attempt=3, error="from a later attempt than this report's")
    result = report(gh, tmp_path, attempt=2, gpus=["a100"])  # the run is unknown: no jobs listed
    assert result.rc == 0, result.err
    assert "could not list the jobs of run" in result.err
    body = stats_comments(gh)[0]["body"]
    assert block("NVIDIA A100") in body and "first try" not in body and "later attempt" not in body


def test_an_older_runs_report_arriving_last_leaves_the_newer_comment(gh, tmp_path):
    gh.push(REPO, PR, SHA2)
    make_shard(tmp_path / "new", "a100", sha=SHA2, run_id=RUN + 1)
    make_shard(tmp_path / "old", "a100", sha=SHA1, run_id=RUN, error="old failure")
    newer = report(gh, tmp_path / "new", sha=SHA2, run_id=RUN + 1, gpus=["a100"])
    assert newer.rc == 0, newer.err
    shown = stats_comments(gh)[0]["body"]
    older = report(gh, tmp_path / "old", sha=SHA1, run_id=RUN, gpus=["a100"])
    assert older.rc == 0, older.err
    assert "has newer results" in older.err
    assert [c["body"] for c in gh.comments(REPO, PR)] == [shown]
    assert not gh.requests_matching("PATCH", "/repos/o/r/issues/comments/*")
    assert not gh.requests_matching("GET", "/repos/o/r/pulls/7/commits")  # the PR's head decided it


def test_a_rerun_of_an_older_commit_does_not_replace_the_current_heads_report(gh, tmp_path):
    gh.push(REPO, PR, SHA2)
    make_shard(tmp_path / "new", "a100", sha=SHA2, run_id=RUN)
    make_shard(tmp_path / "old", "a100", sha=SHA1, run_id=RUN + 5, attempt=2)  # a later run id, older commit
    assert report(gh, tmp_path / "new", sha=SHA2, run_id=RUN, gpus=["a100"]).rc == 0
    older = report(gh, tmp_path / "old", sha=SHA1, run_id=RUN + 5, attempt=2, gpus=["a100"])
    assert older.rc == 0 and "has newer results" in older.err
    assert f"head={SHA2} run={RUN} attempt=1" in stats_comments(gh)[0]["body"]


def test_two_reports_racing_leave_one_comment_the_newer(gh, tmp_path):
    gh.push(REPO, PR, SHA2)
    make_shard(tmp_path / "a", "a100", sha=SHA1, run_id=RUN)
    make_shard(tmp_path / "b", "a100", sha=SHA2, run_id=RUN + 1)
    gh.hold("POST", "/repos/o/r/issues/7/comments")  # both have listed and found nothing; both create
    with ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(report, gh, tmp_path / name, sha=sha, run_id=run_id, gpus=["a100"],
                            subprocess_=True)
                for name, sha, run_id in (("a", SHA1, RUN), ("b", SHA2, RUN + 1))]
        results = [r.result() for r in runs]
    assert [r.rc for r in results] == [0, 0], [r.err for r in results]
    assert len(gh.requests_matching("POST", "/repos/o/r/issues/7/comments")) == 2
    (comment,) = gh.comments(REPO, PR)
    assert f"head={SHA2} run={RUN + 1} attempt=1 verdict=pass" in comment["body"]


# -- turning red -------------------------------------------------------------------------------------------


def push_and_report(gh, tmp_path, sha, run_id, failing, *extra):
    if sha != SHA1:
        gh.push(REPO, PR, sha)
    root = tmp_path / f"run-{run_id}"
    make_shard(root, "a100", sha=sha, run_id=run_id)
    make_shard(root, "v100", sha=sha, run_id=run_id, error="CUDA out of memory" if failing else None)
    result = report(gh, root, *extra, sha=sha, run_id=run_id, gpus=["a100", "v100"])
    assert result.rc == 0, result.err
    return result


def test_pass_fail_fail_pass_posts_one_alert_mentioning_the_author_then_hides_it(gh, tmp_path):
    push_and_report(gh, tmp_path, SHA1, 1, failing=False)
    assert alerts(gh) == [] and gh.notified == []
    push_and_report(gh, tmp_path, SHA2, 2, failing=True)
    (alert,) = alerts(gh)
    report_url = f"{gh.url}/{REPO}/pull/{PR}#issuecomment-{stats_comments(gh)[0]['id']}"
    assert alert["body"] == (
        "@octo-author Speed stats turned red at commit 222222222222: failed on v100.\n\n"
        "- v100: resnet50-bs2: failed: oneflow: CUDA out of memory\n\n"
        f"[The Speed stats comment]({report_url}), [run 2]({run_url(gh, 2)})"
        f"\n\n<!-- speedstats:speed-alert head={SHA2} run=2 state=open gpus=v100 -->")
    assert gh.notified == [(alert["id"], "octo-author")]
    push_and_report(gh, tmp_path, SHA3, 3, failing=True)
    assert [a["id"] for a in alerts(gh)] == [alert["id"]] and len(gh.notified) == 1  # still red: nothing new
    push_and_report(gh, tmp_path, SHA4, 4, failing=False)
    (resolved,) = alerts(gh)
    assert resolved["body"] == (
        f"Speed stats pass again at commit 444444444444 ([the comment]({report_url})). They had turned red "
        f"at commit 222222222222 on v100.\n\n<!-- speedstats:speed-alert head={SHA2} run=2 state=resolved "
        "gpus=v100 -->")
    assert resolved["minimized"] == "OUTDATED"
    assert len(gh.notified) == 1 and len(gh.comments(REPO, PR)) == 2


def test_incomplete_then_fail_alerts_and_a_first_report_failing_does_not(gh, tmp_path):
    make_shard(tmp_path / "first", "a100", error="boom")
    assert report(gh, tmp_path / "first", gpus=["a100", "v100"]).rc == 0  # fail with nothing before it
    assert alerts(gh) == []
    push_and_report(gh, tmp_path, SHA2, 2, failing=False)
    make_shard(tmp_path / "partial", "a100", sha=SHA3, run_id=3)
    gh.push(REPO, PR, SHA3)
    assert report(gh, tmp_path / "partial", sha=SHA3, run_id=3, gpus=["a100", "v100"]).rc == 0
    assert marker_of(stats_comments(gh)[0]["body"]).endswith("verdict=incomplete")
    push_and_report(gh, tmp_path, SHA4, 4, True, "--notify-on-flip", "@alice, bob")
    (alert,) = alerts(gh)
    assert alert["body"].startswith("@alice @bob Speed stats turned red at commit 444444444444")
    assert gh.notified == [(alert["id"], "alice"), (alert["id"], "bob")]


def test_notify_off_posts_no_alert(gh, tmp_path):
    push_and_report(gh, tmp_path, SHA1, 1, failing=False)
    push_and_report(gh, tmp_path, SHA2, 2, True, "--notify-on-flip", "off")
    assert alerts(gh) == [] and gh.notified == []


def test_an_alert_the_token_may_not_hide_is_edited_and_stays_visible(gh, tmp_path):
    gh.add_token(TOKEN, may_minimize=False)
    push_and_report(gh, tmp_path, SHA1, 1, failing=False)
    push_and_report(gh, tmp_path, SHA2, 2, failing=True)
    result = push_and_report(gh, tmp_path, SHA3, 3, failing=False)
    (alert,) = alerts(gh)
    assert "state=resolved" in alert["body"] and alert["minimized"] is None
    assert "stays visible: the token may not hide it" in result.err


@pytest.mark.parametrize("value", ["", "al ice!", "-bad", "a" * 40])
def test_bad_notify_values_are_refused(gh, tmp_path, value):
    make_shard(tmp_path, "a100")
    result = report(gh, tmp_path, f"--notify-on-flip={value}")
    assert result.rc == 2 and "--notify-on-flip: must be off, author or a list of GitHub logins" in result.err
    assert gh.comments(REPO, PR) == []


# -- the fork path -----------------------------------------------------------------------------------------


def test_a_forks_sharded_run_is_one_comment_rendered_from_each_shards_results(fake_github, tmp_path):
    gh = fake_github(TOKEN)
    gh.add_pull(REPO, PR, head_sha=SHA1, head_repo="fork/r")
    gh.add_workflow_run(REPO, RUN, SHA1, pull_requests=[], conclusion="failure", head_repo="fork/r",
                        run_attempt=2)
    tries = (("a100", 1, None), ("v100", 1, "first try"), ("v100", 2, "CUDA out of memory"))
    for gpu, attempt, error in tries:
        folder = make_shard(tmp_path, gpu, attempt=attempt, error=error, body="@everyone free money")
        gh.add_artifact(REPO, RUN, folder.name, shard_zip(folder))
    with pytest.raises(ValueError, match="409 Conflict"):  # upload-artifact v4: a name once per run
        gh.add_artifact(REPO, RUN, "speedstats-shard-a100-1", b"")
    result = fork_report(gh, tmp_path)
    assert result.rc == 0, result.err
    (comment,) = gh.comments(REPO, PR)
    assert "free money" not in comment["body"]  # the fork's own text is never posted
    assert comment["body"].startswith(f"**a100**\n\n{block('NVIDIA A100')}\n\n**v100**\n\n"
                                      f"{block('NVIDIA V100', error='CUDA out of memory')}\n\n| GPU |")
    assert "first try" not in comment["body"]
    assert marker_of(comment["body"]) == f"head={SHA1} run={RUN} attempt=2 verdict=fail"
    downloads = gh.requests_matching("GET", "/repos/o/r/actions/artifacts/*/zip")
    assert len(downloads) == 3 and all(r.status == 302 for r in downloads)
    assert not any("authorization" in {k.lower() for k in r.headers} for r in gh.storage_requests)


@pytest.mark.parametrize("change, message", [
    ({"sha": SHA2}, "it says commit 222222222222, run 9100 of o/r ran 111111111111"),
    ({"run_id": RUN + 1}, f"it says run {RUN + 1}, this is run {RUN} of o/r"),
    ({"pr": 9}, "its shards name different pull requests (#7, #9)"),
])
def test_a_forks_shard_that_is_not_the_runs_is_refused(fake_github, tmp_path, change, message):
    gh = fake_github(TOKEN)
    gh.add_pull(REPO, PR, head_sha=SHA1, head_repo="fork/r")
    gh.add_workflow_run(REPO, RUN, SHA1, pull_requests=[], head_repo="fork/r")
    good = make_shard(tmp_path, "a100")
    bad = make_shard(tmp_path, "v100", **change)
    gh.add_artifact(REPO, RUN, good.name, shard_zip(good))
    gh.add_artifact(REPO, RUN, bad.name, shard_zip(bad))
    result = fork_report(gh, tmp_path)
    assert result.rc == 2 and message in result.err, result.err
    assert gh.comments(REPO, PR) == []


def test_a_forks_shard_named_for_another_gpu_is_refused(fake_github, tmp_path):
    gh = fake_github(TOKEN)
    gh.add_pull(REPO, PR, head_sha=SHA1, head_repo="fork/r")
    gh.add_workflow_run(REPO, RUN, SHA1, pull_requests=[], head_repo="fork/r")
    folder = make_shard(tmp_path, "a100")
    gh.add_artifact(REPO, RUN, "speedstats-shard-v100-1", shard_zip(folder))
    result = fork_report(gh, tmp_path)
    assert result.rc == 2 and "refusing it: it says GPU 'a100' attempt 1" in result.err
    assert gh.comments(REPO, PR) == []


# -- packing a shard ---------------------------------------------------------------------------------------


def test_shard_packs_the_results_or_says_why_there_are_none(tmp_path, monkeypatch):
    job_env(monkeypatch, SHA1, RUN, 2)
    out = tmp_path / "out"
    out.mkdir()
    env = {"GITHUB_REPOSITORY": REPO, "GITHUB_RUN_ID": RUN, "GITHUB_SHA": SHA1, "GITHUB_RUN_ATTEMPT": 2,
           "GITHUB_OUTPUT": tmp_path / "output"}
    result = run_speedstats(["shard", "--gpu", "a100", "--out", out, "--dir", tmp_path / "s", "--status",
                             "failure"], env)
    assert result.rc == 0, result.err
    shard = shards.read_shard_dir(tmp_path / "s")
    assert (shard.gpu, shard.run_attempt, shard.status, shard.results_json, shard.body) == (
        "a100", 2, "failure", None, None)
    assert shard.error == "no results.json: the benchmark stopped before writing results"
    assert "artifact-name=speedstats-shard-a100-2\n" in (tmp_path / "output").read_text()
    (out / "results.json").write_text(results_json("NVIDIA A100"))
    (out / "comment.md").write_text(block("NVIDIA A100"))
    assert run_speedstats(["shard", "--gpu", "a100", "--out", out, "--dir", tmp_path / "s"], env).rc == 0
    shard = shards.read_shard_dir(tmp_path / "s")
    assert (shard.status, shard.error, shard.body) == ("success", None, block("NVIDIA A100"))
    bad = run_speedstats(["shard", "--gpu", "a100/../x", "--out", out], env)
    assert bad.rc == 2 and "--gpu: a GPU key is a runner label" in bad.err


@pytest.mark.parametrize("text, message", [
    ("a100", "--gpus: not valid JSON"),
    ("[]", "--gpus: must be a non-empty JSON list"),
    ('["a100", "a100"]', "--gpus: GPU 'a100' is listed twice"),
    ('[{"gpu": "a 100"}]', "--gpus: a GPU key is a runner label"),
])
def test_bad_gpu_lists_are_refused(gh, tmp_path, text, message):
    env = actions_env(gh, TOKEN, REPO, tmp_path, event=event_payload("pull_request", REPO, PR, SHA1))
    result = run_speedstats(["report", "--gpus", text, "--shards", tmp_path], env)
    assert result.rc == 2 and message in result.err, result.err


def test_the_gpus_of_a_matrix_object_or_include_list(tmp_path):
    assert shards.parse_gpus('{"gpu": ["a100", "t4"]}') == ["a100", "t4"]
    assert shards.parse_gpus('[{"gpu": "a100", "labels": ["x"]}, {"gpu": "t4"}]') == ["a100", "t4"]


# -- size --------------------------------------------------------------------------------------------------


def test_twelve_gpus_of_the_default_suite_are_cut_per_gpu_never_by_a_422(gh, tmp_path):
    gpus = [f"gpu{i}" for i in range(12)]
    default_suite_shards(tmp_path, gpus)
    one_block = (tmp_path / "out-gpu0" / "comment.md").read_text(encoding="utf-8")
    assert 12 * len(one_block) > 65536  # it would not fit whole
    result = report(gh, tmp_path, gpus=gpus)
    assert result.rc == 0, result.err
    (comment,) = stats_comments(gh)
    body = comment["body"]
    # Each block is cut at a line boundary, and its longest line (the method's paragraph) is under 1000.
    assert 65536 - 1000 * len(gpus) < len(body) <= 65536
    assert [r.status for r in gh.requests_matching("POST", "/repos/o/r/issues/7/comments")] == [201]
    for gpu in gpus:  # each GPU's block is cut alike, closed, and points at where the figures are
        assert body.count(f"_({gpu}: cut to fit GitHub's limit of 65536 characters per comment, ") == 1
        assert f"the full figures are in [its job]({run_url(gh)}))_" in body
    # Each block's Speed stats and method's collapsed blocks, closed where the cut fell inside one.
    assert body.count("<details>") == body.count("</details>") >= 12
    assert body.count(" ``` ") % 2 == 0
    assert "| gpu11 (NVIDIA GPU11 with a long product name) | ❌ fail (score " in body


def test_eight_gpus_of_the_default_suite_head_against_base_fit_whole(gh, tmp_path):
    gpus = [f"gpu{i}" for i in range(8)]
    default_suite_shards(tmp_path, gpus)
    assert report(gh, tmp_path, gpus=gpus).rc == 0
    body = stats_comments(gh)[0]["body"]
    for gpu in gpus:
        assert (tmp_path / f"out-{gpu}" / "comment.md").read_text(encoding="utf-8") in body
    assert "cut to fit" not in body


CUDA_OOM = ("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity; 75.12 GiB "
            "already allocated; 1.45 GiB free; 76.10 GiB reserved in total by PyTorch) If reserved memory is "
            ">> allocated memory try setting max_split_size_mb to avoid fragmentation.")


def failing_shard(root, gpu, sha, run_id):
    """A shard of five cases, each failing with an ordinary out-of-memory message."""
    cases = []
    for batch in range(1, 6):
        oneflow = {"error": CUDA_OOM}
        cases.append({"id": f"resnet50-bs{batch}", "kind": "resnet50", "batch_size": batch, "times": 5,
                      "input_shape": [batch, 3, 64, 64],
                      "frameworks": {"oneflow": oneflow,
                                     "pytorch": {"total_s": 0.25, "per_iter_s": 0.05, "times": 5}}})
    text = json.dumps({"schema": "speedstats/results/v1", "suite": "smoke", "device": "cuda",
                       "gpu_name": f"NVIDIA {gpu.upper()}", "cases": cases})
    out = root / f"out-{gpu}"
    out.mkdir(parents=True)
    (out / "results.json").write_text(text, encoding="utf-8")
    (out / "comment.md").write_text(f"the Speed stats of {gpu}", encoding="utf-8")  # posted as it is
    shards.write_shard(root / "speedstats-shards" / shards.artifact_name(gpu, 1), gpu, "success", out,
                       (PR, sha, run_id, REPO), 1)


def test_an_alert_over_githubs_limit_keeps_every_gpu_and_the_links_and_is_posted(gh, tmp_path):
    gpus = [f"gpu{i:02}" for i in range(1, 49)]
    (tmp_path / "run-1" / "speedstats-shards").mkdir(parents=True)
    # 48 GPUs' check runs are test_check_runs.py's matter, not this alert's: left out to keep it quick.
    assert report(gh, tmp_path / "run-1", "--no-check-run", gpus=gpus).rc == 0  # no shard yet: incomplete
    gh.push(REPO, PR, SHA2)
    for gpu in gpus:
        failing_shard(tmp_path / "run-2", gpu, SHA2, 2)
    result = report(gh, tmp_path / "run-2", "--no-check-run", sha=SHA2, run_id=2, gpus=gpus)
    assert result.rc == 0, result.err
    (alert,) = alerts(gh)
    body = alert["body"]
    assert len(body) <= 65536
    assert body.startswith(f"@octo-author Speed stats turned red at commit 222222222222: failed on "
                           f"{', '.join(gpus)}.\n\n")
    assert body.endswith(f"[run 2]({run_url(gh, 2)})\n\n<!-- speedstats:speed-alert head={SHA2} run=2 "
                         f"state=open gpus={'%2C'.join(gpus)} -->")
    lines = [line for line in body.split("\n") if line.startswith("- gpu")]
    per_gpu = len(lines) // len(gpus)
    assert lines[0] == f"- gpu01: resnet50-bs1: failed: oneflow: {CUDA_OOM}"
    assert per_gpu < 5 and len(lines) == per_gpu * len(gpus)
    assert f"\n- and {(5 - per_gpu) * len(gpus)} more lines in the Speed stats comment\n\n[The Speed" in body
    assert gh.notified == [(alert["id"], "octo-author")]
