"""`speedstats comment` and `docs-preview` against the loopback GitHub: the final state of the PR."""

import pytest

from fakegithub import actions_env, event_payload, run_speedstats
from speedstats.actions_io import read_outputs

REPO = "o/r"
TOKEN = "ghs_C0mmentT0kenNeverToBePrinted0000001"
SHA1, SHA2, SHA3 = "1" * 40, "2" * 40, "3" * 40
LEGACY_BODY = ("<details>\n <summary>Speed stats:</summary>\n\n ``` \nGPU Name: old \n\n OneFlow resnet50 "
               "time: 1.0ms"
               "\n ``` \n\n</details>")


def stats_body(text):
    return (f"<details>\n <summary>Speed stats:</summary>\n\n ``` \nGPU Name: NVIDIA X \n\n {text}\n ``` "
            "\n\n</details>")


@pytest.fixture
def gh(fake_github):
    server = fake_github(TOKEN)
    server.add_pull(REPO, 7, head_sha=SHA1)
    return server


def write_body(tmp_path, text, name="comment.md"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8", newline="")
    return path


def pr_env(gh, tmp_path, sha, run_id, **extra):
    event = event_payload("pull_request", REPO, number=7, head_sha=sha)
    return actions_env(gh, TOKEN, REPO, tmp_path, event=event, GITHUB_RUN_ID=run_id, **extra)


def speed_stats_comments(gh):
    return [c for c in gh.comments(REPO, 7) if "Speed stats:" in c["body"]]


def test_update_mode_leaves_one_comment_after_three_pushes(gh, tmp_path):
    gh.add_comment(REPO, 7, "Looks good to me", login="reviewer")
    for run_id, sha in ((101, SHA1), (102, SHA2), (103, SHA3)):
        if sha != SHA1:
            gh.push(REPO, 7, sha)
        body = write_body(tmp_path, stats_body(f"run {run_id}"))
        result = run_speedstats(["comment", "--body-file", body], pr_env(gh, tmp_path, sha, run_id))
        assert result.rc == 0, result.err

    comments = gh.comments(REPO, 7)
    assert [c["body"] for c in comments if c["login"] == "reviewer"] == ["Looks good to me"]
    stats = speed_stats_comments(gh)
    assert len(stats) == 1
    assert stats[0]["body"] == stats_body("run 103") + (f"\n\n<!-- speedstats:speed-stats head={SHA3} "
                                                        "run=103 -->")


def test_new_mode_posts_one_comment_per_run(gh, tmp_path):
    for run_id in (101, 102, 103):
        body = write_body(tmp_path, stats_body(f"run {run_id}"))
        result = run_speedstats(["comment", "--body-file", body, "--mode", "new"],
                                pr_env(gh, tmp_path, SHA1, run_id))
        assert result.rc == 0, result.err
    bodies = [c["body"] for c in speed_stats_comments(gh)]
    assert [b.split("\n\n<!--")[0] for b in bodies] == [stats_body(f"run {r}") for r in (101, 102, 103)]


def test_the_body_goes_out_byte_exact_with_the_marker_after_a_blank_line(gh, tmp_path):
    text = stats_body("✔️ Relative speed: 1.32 (= 57.2ms / 43.4ms)")
    body = write_body(tmp_path, text)
    result = run_speedstats(["comment", "--body-file", body], pr_env(gh, tmp_path, SHA1, 55))
    assert result.rc == 0, result.err
    (comment,) = gh.comments(REPO, 7)
    assert comment["body"] == text + f"\n\n<!-- speedstats:speed-stats head={SHA1} run=55 -->"


def test_update_mode_takes_over_the_old_bots_comment(gh, tmp_path):
    old = gh.add_comment(REPO, 7, LEGACY_BODY, login="github-actions[bot]", user_type="Bot")
    quoting = gh.add_comment(REPO, 7, LEGACY_BODY + "\n\nwhy is this so slow?", login="human")
    body = write_body(tmp_path, stats_body("new figures"))
    result = run_speedstats(["comment", "--body-file", body], pr_env(gh, tmp_path, SHA1, 9))
    assert result.rc == 0, result.err
    by_id = {c["id"]: c["body"] for c in gh.comments(REPO, 7)}
    assert set(by_id) == {old, quoting}
    assert by_id[old].startswith(stats_body("new figures") + "\n\n<!-- speedstats:speed-stats")
    assert by_id[quoting] == LEGACY_BODY + "\n\nwhy is this so slow?"


def test_an_older_commits_results_do_not_replace_a_newer_ones(gh, tmp_path):
    """A late run of an older commit finds the newer commit's comment and leaves it."""
    gh.push(REPO, 7, SHA2)
    newer = write_body(tmp_path, stats_body("for sha2"), "newer.md")
    older = write_body(tmp_path, stats_body("for sha1"), "older.md")
    assert run_speedstats(["comment", "--body-file", newer], pr_env(gh, tmp_path, SHA2, 2)).rc == 0
    late = run_speedstats(["comment", "--body-file", older], pr_env(gh, tmp_path, SHA1, 1))
    assert late.rc == 0, late.err
    assert f"has newer results (commit {SHA2[:12]}, run 2); left as it is" in late.err
    assert [c["body"].split("\n\n<!--")[0] for c in gh.comments(REPO, 7)] == [stats_body("for sha2")]


def forged(run_id, text="forged"):
    return stats_body(text) + f"\n\n<!-- speedstats:speed-stats head={SHA1} run={run_id} -->"


@pytest.mark.parametrize("mode", ["update", "new"])
def test_a_marker_copied_into_another_users_comment_is_ignored_and_left_alone(gh, tmp_path, mode):
    # One forged marker claims newer results (a huge run id), one older: neither silences the bot,
    # neither is edited or deleted.
    newer = gh.add_comment(REPO, 7, forged(999999999, "newer, forged"), login="mallory", user_type="User")
    older = gh.add_comment(REPO, 7, forged(1, "older, forged"), login="mallory", user_type="User")
    body = write_body(tmp_path, stats_body("the real figures"))
    result = run_speedstats(["comment", "--body-file", body, "--mode", mode], pr_env(gh, tmp_path, SHA1, 50))
    assert result.rc == 0, result.err
    assert "left as it is" not in result.err
    comments = gh.comments(REPO, 7)
    assert [(c["id"], c["body"]) for c in comments[:2]] == [(newer, forged(999999999, "newer, forged")),
                                                           (older, forged(1, "older, forged"))]
    assert [(c["login"], c["body"].split("\n\n<!--")[0]) for c in comments[2:]] == [
        ("github-actions[bot]", stats_body("the real figures"))]
    edits = [r for r in gh.requests if r.method in ("PATCH", "DELETE")]
    assert edits == []


def test_a_personal_token_recognises_its_own_login_from_get_user(gh, tmp_path):
    token = "ghp_PersonalT0kenOfThePerfBot000000000001"
    gh.add_token(token, login="perf-bot", user_type="User")
    mine = gh.add_comment(REPO, 7, forged(1, "perf-bot's earlier figures"), login="perf-bot",
                          user_type="User")
    theirs = gh.add_comment(REPO, 7, forged(99, "forged"), login="github-actions[bot]", user_type="Bot")
    body = write_body(tmp_path, stats_body("new figures"))
    env = pr_env(gh, tmp_path, SHA1, 2, GITHUB_TOKEN=token)
    result = run_speedstats(["comment", "--body-file", body], env)
    assert result.rc == 0, result.err
    assert f"updated comment {mine}" in result.err
    by_id = {c["id"]: c["body"] for c in gh.comments(REPO, 7)}
    assert by_id == {mine: stats_body("new figures")
                     + f"\n\n<!-- speedstats:speed-stats head={SHA1} run=2 -->",
                     theirs: forged(99, "forged")}
    assert gh.requests_matching("GET", "/user")


def test_author_names_the_bot_when_the_token_cannot_say(gh, tmp_path):
    # e.g. a GitHub App's installation token: GET /user is refused, its comments are by my-app[bot]
    app = gh.add_comment(REPO, 7, forged(1, "the app's figures"), login="my-app[bot]", user_type="Bot")
    body = write_body(tmp_path, stats_body("mine"))
    env = pr_env(gh, tmp_path, SHA1, 2)
    default = run_speedstats(["comment", "--body-file", body], env)
    assert default.rc == 0, default.err
    assert "taking its comments to be github-actions[bot]'s" in default.err
    assert len(speed_stats_comments(gh)) == 2  # the app's comment is not github-actions[bot]'s
    named = run_speedstats(["comment", "--body-file", body, "--author", "my-app[bot]"],
                           pr_env(gh, tmp_path, SHA1, 3))
    assert named.rc == 0, named.err
    assert f"updated comment {app}" in named.err


def test_a_comment_longer_than_githubs_limit_is_cut_with_a_note_not_rejected(gh, tmp_path):
    lines = "\n".join(f"OneFlow resnet50 time: {i}.0ms (= {i}00.0ms / 100, input_shape=[16, 3, 224, 224])"
                      for i in range(2000))
    body = write_body(tmp_path, stats_body(lines))
    result = run_speedstats(["comment", "--body-file", body], pr_env(gh, tmp_path, SHA1, 5))
    assert result.rc == 0, result.err
    (comment,) = gh.comments(REPO, 7)
    posted = comment["body"]
    assert len(posted) <= 65536 < len(stats_body(lines))
    assert posted.endswith(f"\n\n<!-- speedstats:speed-stats head={SHA1} run=5 -->")
    assert "comment cut to fit GitHub's limit of 65536 characters" in posted
    head, _, tail = posted.partition("\n ``` \n\n</details>\n\n_(comment cut")
    # fence and details closed
    assert head.startswith(stats_body("")[:50]) and head.count("```") == 1 and tail
    assert head.endswith("input_shape=[16, 3, 224, 224])")  # cut at a line boundary


def test_comment_url_goes_to_github_output_or_stdout(gh, tmp_path):
    body = write_body(tmp_path, stats_body("x"))
    outputs = tmp_path / "github_output"
    outputs.write_text("")
    result = run_speedstats(["comment", "--body-file", body],
                            pr_env(gh, tmp_path, SHA1, 5, GITHUB_OUTPUT=outputs))
    assert result.rc == 0 and result.out == ""
    (comment,) = gh.comments(REPO, 7)
    assert read_outputs(outputs) == {"comment-url": f"{gh.url}/{REPO}/pull/7#issuecomment-{comment['id']}"}
    again = run_speedstats(["comment", "--body-file", body], pr_env(gh, tmp_path, SHA1, 5))
    assert again.out == f"{gh.url}/{REPO}/pull/7#issuecomment-{comment['id']}\n"


@pytest.mark.parametrize("kind", ["push", "workflow_dispatch", "schedule"])
def test_an_event_without_a_pull_request_is_a_message_and_exit_0(gh, tmp_path, kind):
    body = write_body(tmp_path, stats_body("x"))
    env = actions_env(gh, TOKEN, REPO, tmp_path, event_name=kind, event=event_payload(kind, REPO))
    result = run_speedstats(["comment", "--body-file", body], env)
    assert (result.rc, result.err) == (0,
                                       (f"speedstats: a {kind} event has no pull request; nothing to comment "
                                        "on\n"))
    assert gh.comments(REPO, 7) == []


def test_issue_comment_and_workflow_run_events_name_the_pull_request(gh, tmp_path):
    gh.add_pull(REPO, 8, head_sha=SHA2)
    gh.add_pull(REPO, 9, head_sha=SHA3)
    body = write_body(tmp_path, stats_body("x"))
    on_comment = actions_env(gh, TOKEN, REPO, tmp_path, event_name="issue_comment",
                             event=event_payload("issue_comment", REPO, number=8))
    on_run = actions_env(gh, TOKEN, REPO, tmp_path, event_name="workflow_run",
                         event=event_payload("workflow_run", REPO, number=9, head_sha=SHA3, run_id=77))
    assert run_speedstats(["comment", "--body-file", body], on_comment).rc == 0
    assert run_speedstats(["comment", "--body-file", body], on_run).rc == 0
    assert gh.comments(REPO, 8)[0]["body"].endswith(f"head={SHA2} -->")  # head looked up on the PR
    assert gh.comments(REPO, 9)[0]["body"].endswith(f"head={SHA3} -->")


def test_outside_actions_flags_name_the_pull_request(gh, tmp_path):
    body = write_body(tmp_path, stats_body("x"))
    env = {"SPEEDSTATS_GITHUB_TIME_SCALE": "0.001", "GITHUB_TOKEN": TOKEN}
    missing = run_speedstats(["comment", "--body-file", body, "--repo", REPO, "--api-url", gh.url], env)
    assert missing.rc == 2 and "speedstats: error: --pr: no pull request number" in missing.err
    ok = run_speedstats(["comment", "--body-file", body, "--repo", REPO, "--pr", 7, "--api-url", gh.url], env)
    assert ok.rc == 0, ok.err
    assert len(gh.comments(REPO, 7)) == 1


def test_dry_run_prints_the_request_and_sends_nothing(gh, tmp_path):
    old = gh.add_comment(REPO, 7, stats_body("old")
                         + f"\n\n<!-- speedstats:speed-stats head={SHA1} run=1 -->",
                         login="github-actions[bot]", user_type="Bot")
    body = write_body(tmp_path, stats_body("new"))
    result = run_speedstats(["comment", "--body-file", body, "--dry-run"], pr_env(gh, tmp_path, SHA1, 2))
    assert result.rc == 0, result.err
    assert result.out == (("speedstats: dry run, nothing is "
                           f"sent\nPATCH {gh.url}/repos/{REPO}/issues/comments/{old}\n\n")
                          + stats_body("new") + f"\n\n<!-- speedstats:speed-stats head={SHA1} run=2 -->\n")
    assert {r.method for r in gh.requests} == {"GET"}  # GET /user and the comments: nothing written
    sent = len(gh.requests)
    offline = run_speedstats(["comment", "--body-file", body, "--dry-run", "--repo", REPO, "--pr", 7], {})
    assert offline.rc == 0 and offline.out.startswith(
        "speedstats: dry run, nothing is sent\nPOST https://api.github.com/repos/o/r/issues/7/comments (no "
        "token")
    assert len(gh.requests) == sent


def test_docs_preview_posts_the_link_and_keeps_one(gh, tmp_path):
    env = pr_env(gh, tmp_path, SHA1, 3)
    argv = ["docs-preview", "--base-url", "https://staging.oneflow.info/"]
    for _ in range(3):
        result = run_speedstats(argv, env)
        assert result.rc == 0, result.err
    (comment,) = gh.comments(REPO, 7)
    assert comment["body"] == ("View latest API docs preview at: https://staging.oneflow.info/docs/o/r/pr/7/"
                               "\n\n<!-- speedstats:docs-preview -->")
    writes = [r for r in gh.requests if r.method != "GET"]
    assert [r.method for r in writes] == ["POST"]  # the second and third runs found it up to date


def test_docs_preview_leaves_the_old_bots_identical_link_alone(gh, tmp_path):
    text = "View latest API docs preview at: https://oneflow-staging.oss-cn-beijing.aliyuncs.com/docs/o/r/pr/7/"
    gh.add_comment(REPO, 7, text, login="github-actions[bot]", user_type="Bot")
    argv = ["docs-preview", "--base-url", "https://oneflow-staging.oss-cn-beijing.aliyuncs.com"]
    result = run_speedstats(argv, pr_env(gh, tmp_path, SHA1, 3))
    assert result.rc == 0 and "already up to date" in result.err
    assert [c["body"] for c in gh.comments(REPO, 7)] == [text]
    new = run_speedstats(argv + ["--mode", "new"], pr_env(gh, tmp_path, SHA1, 3))
    assert new.rc == 0
    assert len(gh.comments(REPO, 7)) == 2


def test_bad_input_is_one_line_and_exit_2(gh, tmp_path):
    env = pr_env(gh, tmp_path, SHA1, 3)
    missing = run_speedstats(["comment", "--body-file", tmp_path / "nope.md"], env)
    assert (missing.rc, missing.err) == (2,
                                         (f"speedstats: error: {tmp_path / 'nope.md'}: comment body not "
                                          "found\n"))
    empty = run_speedstats(["comment", "--body-file", write_body(tmp_path, "  \n")], env)
    assert empty.rc == 2 and "the comment body is empty" in empty.err
    bad_url = run_speedstats(["docs-preview", "--base-url", "staging.oneflow.info"], env)
    assert bad_url.rc == 2 and "--base-url: must be an http(s) URL" in bad_url.err
    bad_repo = run_speedstats(["docs-preview", "--base-url", "https://x", "--repo", "nope"], env)
    assert bad_repo.rc == 2 and "--repo: must be OWNER/NAME" in bad_repo.err
    assert gh.comments(REPO, 7) == []
