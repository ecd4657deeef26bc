"""required-label: which labels count (live through the API, else the event's), and `speedstats comment`
with --verdict/--required-label, against the loopback GitHub."""

import io
import os
from unittest import mock

import pytest

from fakegithub import actions_env, event_payload, run_speedstats
from speedstats.errors import UserError
from speedstats.github import labels

REPO = "o/r"
TOKEN = "ghs_Labe1sT0kenNeverToBePrinted00000001"
SHA = "1" * 40
LABEL = "need-pass-speed-test"
BODY = ("<details>\n <summary>Speed stats:</summary>\n\n ``` \nGPU Name: X \n\n ❌ something\n ``` "
        "\n\n</details>")


@pytest.fixture
def gh(fake_github):
    server = fake_github(TOKEN)
    server.add_pull(REPO, 7, labels=["bug"], head_sha=SHA)
    return server


def labelled_event(*names):
    event = event_payload("pull_request", REPO, number=7, head_sha=SHA)
    event["pull_request"]["labels"] = [{"name": name, "color": "ededed"} for name in names]
    return event


def env_of(gh, tmp_path, event, token=TOKEN):
    env = actions_env(gh, token, REPO, tmp_path, event=event)
    if token is None:
        env.pop("GITHUB_TOKEN")
    return env


def decide(env):
    err = io.StringIO()
    # the client's retry waits are read from os.environ: scaled down as the job's env says
    with mock.patch.dict(os.environ, {k: v for k, v in env.items() if k.startswith("SPEEDSTATS_GITHUB_")}):
        fails = labels.verdict_fails_step(LABEL, labels.prepare(environ=env), err=err)
    return fails, err.getvalue()


def test_live_labels_win_over_the_events(gh, tmp_path):
    gh.add_label(REPO, 7, LABEL)
    fails, said = decide(env_of(gh, tmp_path, labelled_event("bug")))
    assert fails and f"the labels of {REPO}#7 (GitHub API) include {LABEL!r}: the step fails" in said
    assert gh.requests_matching("GET", f"/repos/{REPO}/issues/7/labels")


def test_a_label_removed_since_the_event_no_longer_counts(gh, tmp_path):
    fails, said = decide(env_of(gh, tmp_path, labelled_event(LABEL)))
    assert fails is False
    assert f"the labels of {REPO}#7 (GitHub API) do not include {LABEL!r} (required-label)" in said


def test_without_a_token_the_events_labels_count(gh, tmp_path):
    assert decide(env_of(gh, tmp_path, labelled_event(LABEL), token=None))[0] is True
    fails, said = decide(env_of(gh, tmp_path, labelled_event("bug"), token=None))
    assert fails is False
    assert f"the labels of {REPO}#7 in the event payload do not include {LABEL!r}" in said
    assert gh.requests_matching("GET", "*/labels") == []


def test_an_api_failure_falls_back_to_the_events_labels(gh, tmp_path):
    gh.fail("GET", f"/repos/{REPO}/issues/7/labels", status=502, times=10)
    fails, said = decide(env_of(gh, tmp_path, labelled_event(LABEL)))
    assert fails is True
    assert "::warning::speedstats: could not read the labels of o/r#7" in said and "using the event's" in said


def test_an_event_without_a_pull_request_never_fails_the_step(gh, tmp_path):
    fails, said = decide(env_of(gh, tmp_path, event_payload("push", REPO)))
    assert fails is False and "the event has no pull request to carry" in said
    assert decide({})[0] is False  # outside Actions: no event at all


def test_a_malformed_event_is_a_one_line_error(tmp_path):
    path = tmp_path / "event.json"
    path.write_text("{not json")
    with pytest.raises(UserError) as err:
        labels.prepare(environ={"GITHUB_EVENT_PATH": str(path), "GITHUB_REPOSITORY": REPO})
    assert str(err.value).startswith(f"GITHUB_EVENT_PATH ({path}): not a readable JSON event")


@pytest.mark.parametrize("live, verdict, rc", [([LABEL], "fail", 1), ([], "fail", 0), ([LABEL], "pass", 0)])
def test_comment_posts_then_fails_only_on_a_failed_verdict_and_the_label(gh, tmp_path, live, verdict, rc):
    for name in live:
        gh.add_label(REPO, 7, name)
    body = tmp_path / "comment.md"
    body.write_text(BODY, encoding="utf-8")
    result = run_speedstats(["comment", "--body-file", body, "--verdict", verdict, "--required-label", LABEL],
                            env_of(gh, tmp_path, labelled_event()))
    assert result.rc == rc, result.err
    assert [c["body"].split("\n\n<!--")[0] for c in gh.comments(REPO, 7)] == [BODY]


def test_comment_required_label_needs_the_verdict(gh, tmp_path):
    body = tmp_path / "comment.md"
    body.write_text(BODY, encoding="utf-8")
    result = run_speedstats(["comment", "--body-file", body, "--required-label", LABEL],
                            env_of(gh, tmp_path, labelled_event()))
    assert result.rc == 2
    assert result.err == ("speedstats: error: --required-label: needs --verdict pass|fail (the run's verdict "
                          "output)\n")
    assert gh.comments(REPO, 7) == []
