"""`speedstats automerge-guard`: remove the label once, say so once, leave cancelled runs alone."""

import threading

import pytest

from fakegithub import actions_env, event_payload, run_speedstats

REPO = "o/r"
TOKEN = "ghs_GuardT0kenNeverToBePrinted0000000003"
SHA = "c" * 40
TEXT = "CI failed when running job: cuda-module. PR label automerge has been removed"


@pytest.fixture
def gh(fake_github):
    server = fake_github(TOKEN)
    server.add_pull(REPO, 7, labels=["bug", "automerge"], head_sha=SHA)
    return server


def env_for(gh, tmp_path, run_id=42):
    event = event_payload("pull_request", REPO, number=7, head_sha=SHA)
    return actions_env(gh, TOKEN, REPO, tmp_path, event=event, GITHUB_RUN_ID=run_id)


def test_a_failed_job_removes_the_label_once_and_comments_once(gh, tmp_path):
    for _ in range(2):
        result = run_speedstats(["automerge-guard", "--job", "cuda-module", "--status", "failure"],
                                env_for(gh, tmp_path))
        assert result.rc == 0, result.err
    assert gh.labels(REPO, 7) == ["bug"]
    assert [c["body"] for c in gh.comments(REPO, 7)] == [
        TEXT + f"\n\n<!-- speedstats:automerge-removed job=cuda-module head={SHA} run=42 -->"]
    assert len(gh.requests_matching("DELETE", "/repos/o/r/issues/7/labels/*")) == 1


@pytest.mark.parametrize("status", ["cancelled", "success"])
def test_a_cancelled_or_successful_job_does_nothing(gh, tmp_path, status):
    result = run_speedstats(["automerge-guard", "--job", "cuda-module", "--status", status],
                            env_for(gh, tmp_path))
    assert result.rc == 0
    assert f"status is {status}" in result.err
    assert gh.labels(REPO, 7) == ["bug", "automerge"]
    assert gh.comments(REPO, 7) == []
    assert gh.requests == []


def test_without_the_label_it_does_nothing(gh, tmp_path):
    gh.add_pull(REPO, 8, labels=["bug"])
    result = run_speedstats(["automerge-guard", "--job", "cuda-module", "--pr", 8], env_for(gh, tmp_path))
    assert result.rc == 0 and "no 'automerge' label; nothing to do" in result.err
    assert gh.labels(REPO, 8) == ["bug"] and gh.comments(REPO, 8) == []


def test_a_custom_label_and_a_job_name_with_spaces(gh, tmp_path):
    gh.add_label(REPO, 7, "merge-when-green")
    argv = ["automerge-guard", "--job", "Build cu116", "--label", "merge-when-green"]
    assert run_speedstats(argv, env_for(gh, tmp_path)).rc == 0
    assert gh.labels(REPO, 7) == ["bug", "automerge"]
    (comment,) = gh.comments(REPO, 7)
    assert comment["body"] == ("CI failed when running job: Build cu116. PR label merge-when-green has been "
                               "removed"
                               f"\n\n<!-- speedstats:automerge-removed job=Build%20cu116 head={SHA} run=42 "
                               "-->")


def test_a_500_after_the_label_was_removed_still_comments_once(gh, tmp_path):
    gh.fail("DELETE", "/repos/o/r/issues/7/labels/automerge", status=500, after=True)
    gh.fail("POST", "/repos/o/r/issues/7/comments", status=500, after=True)
    result = run_speedstats(["automerge-guard", "--job", "cuda-module"], env_for(gh, tmp_path))
    assert result.rc == 0, result.err
    assert gh.labels(REPO, 7) == ["bug"]
    assert [c["body"].split("\n\n<!--")[0] for c in gh.comments(REPO, 7)] == [TEXT]


def test_two_guards_of_one_run_racing_comment_once(gh, tmp_path):
    gh.hold("GET", "/repos/o/r/issues/7/labels", parties=2, timeout_s=60)  # both see the label first
    env = env_for(gh, tmp_path)
    results = []
    threads = [threading.Thread(target=lambda: results.append(
        run_speedstats(["automerge-guard", "--job", "cuda-module"], env, subprocess_=True)))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert [r.rc for r in results] == [0, 0], [r.err for r in results]
    assert sum("removed by another run" in r.err for r in results) == 1, [r.err for r in results]
    assert gh.labels(REPO, 7) == ["bug"]
    assert len(gh.comments(REPO, 7)) == 1


def test_dry_run_says_what_it_would_do(gh, tmp_path):
    result = run_speedstats(["automerge-guard", "--job", "cuda-module", "--dry-run"], env_for(gh, tmp_path))
    assert result.rc == 0
    assert result.out == (
        "speedstats: dry run, nothing is sent\n"
        f"DELETE {gh.url}/repos/o/r/issues/7/labels/automerge\nPOST {gh.url}/repos/o/r/issues/7/comments\n\n"
        + TEXT + f"\n\n<!-- speedstats:automerge-removed job=cuda-module head={SHA} run=42 -->\n")
    assert gh.labels(REPO, 7) == ["bug", "automerge"] and gh.comments(REPO, 7) == []


def test_a_copy_of_the_notice_by_someone_else_does_not_count_as_said(gh, tmp_path):
    copy = TEXT + f"\n\n<!-- speedstats:automerge-removed job=cuda-module head={SHA} run=42 -->"
    gh.add_comment(REPO, 7, copy, login="mallory", user_type="User")
    result = run_speedstats(["automerge-guard", "--job", "cuda-module"], env_for(gh, tmp_path))
    assert result.rc == 0, result.err
    assert [(c["login"], c["body"]) for c in gh.comments(REPO, 7)] == [("mallory", copy),
                                                                     ("github-actions[bot]", copy)]
