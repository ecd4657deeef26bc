"""No line speedstats writes to a job's log forges a workflow command: neither `::` at a line's start nor
the runner's older `##[` anywhere in a line, whatever a fork's results file, a suite file or a comment body
quote. The commands speedstats means (groups, annotations, warnings) still reach the runner whole."""

import io
import json
import re
import sys
import uuid

import pytest

from fakegithub import run_speedstats
from helpers import RESULTS
from speedstats import actions_io
from speedstats.actions_io import annotation, append_summary, log_safe, log_safe_streams, workflow_command
from speedstats.fsutil import write_stdout

SET_OUTPUT = "##[set-output name=comment-url;]https://evil.example/x"


def commands_in(text):
    """The lines of text that the runner would read as a workflow command (it splits at \\r as at \\n)."""
    return [line for line in re.split(r"[\r\n]", text) if line.lstrip().startswith("::") or "##[" in line]


def one_refusal(result):
    """The one line of a command refused as bad input, checked to hold no workflow command."""
    assert (result.rc, result.out) == (2, ""), result.err
    (line,) = result.err.splitlines()
    assert line.startswith("speedstats: error: ") and commands_in(result.err) == []
    return line


def test_a_value_quoted_in_a_refusal_forges_no_command(tmp_path):
    results = json.loads(json.dumps(RESULTS))
    results["cases"][0]["kind"] = SET_OUTPUT
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    line = one_refusal(run_speedstats(["render", path], {}, subprocess_=True))
    # still readable: the value shows, its `##[` with a fullwidth second `#`
    assert "field 'kind' must be one of" in line
    assert "'#\uff03[set-output name=comment-url;]https://evil.example/x'" in line


@pytest.mark.parametrize("field", ["##[add-mask]x", "::add-mask::x"])
def test_an_unknown_field_named_as_a_command_forges_none(tmp_path, field):
    suite = tmp_path / "suite.yml"
    suite.write_text("cases:\n  - {id: a, kind: resnet50, batch_size: 1, times: 1, "
                     + json.dumps(field) + ": 1}\n")
    results = tmp_path / "results.json"
    results.write_text(json.dumps(RESULTS))
    for argv in (["suite", "--suite", suite], ["render", results, "--suite", suite]):
        line = one_refusal(run_speedstats(argv, {}, subprocess_=True))
        assert "unknown field '" in line and "add-mask" in line


def test_a_comment_body_printed_in_the_log_forges_no_command(tmp_path):
    body = tmp_path / "body.md"
    lines = ["::set-output name=comment-url::https://evil.example/x", "  \t::add-mask::secret",
             "a cell ##[error]forged", "###[warning]three", "ordinary: a::b, # heading, [x] ##",
             "\r::notice::cr"]
    body.write_text("\n".join(lines) + "\n")
    result = run_speedstats(["comment", "--repo", "o/r", "--pr", "7", "--body-file", body, "--dry-run"], {},
                            subprocess_=True)
    assert result.rc == 0, result.err
    assert commands_in(result.out) == [] and commands_in(result.err) == []
    shown = result.out.splitlines()
    assert ":\uff1aset-output name=comment-url::https://evil.example/x" in shown
    assert "  \t:\uff1aadd-mask::secret" in shown
    assert "a cell #\uff03[error]forged" in shown and "##\uff03[warning]three" in shown
    assert "ordinary: a::b, # heading, [x] ##" in shown  # ordinary text is left as it is


def test_ordinary_text_is_unchanged_and_safe_text_stays_safe():
    for text in ("speedstats: error: a.json: cases[0] (x): field 'kind' must be one of resnet50",
                 "C++ std::vector, a::b:: and ## [x]", "  indented: text", "# a heading\n## another\n", ""):
        assert log_safe(text) == text
    for text in ("::a::b", "##[x]", "###[y]", "x\n ::z::", "x\r::z::", "\u2028::z", "##[##[", ":::x"):
        safe = log_safe(text)
        assert commands_in(safe) == [] and log_safe(safe) == safe


def test_the_commands_speedstats_means_pass_and_a_copy_of_one_does_not():
    forged = f"::warning::forged {uuid.uuid4()}"
    out = io.StringIO()
    saved = sys.stdout
    sys.stdout = out
    try:
        with log_safe_streams():
            print(workflow_command("group", "[1/2] a case ##[add-mask]x"))
            print(annotation("error", "speedstats ##[t]", "50% slower ##[m]"))
            print(forged)
            print(workflow_command("endgroup"))
            sys.stdout.write("a partial line ##[")  # written out when the streams are put back
    finally:
        sys.stdout = saved
    assert out.getvalue().split("\n") == [
        "::group::[1/2] a case #\uff03[add-mask]x",
        "::error title=speedstats #\uff03[t]::50%25 slower #\uff03[m]",
        ":\uff1a" + forged[2:],
        "::endgroup::",
        "a partial line #\uff03[",
    ]
    with pytest.raises(ValueError):
        workflow_command("set-output name=x;]")


def test_bytes_written_to_stdout_are_made_safe_too():
    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="ascii")  # write_stdout writes UTF-8 all the same
    saved = sys.stdout
    sys.stdout = stream
    try:
        with log_safe_streams():
            write_stdout("\u2714\ufe0f ok\n::set-output name=x::y\nlast ##[add-mask]z")
    finally:
        sys.stdout = saved
    stream.flush()
    assert raw.getvalue().decode("utf-8") == (
        "\u2714\ufe0f ok\n:\uff1aset-output name=x::y\nlast #\uff03[add-mask]z")


def test_the_job_summary_gets_no_command(tmp_path):
    summary = tmp_path / "summary.md"
    assert append_summary("# Speed stats\n::add-mask::x\n`##[error]y`", {"GITHUB_STEP_SUMMARY": str(summary)})
    assert summary.read_text(encoding="utf-8") == "# Speed stats\n:\uff1aadd-mask::x\n`#\uff03[error]y`\n"
    assert actions_io.append_summary("x", {}) is False
