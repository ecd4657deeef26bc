"""`speedstats run` refuses bad input before it measures anything."""

import os
import time
from pathlib import Path

import pytest

from speedstats.cli import main

TEMPLATES = Path(__file__).resolve().parents[1] / "templates"


@pytest.mark.frameworks
def test_a_template_typo_fails_before_the_run(tmp_path, capsys):
    mine = tmp_path / "templates"
    mine.mkdir()
    macros = (TEMPLATES / "speed_stats_macros.md.j2").read_text(encoding="utf-8")
    assert "of.per_iter_ms" in macros
    (mine / "speed_stats_macros.md.j2").write_text(macros.replace("of.per_iter_ms", "of.per_iter_msec"),
                                                   encoding="utf-8")
    out = tmp_path / "out"
    rc = main(["run", "--profile", "smoke", "--device", "cpu", "--templates", str(mine), "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith(f"speedstats: error: {mine / 'speed_stats_macros.md.j2'}:")
    assert "per_iter_msec" in err and err.count("\n") == 1
    assert not out.exists()


@pytest.mark.frameworks
def test_bundle_outside_a_job_fails_before_the_run(tmp_path, capsys, monkeypatch):
    for name in ("GITHUB_RUN_ID", "GITHUB_REPOSITORY", "GITHUB_SHA", "GITHUB_EVENT_PATH"):
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "out"
    rc = main(["run", "--profile", "smoke", "--device", "cpu", "--bundle", str(tmp_path / "b"), "--out",
               str(out)])
    assert rc == 2
    assert capsys.readouterr().err == (
        "speedstats: error: --bundle: needs GITHUB_RUN_ID, GITHUB_REPOSITORY, GITHUB_SHA or the event's "
        "head sha (set inside a GitHub Actions job)\n")
    assert not out.exists()


@pytest.mark.frameworks
def test_rounds_must_be_positive(tmp_path, capsys):
    rc = main(["run", "--profile", "smoke", "--device", "cpu", "--rounds", "0", "--out", str(tmp_path / "o")])
    assert rc == 2
    assert capsys.readouterr().err == "speedstats: error: --rounds: must be at least 1, got 0\n"


KEEP_RANGE = "must be between 2 (a head and its base) and 1000"


@pytest.mark.parametrize("flag, env, message", [
    (["--keep-builds", "1"], "", f"--keep-builds: {KEEP_RANGE}, got 1"),
    (["--keep-builds", "5000"], "", f"--keep-builds: {KEEP_RANGE}, got 5000"),
    ([], "eight", "SPEEDSTATS_KEEP_BUILDS: must be a whole number, got 'eight'"),
    ([], "0", f"SPEEDSTATS_KEEP_BUILDS: {KEEP_RANGE}, got 0"),
])
@pytest.mark.frameworks
def test_the_number_of_builds_the_cache_keeps_is_checked_before_the_run(tmp_path, capsys, monkeypatch,
                                                                       flag, env, message):
    monkeypatch.setenv("SPEEDSTATS_KEEP_BUILDS", env)
    out = tmp_path / "out"
    rc = main(["run", "--profile", "smoke", "--device", "cpu", "--out", str(out), *flag])
    assert (rc, capsys.readouterr().err) == (2, f"speedstats: error: {message}\n")
    assert not out.exists()


@pytest.mark.parametrize("where, message", [
    ("folder", "{path}: the history file is not a regular file"),
    ("missing/history.jsonl", "{path}: cannot write the history file: folder {tmp}/missing not found"),
    ("fifo", "{path}: the history file is not a regular file"),
    ("comment.md", ("{path}: not a speedstats history file (JSON Lines): {path}:1: not valid JSON: "
                    "Expecting value (column 1)")),
    ("/proc/history.jsonl", "{path}: cannot write the history file in /proc: "),
])
@pytest.mark.frameworks
def test_a_history_file_that_cannot_be_appended_fails_before_the_run(tmp_path, capsys, where, message):
    (tmp_path / "folder").mkdir()
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "comment.md").write_text("<details>\n <summary>Speed stats:</summary>\n")
    path = tmp_path / where
    out = tmp_path / "out"
    started = time.monotonic()
    rc = main(["run", "--profile", "smoke", "--device", "cpu", "--history", str(path), "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("speedstats: error: " + message.format(path=path,
                                                                 tmp=tmp_path)) and err.count("\n") == 1
    assert time.monotonic() - started < 5 and not out.exists()


def test_a_history_file_with_a_bad_line_among_good_ones_is_accepted(tmp_path):
    from speedstats.history import check_history_file, history_line
    from speedstats.results import Results

    path = tmp_path / "history.jsonl"
    path.write_text("{cut sho\n" + history_line(Results(suite="s", device="cpu", gpu_name="g")))
    before = path.read_text()
    check_history_file(path)  # accepted: no error, and the file is left as it was
    assert path.read_text() == before
    check_history_file(tmp_path / "new.jsonl")
    assert not (tmp_path / "new.jsonl").exists()


@pytest.mark.frameworks
def test_a_nan_lock_timeout_fails_before_the_run(tmp_path, capsys):
    rc = main(["run", "--profile", "smoke", "--device", "cpu", "--lock-timeout", "nan", "--out",
               str(tmp_path / "o")])
    assert rc == 2
    assert capsys.readouterr().err == (
        "speedstats: error: --lock-timeout: must be a finite number of seconds, not negative, got nan\n")


@pytest.mark.frameworks
def test_outputs_that_cannot_be_written_fail_before_the_run(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").symlink_to(tmp_path / "elsewhere.json")
    rc = main(["run", "--profile", "smoke", "--device", "cpu", "--out", str(out)])
    assert rc == 2
    assert capsys.readouterr().err == (f"speedstats: error: {out / 'results.json'}: the results.json is a "
                                       "symbolic "
                                       "link; refusing to replace it\n")
    assert sorted(p.name for p in out.iterdir()) == ["results.json"]  # no workers folder: nothing ran
