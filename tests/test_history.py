"""The history file: appended whole lines, read back with bad lines reported by number."""

import json

from speedstats.history import HISTORY_SCHEMA, append_history, history_line, read_history
from speedstats.results import CaseResult, FrameworkResult, Results


def results(oneflow_s=0.040):
    case = CaseResult(
        id="resnet50-bs16", kind="resnet50", batch_size=16, times=100, input_shape=[16, 3, 224, 224],
        frameworks={
            "oneflow": FrameworkResult(total_s=oneflow_s * 100, per_iter_s=oneflow_s, times=100,
                                       rounds_s=[oneflow_s] * 3, peak_memory_bytes=2 << 30,
                                       memory_kind="cuda-allocator"),
            "pytorch": FrameworkResult(total_s=5.7, per_iter_s=0.057, times=100, rounds_s=[0.057] * 3),
        },
    )
    return Results(suite="default", device="cuda", gpu_name="NVIDIA GeForce RTX 3080 Ti", cases=[case])


def test_append_creates_the_file_and_adds_one_line_per_run(tmp_path, monkeypatch):
    monkeypatch.delenv("GITHUB_SHA", raising=False)
    path = tmp_path / "sub" / "history.jsonl"
    first = append_history(path, results(0.040), commit="0123456789abcdef",
                           recorded_at="2024-01-02T03:04:05Z")
    append_history(path, results(0.046))
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    assert lines[0] == first and all(line.endswith("\n") for line in lines) and len(lines) == 2
    record = json.loads(lines[0])
    assert record["schema"] == HISTORY_SCHEMA
    assert record["commit"] == "0123456789abcdef" and record["recorded_at"] == "2024-01-02T03:04:05Z"
    assert record["results"] == results(0.040).to_dict()
    second = json.loads(lines[1])
    assert second["commit"] is None and second["recorded_at"].endswith("Z")

    entries, problems = read_history(path)
    assert problems == []
    assert [(e.line, e.commit, e.label) for e in entries] == [(1, "0123456789abcdef", "0123456"),
                                                              (2, None, "#2")]
    assert entries[1].results.cases[0].frameworks["oneflow"].per_iter_s == 0.046
    assert entries[0].results.cases[0].frameworks["oneflow"].peak_memory_bytes == 2 << 30


def test_the_commit_defaults_to_the_workflow_sha(tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_SHA", "feedfacecafebeef")
    path = tmp_path / "history.jsonl"
    append_history(path, results())
    assert read_history(path)[0][0].commit == "feedfacecafebeef"


def test_bad_lines_are_skipped_and_reported_with_their_line_number(tmp_path):
    path = tmp_path / "history.jsonl"
    good = history_line(results(), commit="aaaaaaaaaa", recorded_at="2024-01-01T00:00:00Z")
    broken_results = json.loads(good)
    del broken_results["results"]["cases"][0]["batch_size"]
    path.write_text(
        good
        + "{not json\n"
        + "\n"
        + json.dumps({"schema": "other/v9", "results": {}}) + "\n"
        + json.dumps(broken_results) + "\n"
        + "[1, 2]\n"
        + good.replace("aaaaaaaaaa", "bbbbbbbbbb")
        + '{"schema":"speedstats/history/v1","comm',  # cut short, no newline: another writer crashed
        encoding="utf-8",
    )
    entries, problems = read_history(path)
    assert [(e.line, e.commit) for e in entries] == [(1, "aaaaaaaaaa"), (7, "bbbbbbbbbb")]
    assert problems == [
        f"{path}:2: not valid JSON: Expecting property name enclosed in double quotes (column 2)",
        (f"{path}:4: field 'schema' must be 'speedstats/history/v1' or 'speedstats/history-summary/v1', "
         "got 'other/v9'"),
        f"{path}:5: results: cases[0] (resnet50-bs16): missing field 'batch_size'",
        f"{path}:6: must be a JSON object",
        f"{path}:8: not valid JSON: Unterminated string starting at (column 35)",
    ]
    # Appending after the cut-short line starts a line of its own, so the new run is readable.
    append_history(path, results(), commit="cccccccccc")
    entries, problems = read_history(path)
    assert entries[-1].commit == "cccccccccc" and entries[-1].line == 9
    assert len(problems) == 5


def test_a_bounded_file_folds_its_oldest_runs_into_one_summary_line_each_time(tmp_path):
    from histories import commit_of, history_runs
    from speedstats.history import SUMMARY_SCHEMA, load_history

    path = tmp_path / "history.jsonl"
    path.write_text("{not json\n", encoding="utf-8")  # a bad line is kept where it is, never dropped
    for commit, run in history_runs(47):
        append_history(path, run, commit=commit, max_runs=20)
    lines = path.read_text(encoding="utf-8").splitlines()
    history = load_history(path)
    # past 20 runs the oldest 4 (a fifth of 20) become one line: at run 21 and again at 25, ..., 45
    assert [s.runs for s in history.summaries] == [4] * 7
    assert [(s.first_commit, s.last_commit) for s in history.summaries[:2]] == [
        (commit_of(0), commit_of(3)), (commit_of(4), commit_of(7))]
    assert [e.commit for e in history.entries] == [commit_of(i) for i in range(28, 47)]
    assert lines[0] == "{not json"
    assert [json.loads(line)["schema"] for line in lines[1:8]] == [SUMMARY_SCHEMA] * 7
    assert history.summarised_runs + len(history.entries) == 47 and len(history.problems) == 1
    median = history.summaries[0].cases[0].frameworks["oneflow"].median_s
    assert 0.038 < median < 0.042
