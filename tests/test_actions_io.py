"""Step outputs and the job summary, in the file format the Actions runner reads."""

from speedstats.actions_io import append_summary, format_output, read_outputs, set_output


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
