"""Step outputs and the job summary, in the file format the Actions runner reads."""

import json

import pytest

from speedstats import actions_io
from speedstats.actions_io import append_summary, format_output, read_outputs, set_output
from speedstats.bundle import identity_from_env
from speedstats.errors import UserError
from speedstats.github import context, labels


def test_outputs_are_appended_one_record_per_call(tmp_path):
    out = tmp_path / "output"
    env = {"GITHUB_OUTPUT": str(out)}
    assert set_output("verdict", "pass", env=env)
    assert set_output("score", 0, env=env)
    assert set_output("results", "speedstats-out/results.json", env=env)
    assert out.read_text() == "verdict=pass\nscore=0\nresults=speedstats-out/results.json\n"
    assert read_outputs(out) == {"verdict": "pass", "score": "0", "results": "speedstats-out/results.json"}


def test_a_multiline_value_uses_a_heredoc_that_reads_back_whole(tmp_path):
    out = tmp_path / "output"
    body = "line one\nline = two\n\nlast"
    record = format_output("body", body)
    first, *_, closing = record.rstrip("\n").split("\n")
    assert first.startswith("body<<ghadelimiter_") and closing == first[len("body<<"):]
    set_output("body", body, env={"GITHUB_OUTPUT": str(out)})
    set_output("verdict", "fail", env={"GITHUB_OUTPUT": str(out)})
    assert read_outputs(out) == {"body": body, "verdict": "fail"}


def test_later_records_win_and_equals_signs_stay_in_the_value(tmp_path):
    out = tmp_path / "output"
    out.write_text("comment-url=a\ncomment-url=https://x/y?a=b\n")
    assert read_outputs(out) == {"comment-url": "https://x/y?a=b"}


def test_outside_actions_nothing_is_written(tmp_path):
    assert set_output("verdict", "pass", env={}) is False
    assert append_summary("text", env={}) is False
    assert list(tmp_path.iterdir()) == []


def test_summary_is_appended_with_a_final_newline(tmp_path):
    summary = tmp_path / "summary.md"
    env = {"GITHUB_STEP_SUMMARY": str(summary)}
    append_summary("## Speed stats", env=env)
    append_summary("verdict: pass\n", env=env)
    assert summary.read_text() == "## Speed stats\nverdict: pass\n"


def test_bad_output_names_are_refused():
    import re

    import pytest

    for name in ("", "a=b", "a\nb", " a"):
        with pytest.raises(ValueError, match=f"^{re.escape(f'output name {name!r} is not valid')}$"):
            format_output(name, "x")


# -- the job's runtime: identity and the event payload ---------------------------------------------------

SHA = "a" * 40


def write_event(tmp_path, payload, name="event.json"):
    path = tmp_path / name
    path.write_text(json.dumps(payload), encoding="utf-8")
    return path


def test_a_pull_request_event_gives_its_number_head_base_and_labels(tmp_path):
    path = write_event(tmp_path, {
        "repository": {"full_name": "o/r"},
        "pull_request": {"number": 7, "head": {"sha": SHA}, "base": {"ref": "master", "sha": "b" * 40},
                         "labels": [{"name": "automerge"}, {"color": "ededed"}, {"name": "bug"}]},
    })
    env = {"GITHUB_EVENT_PATH": str(path), "GITHUB_EVENT_NAME": "pull_request", "GITHUB_BASE_REF": "other"}
    assert actions_io.read_event(env) == actions_io.Event(
        name="pull_request", path=str(path), repo="o/r", pr_number=7, head_sha=SHA, base_ref="master",
        labels=("automerge", "bug"))
    assert actions_io.base_branch(env) == "master"


def test_a_workflow_run_event_gives_the_triggering_run(tmp_path):
    path = write_event(tmp_path, {"workflow_run": {"id": 55, "head_sha": SHA,
                                                   "pull_requests": [{"number": 9}]}})
    event = actions_io.read_event({"GITHUB_EVENT_PATH": str(path)})
    assert (event.name, event.run_id, event.head_sha, event.pr_number, event.labels) == (None, 55, SHA, 9, ())


def test_outside_actions_there_is_no_event_and_no_identity():
    assert actions_io.read_event({}) == actions_io.Event()
    assert actions_io.base_branch({}) is None
    assert actions_io.base_branch({"GITHUB_BASE_REF": "main"}) == "main"
    readers = (actions_io.repository, actions_io.run_id, actions_io.commit_sha, actions_io.api_url)
    assert [read({}) for read in readers] == [None, None, None, None]
    assert actions_io.job_path({}) == ""
    assert actions_io.tokens({}) == (None, None)


def test_the_job_identity_comes_from_its_variables():
    env = {"GITHUB_REPOSITORY": "o/r", "GITHUB_RUN_ID": "4242", "GITHUB_SHA": SHA, "GITHUB_JOB": "speed",
           "GITHUB_API_URL": "https://ghe.example/api/v3", "INPUT_TOKEN": "t2"}
    assert actions_io.repository(env) == "o/r"
    assert (actions_io.run_id(env), actions_io.commit_sha(env)) == (4242, SHA)
    assert actions_io.job_path(env) == "o/r/4242/speed"
    assert actions_io.api_url(env) == "https://ghe.example/api/v3"
    assert actions_io.tokens(env) == (None, "t2")
    assert actions_io.run_id({"GITHUB_RUN_ID": "12a"}) is None


def test_the_event_file_is_parsed_once_by_every_reader(tmp_path, monkeypatch):
    path = write_event(tmp_path, {"repository": {"full_name": "o/r"},
                                  "pull_request": {"number": 7, "head": {"sha": SHA}, "base": {"ref": "dev"},
                                                   "labels": [{"name": "bug"}]}})
    env = {"GITHUB_EVENT_PATH": str(path), "GITHUB_REPOSITORY": "o/r", "GITHUB_RUN_ID": "3"}
    parses = []
    real_load = json.load
    monkeypatch.setattr(json, "load", lambda f: parses.append(f.name) or real_load(f))
    assert actions_io.base_branch(env) == "dev"
    assert labels.prepare(environ=env).event_labels == ["bug"]
    assert context.resolve_target(environ=env) == context.Target("o/r", 7, SHA, 3)
    assert identity_from_env(env) == (7, SHA, 3, "o/r")
    assert parses == [str(path)]
    # A new payload at the same path is read again.
    path.write_text(json.dumps({"pull_request": {"number": 8}, "padding": "x" * 50}), encoding="utf-8")
    assert actions_io.read_event(env).pr_number == 8
    assert parses == [str(path)] * 2


@pytest.mark.parametrize("content, message", [
    (None, "event file not found"),
    ("{not json", ("not a readable JSON event: Expecting property name enclosed in double quotes: "
                   "line 1 column 2 (char 1)")),
    ("[1, 2]", "the event must be a JSON object"),
])
def test_a_bad_event_file_is_one_line_naming_it(tmp_path, content, message):
    path = tmp_path / "event.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    env = {"GITHUB_EVENT_PATH": str(path)}
    for read in (actions_io.read_event, actions_io.base_branch, identity_from_env):
        with pytest.raises(UserError) as err:
            read(env)
        assert str(err.value) == f"GITHUB_EVENT_PATH ({path}): {message}"


def test_workflow_commands_are_escaped_as_the_runner_unescapes_them():
    assert actions_io.workflow_command("group", "[1/2] a case") == "::group::[1/2] a case"
    assert actions_io.workflow_command("endgroup") == "::endgroup::"
    # In the message: %, CR and LF; in a property: also ':' and ','.
    assert actions_io.annotation("error", "speedstats a:b,c%", "50% slower\r\nsecond: line, end") == (
        "::error title=speedstats a%3Ab%2Cc%25::50%25 slower%0D%0Asecond: line, end")
    assert actions_io.annotation("warning", "t", "m") == "::warning title=t::m"
    with pytest.raises(ValueError):
        actions_io.annotation("fatal", "t", "m")
    assert actions_io.in_actions({"GITHUB_ACTIONS": "true"})
    assert not actions_io.in_actions({}) and not actions_io.in_actions({"GITHUB_ACTIONS": "false"})
