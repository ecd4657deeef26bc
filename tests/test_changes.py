"""`speedstats changes`: the change points of history files, each with its shift, its interval and the
commits on either side of it, as a new user reads them from the data branch's files."""

import json

import pytest

from fakegithub import run_speedstats
from histories import GPU, commit_of, history_runs, history_text, recorded_at
from speedstats.history import appended, history_line


def write(tmp_path, text, name="history.jsonl"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("shift_at", [9, 24, 33])
def test_a_shift_at_a_chosen_commit_is_named_with_the_commits_around_it(tmp_path, shift_at):
    path = write(tmp_path, history_text(history_runs(40, shift_at=shift_at, shift=0.10)))
    result = run_speedstats(["changes", path], {})
    assert result.rc == 0, result.err
    first, second = result.out.splitlines()
    assert first.startswith(f"resnet50-bs16 on {GPU}, OneFlow: +")
    change = float(first.split(": +")[1].split("%")[0])
    assert 8.0 < change < 12.0 and "(95% interval +" in first and "ms -> " in first
    before, after = commit_of(shift_at - 1)[:12], commit_of(shift_at)[:12]
    assert second == (f"  from run {shift_at + 1} of 40 on: the last run before it {before} "
                      f"({recorded_at(shift_at - 1)}), the first after it {after} ({recorded_at(shift_at)}); "
                      f"git log {before}..{after}")
    assert result.err == ""


def test_json_gives_every_figure_of_the_shift(tmp_path):
    path = write(tmp_path, history_text(history_runs(40, shift_at=20, shift=-0.08)))
    result = run_speedstats(["changes", path, "--format", "json"], {})
    (record,) = json.loads(result.out)
    assert (record["case"], record["framework"], record["gpu_name"]) == ("resnet50-bs16", "oneflow", GPU)
    assert record["low"] < record["ratio"] < record["high"] < 1 and record["confidence"] == 0.95
    assert record["change"] == pytest.approx(record["ratio"] - 1)
    assert (record["before"]["runs"], record["after"]["runs"]) == (20, 20)
    assert record["last_before"] == {"commit": commit_of(19), "recorded_at": recorded_at(19), "line": 20}
    assert record["first_after"]["commit"] == commit_of(20)


def test_no_shift_says_so_and_a_framework_can_be_chosen(tmp_path):
    path = write(tmp_path, history_text(history_runs(40, pytorch_shift_at=15, shift=0.10)))
    assert run_speedstats(["changes", path, "--framework", "oneflow"], {}).out == \
        "no change point in 1 case(s) on 1 GPU(s)\n"
    out = run_speedstats(["changes", path, "--framework", "pytorch"], {}).out
    assert out.startswith(f"resnet50-bs16 on {GPU}, PyTorch: +") and f"git log {commit_of(14)[:12]}.." in out


def test_each_gpu_is_analysed_on_its_own_in_one_file_or_in_several(tmp_path):
    a100 = history_runs(30, shift_at=15, shift=0.10)
    h100 = history_runs(30, seed=12, gpu_name="NVIDIA H100 80GB HBM3")
    mixed = [run for pair in zip(a100, h100) for run in pair]  # the two GPUs' runs alternate in one file
    one = run_speedstats(["changes", write(tmp_path, history_text(mixed))], {})
    several = run_speedstats(["changes", write(tmp_path, history_text(a100), "a.jsonl"),
                              write(tmp_path, history_text(h100), "h.jsonl")], {})
    assert one.rc == several.rc == 0
    assert one.out.count("\n") == several.out.count("\n") == 2 and GPU in one.out and "H100" not in one.out
    assert f"git log {commit_of(14)[:12]}..{commit_of(15)[:12]}" in one.out
    assert "from run 16 of 30 on" in several.out


def test_a_bounded_file_and_bad_lines_are_told_on_stderr(tmp_path):
    text = ""
    for commit, results in history_runs(30, shift_at=20, shift=0.10):
        text = appended(text, history_line(results, commit=commit, recorded_at="2026-01-01T00:00:00Z"), 25)
    path = write(tmp_path, text + "{not json\n")
    result = run_speedstats(["changes", path], {})
    assert result.rc == 0
    assert f"git log {commit_of(19)[:12]}..{commit_of(20)[:12]}" in result.out
    assert f"speedstats: note: {path}: 5 older run(s) are summarised in the file (commits " in result.err
    assert f"speedstats: warning: skipped {path}:" in result.err


@pytest.mark.parametrize("args, message", [
    (["--case", "nope"], "--case: no run in the history has case 'nope'"),
    (["--last", "4"], "--last: must be at least 6, got 4"),
])
def test_bad_flags_are_one_line(tmp_path, args, message):
    path = write(tmp_path, history_text(history_runs(10)))
    result = run_speedstats(["changes", path, *args], {})
    assert (result.rc, result.err) == (2, f"speedstats: error: {message}\n")


def test_a_file_without_runs_is_refused(tmp_path):
    path = write(tmp_path, "{not json\n")
    result = run_speedstats(["changes", path], {})
    assert result.rc == 2
    assert result.err.endswith(f"speedstats: error: {path}: no usable run in the history file\n")
