"""Faults: 5xx and rate limits are retried without duplicates; 401/404 are clear errors; a fork's
read-only token ends in the job summary, a same-repository token without the permission fails naming
it; the token never shows in any output or log."""

import logging

import pytest

from fakegithub import actions_env, event_payload, run_speedstats

REPO = "o/r"
TOKEN = "ghs_Fau1tT0kenThatMustNeverBePrinted00002"
SHA = "a" * 40
BODY = "<details>\n <summary>Speed stats:</summary>\n\n ``` \nGPU Name: X \n\n figures\n ``` \n\n</details>"
CREATE = f"/repos/{REPO}/issues/7/comments"


@pytest.fixture
def gh(fake_github):
    server = fake_github(TOKEN)
    server.add_pull(REPO, 7, labels=["automerge"], head_sha=SHA)
    return server


@pytest.fixture
def body_file(tmp_path):
    path = tmp_path / "comment.md"
    path.write_text(BODY, encoding="utf-8")
    return path


def env_for(gh, tmp_path, token=TOKEN, head_repo=None, **extra):
    event = event_payload("pull_request", REPO, number=7, head_sha=SHA, head_repo=head_repo)
    return actions_env(gh, token, REPO, tmp_path, event=event, GITHUB_RUN_ID=42, **extra)


@pytest.mark.parametrize("mode", ["update", "new"])
def test_a_500_after_the_comment_was_stored_leaves_one_comment(gh, tmp_path, body_file, mode):
    gh.fail("POST", CREATE, status=500, after=True)
    result = run_speedstats(["comment", "--body-file", body_file, "--mode", mode], env_for(gh, tmp_path))
    assert result.rc == 0, result.err
    assert "GitHub answered 500" in result.err
    (comment,) = gh.comments(REPO, 7)
    assert comment["body"].startswith(BODY + "\n\n<!-- speedstats:speed-stats")
    assert len(gh.requests_matching("POST", CREATE)) == 1  # found it on the re-list, did not post again


def test_a_500_before_storing_is_retried_until_it_goes_through(gh, tmp_path, body_file):
    gh.fail("POST", CREATE, status=502, times=2)
    gh.fail("GET", CREATE, status=503, times=1)
    result = run_speedstats(["comment", "--body-file", body_file], env_for(gh, tmp_path))
    assert result.rc == 0, result.err
    assert len(gh.comments(REPO, 7)) == 1


def test_a_secondary_rate_limit_waits_what_retry_after_says(gh, tmp_path, body_file):
    gh.rate_limit("POST", CREATE, retry_after=7)
    result = run_speedstats(["comment", "--body-file", body_file], env_for(gh, tmp_path))
    assert result.rc == 0, result.err
    assert "GitHub answered 403 rate limit, Retry-After 7; retry 1 of 4 in 7s" in result.err
    assert len(gh.comments(REPO, 7)) == 1


def test_a_rate_limit_longer_than_the_cap_fails_clearly(gh, tmp_path, body_file):
    gh.rate_limit("GET", CREATE, retry_after=3600)
    result = run_speedstats(["comment", "--body-file", body_file], env_for(gh, tmp_path))
    assert result.rc == 5  # GitHub unreachable
    assert "speedstats: error: GitHub rate limit: asked to wait 3600s, more than the 300s" in result.err
    assert gh.comments(REPO, 7) == []


def test_server_errors_that_do_not_stop_give_up_with_a_clear_error(gh, tmp_path, body_file):
    gh.fail("GET", CREATE, status=500, times=99)
    result = run_speedstats(["comment", "--body-file", body_file], env_for(gh, tmp_path))
    assert result.rc == 5  # GitHub unreachable after the retries
    assert result.err.splitlines()[-1] == ("speedstats: error: list comments of o/r#7: GitHub answered 500 "
                                           "Server Error")
    assert len(gh.requests_matching("GET", CREATE)) == 5


def test_a_bad_token_is_a_clear_error(gh, tmp_path, body_file):
    result = run_speedstats(["comment", "--body-file", body_file], env_for(gh, tmp_path, token="ghs_wrong"))
    assert result.rc == 2
    assert result.err.splitlines()[-1] == (
        "speedstats: error: token: GitHub rejected it (401 Bad credentials) on find the token's login (GET "
        "/user)")


def test_a_missing_pull_request_is_a_clear_error(gh, tmp_path, body_file):
    result = run_speedstats(["comment", "--body-file", body_file, "--pr", 404], env_for(gh, tmp_path))
    assert result.rc == 2
    assert "speedstats: error: get pull request o/r#404: not found (404)" in result.err


def test_no_token_is_a_clear_error(gh, tmp_path, body_file):
    env = env_for(gh, tmp_path)
    del env["GITHUB_TOKEN"]
    result = run_speedstats(["comment", "--body-file", body_file], env)
    assert (result.rc, result.err) == (2,
                                       ("speedstats: error: token: none given (set GITHUB_TOKEN, or pass "
                                        "--token)\n"))


def test_input_token_is_used_when_github_token_is_absent(gh, tmp_path, body_file):
    env = env_for(gh, tmp_path)
    env["INPUT_TOKEN"] = env.pop("GITHUB_TOKEN")
    assert run_speedstats(["comment", "--body-file", body_file], env).rc == 0
    assert len(gh.comments(REPO, 7)) == 1


@pytest.mark.parametrize("head_repo", ["someone/r", ""], ids=["fork", "deleted-fork"])
def test_a_forks_read_only_token_warns_and_writes_the_job_summary(gh, tmp_path, body_file, head_repo):
    gh.add_token("ghs_forkReadOnly", write=False)
    summary = tmp_path / "summary.md"
    result = run_speedstats(["comment", "--body-file", body_file],
                            env_for(gh, tmp_path, token="ghs_forkReadOnly", head_repo=head_repo,
                                    GITHUB_STEP_SUMMARY=summary))
    assert result.rc == 0, result.err
    assert result.out.startswith("::warning::speedstats: could not post the comment on o/r#7: the token "
                                 "cannot "
                                 "write there (a pull request from a fork gets a read-only token); it is in "
                                 "the "
                                 "job summary instead.")
    assert summary.read_text(encoding="utf-8") == BODY + "\n"
    assert gh.comments(REPO, 7) == []


def test_a_forks_read_only_token_on_the_guard_leaves_the_label(gh, tmp_path):
    gh.add_token("ghs_forkReadOnly", write=False)
    result = run_speedstats(["automerge-guard", "--job", "cuda-module"],
                            env_for(gh, tmp_path, token="ghs_forkReadOnly", head_repo="someone/r"))
    assert result.rc == 0
    assert result.out.startswith("::warning::speedstats: could not remove the 'automerge' label on o/r#7")
    assert "CI failed when running job: cuda-module. PR label automerge has been removed" in result.out
    assert gh.labels(REPO, 7) == ["automerge"]


def test_a_same_repository_token_that_cannot_write_fails_naming_the_permission(gh, tmp_path, body_file):
    """An organisation's read-only default GITHUB_TOKEN on a branch of the repository: not a fork."""
    gh.add_token("ghs_orgReadOnly", write=False)
    summary = tmp_path / "summary.md"
    result = run_speedstats(["comment", "--body-file", body_file],
                            env_for(gh, tmp_path, token="ghs_orgReadOnly", GITHUB_STEP_SUMMARY=summary))
    assert result.rc == 2
    assert result.out == ""
    assert result.err.splitlines()[-1] == (
        "speedstats: error: could not post the comment on o/r#7: create a comment on o/r#7: GitHub answered "
        "403 Resource not accessible by integration; the token needs `pull-requests: write` (add it to the "
        "workflow's or the job's `permissions:`)")
    assert not summary.exists()
    assert gh.comments(REPO, 7) == []
    assert gh.requests_matching("POST", CREATE)[0].status == 403


def test_a_same_repository_token_that_cannot_write_labels_names_issues_write(gh, tmp_path):
    gh.add_token("ghs_orgReadOnly", write=False)
    result = run_speedstats(["automerge-guard", "--job", "cuda-module"],
                            env_for(gh, tmp_path, token="ghs_orgReadOnly"))
    assert result.rc == 2
    last = result.err.splitlines()[-1]
    assert last.startswith("speedstats: error: could not remove the 'automerge' label on o/r#7: "
                           "remove label ")
    assert last.endswith("the token needs `issues: write` (add it to the workflow's or the job's "
                         "`permissions:`)")
    assert gh.labels(REPO, 7) == ["automerge"]


def test_the_token_never_appears_in_output_or_logs(gh, tmp_path, body_file, caplog):
    """Every path that talks about a request: retries, rate limits, 401/404, a fork, a crash in the middle."""
    gh.add_token(TOKEN + "ro", write=False)
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="github")  # PyGithub logs each request, headers included, at DEBUG
    gh.fail("POST", CREATE, status=500, after=True)
    gh.rate_limit("GET", CREATE, retry_after=1)
    outputs, summary = tmp_path / "out", tmp_path / "summary"
    runs = [
        (["comment", "--body-file", body_file], TOKEN),
        (["comment", "--body-file", body_file, "--token", TOKEN, "--pr", 999], "ghs_other"),
        (["comment", "--body-file", body_file, "--dry-run"], TOKEN),
        (["docs-preview", "--base-url", "https://docs.example"], TOKEN + "ro"),  # a fork's: the summary
        (["automerge-guard", "--job", "Build cu116"], TOKEN),
        (["comment", "--body-file", body_file, "--api-url", "http://127.0.0.1:9"], TOKEN),  # nothing listens
        (["comment", "--body-file", body_file], TOKEN[:-1]),  # 401
    ]
    seen = []
    for argv, token in runs:
        head_repo = "someone/r" if token.endswith("ro") else None
        result = run_speedstats(argv, env_for(gh, tmp_path, token=token, head_repo=head_repo,
                                              GITHUB_OUTPUT=outputs, GITHUB_STEP_SUMMARY=summary))
        seen += [result.out, result.err]
    spawned = run_speedstats(["comment", "--body-file", body_file, "--token", TOKEN, "--pr", 404],
                             env_for(gh, tmp_path, token=TOKEN), subprocess_=True)
    assert spawned.rc == 2 and "not found (404)" in spawned.err
    seen += [spawned.out, spawned.err, outputs.read_text(), summary.read_text(), caplog.text]
    pygithub_logs = [r.getMessage() for r in caplog.records if r.name.startswith("github")]
    assert any("/repos/o/r/issues/7/comments" in m and "Authorization" in m for m in pygithub_logs)
    assert any("127.0.0.1:9" in text for text in seen)  # the unreachable server was reported
    assert not [text for text in seen if TOKEN in text or TOKEN[:-1] in text]


@pytest.mark.parametrize("data", [b'{"id": 1, "body": ', b"<html>proxy error</html>"])
def test_a_malformed_answer_names_the_request(gh, tmp_path, body_file, data):
    gh.answer_raw("GET", CREATE, data, times=99)
    result = run_speedstats(["comment", "--body-file", body_file], env_for(gh, tmp_path))
    assert result.rc == 5, result.err
    last = result.err.splitlines()[-1]
    assert last.startswith(f"speedstats: error: GitHub API ({gh.url}): list comments of o/r#7: ")
    assert "Traceback" not in result.err
    assert gh.comments(REPO, 7) == []


def test_a_dripping_answer_gives_up_within_the_deadlines(gh, tmp_path, body_file):
    import time

    gh.drip("GET", CREATE, interval_s=0.2, times=99)
    env = env_for(gh, tmp_path, SPEEDSTATS_GITHUB_REQUEST_DEADLINE="1", SPEEDSTATS_GITHUB_DEADLINE="2.5")
    started = time.monotonic()
    result = run_speedstats(["comment", "--body-file", body_file], env, subprocess_=True, timeout=30)
    elapsed = time.monotonic() - started
    assert result.rc == 5, result.err
    assert elapsed < 8, elapsed  # the deadline and a Python start-up; without it, this would never end
    lines = result.err.splitlines()
    assert lines[-1].startswith("speedstats: error: ") and "list comments of o/r#7" in lines[-1]
    assert "no complete answer within 1s" in result.err
    assert "Traceback" not in result.err
    assert gh.comments(REPO, 7) == []


def test_a_dripping_github_is_given_up_at_the_commands_deadline(gh, tmp_path, body_file):
    import time

    from speedstats.github.client import RetryPolicy

    assert RetryPolicy().command_deadline_s == 300  # the documented default (README, action.yml)
    gh.drip("GET", CREATE, interval_s=0.2, times=99)
    started = time.monotonic()
    # The request deadline stays at its default (120 s): only the command's, from the option, stops it.
    result = run_speedstats(["comment", "--body-file", body_file, "--github-deadline", "2"],
                            env_for(gh, tmp_path), subprocess_=True, timeout=60)
    elapsed = time.monotonic() - started
    assert result.rc == 5, result.err
    assert elapsed < 8, elapsed
    last = result.err.splitlines()[-1]
    assert last.startswith("speedstats: error: list comments of o/r#7: no complete answer within ")
    assert last.endswith("the command's deadline of 2s (--github-deadline)")
    assert gh.comments(REPO, 7) == []


@pytest.mark.parametrize("value", ["0", "-1", "inf", "soon"])
def test_a_bad_github_deadline_is_exit_2(gh, tmp_path, body_file, value):
    argv = ["comment", "--body-file", body_file, "--github-deadline", value]
    result = run_speedstats(argv, env_for(gh, tmp_path))
    assert result.rc == 2 and "--github-deadline" in result.err
    assert gh.requests_matching("GET", CREATE) == []
