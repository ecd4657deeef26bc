"""Hostile and careless input to every command: FIFOs, devices, folders and files too large as inputs,
a results file's records of the wrong type, counts beyond what can run, and flags out of range. Each
ends in one line and a documented exit status, with nothing half written."""

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

from fakegithub import run_speedstats
from helpers import RESULTS
from procfs import reading_stdin
from speedstats.errors import UserError
from speedstats.fsutil import read_text

SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.fixture
def results_file(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(RESULTS))
    return path


# -- input files: regular files only, and bounded -------------------------------------------------------

def input_commands(path, results_file):
    """Each command that reads an input file, with what its errors call that file."""
    return {
        "render": (["render", path], "results file"),
        "render --suite": (["render", results_file, "--suite", path], "suite file"),
        "suite --suite": (["suite", "--suite", path], "suite file"),
        "parse": (["parse", path], "Speed stats file"),
        "compare": (["compare", results_file, path], "results file"),
        "comment --body-file": (["comment", "--repo", "o/r", "--pr", "7", "--body-file", path, "--dry-run"],
                                "comment body"),
        "report --gpus-file": (["report", "--gpus-file", path, "--shards", path.parent / "none"],
                               "--gpus-file"),
    }


def unblock_later(fifo, seconds=10):
    """A writer that opens the FIFO after a while, so a command waiting in open() fails the test
    instead of hanging it."""
    def open_and_close():
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:  # no reader (any more): nothing waits
            pass

    timer = threading.Timer(seconds, open_and_close)
    timer.daemon = True
    timer.start()
    return timer


@pytest.mark.parametrize("command", list(input_commands(Path("x"), Path("y"))))
def test_a_fifo_as_input_is_refused_at_once(tmp_path, results_file, command):
    fifo = tmp_path / "input.fifo"
    os.mkfifo(fifo)
    argv, what = input_commands(fifo, results_file)[command]
    timer = unblock_later(fifo)
    started = time.monotonic()
    result = run_speedstats(argv, {})
    timer.cancel()
    assert result.rc == 2
    assert result.err == f"speedstats: error: {fifo}: the {what} is a FIFO, not a regular file\n"
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("device, command", [("/dev/zero", "render"), ("/dev/zero", "suite --suite"),
                                             ("/dev/urandom", "render --suite")])
def test_a_symbolic_link_to_a_device_is_refused_unread(tmp_path, results_file, device, command):
    link = tmp_path / "speedstats.yml"
    link.symlink_to(device)
    # in a process of its own, under a memory limit: without the check it reads until memory runs out
    argv = input_commands(link, results_file)[command][0]
    limit = "import resource; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)); "
    proc = subprocess.run([sys.executable, "-c", limit + "from speedstats.cli import main; "
                           "raise SystemExit(main())", *map(str, argv)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(SRC)), timeout=60, check=False)
    assert proc.returncode == 2 and proc.stderr.startswith(f"speedstats: error: {link}: the ")
    assert proc.stderr.endswith(" is a device, not a regular file\n") and proc.stderr.count("\n") == 1


def test_an_input_file_over_its_bound_is_refused_without_reading_it_whole(tmp_path):
    suite = tmp_path / "huge.yml"
    with open(suite, "wb") as f:
        f.truncate(64 << 20)  # sparse: 64 MiB of zeros, far beyond any suite
    with pytest.raises(UserError) as refused:
        read_text(suite, "suite file")
    assert str(refused.value) == f"{suite}: the suite file is larger than 1 MiB"
    result = run_speedstats(["suite", "--suite", suite], {})
    assert (result.rc, result.err) == (
        2, f"speedstats: error: {suite}: the suite file is larger than 1 MiB\n")


def test_a_folder_as_input_is_one_line(tmp_path):
    result = run_speedstats(["parse", tmp_path], {})
    assert result.rc == 2
    assert result.err == (f"speedstats: error: {tmp_path}: "
                          "the Speed stats file is a folder, not a regular file\n")


# -- shard --dir ------------------------------------------------------------------------------------------

def shard_dir_env(tmp_path):
    return {"GITHUB_REPOSITORY": "o/r", "GITHUB_RUN_ID": "9100", "GITHUB_SHA": "1" * 40,
            "GITHUB_RUN_ATTEMPT": "1"}


def test_shard_dir_that_is_a_file_is_one_line(tmp_path, results_file):
    (tmp_path / "a-file").write_text("x")
    argv = ["shard", "--gpu", "a100", "--out", tmp_path]
    result = run_speedstats([*argv, "--dir", tmp_path / "a-file"], shard_dir_env(tmp_path))
    assert (result.rc, result.err) == (
        2, f"speedstats: error: {tmp_path / 'a-file'}: shard folder (--dir) is not a folder\n")
    result = run_speedstats([*argv, "--dir", tmp_path / "a-file" / "below"], shard_dir_env(tmp_path))
    assert result.rc == 2
    below = tmp_path / "a-file" / "below"
    assert result.err == (f"speedstats: error: {below}: cannot create the shard folder (--dir): "
                          "a part of the path is a file\n")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_shard_dir_that_is_read_only_is_one_line_and_leaves_nothing(tmp_path, results_file):
    folder = tmp_path / "shard"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        result = run_speedstats(["shard", "--gpu", "a100", "--out", tmp_path, "--dir", folder],
                                shard_dir_env(tmp_path))
    finally:
        folder.chmod(0o755)
    assert result.rc == 2 and result.err.startswith(f"speedstats: error: {folder / 'results.json'}: cannot "
                                                    "write the output file: Permission denied")
    assert list(folder.iterdir()) == []


# -- results.json's machine record and head-vs-base rule -------------------------------------------------

def with_machine(machine):
    return dict(RESULTS, machine=machine)


def paired_results(rule):
    data = json.loads(json.dumps(RESULTS))
    case = data["cases"][0]
    case["frameworks"]["oneflow_base"] = {"total_s": 0.5, "per_iter_s": 0.1, "times": 5}
    case["paired"] = {"verdict": "no change", "ratio": 1.0, "low": 0.99, "high": 1.01, "rounds": 10,
                      "rule": rule}
    return data


@pytest.mark.parametrize("data, message", [
    (with_machine({"driver": "535"}), "results: machine: field 'driver' must be a mapping, got '535'"),
    (with_machine({"preflight": "quiet"}),
     "results: machine: field 'preflight' must be a mapping, got 'quiet'"),
    (with_machine({"preflight": {"quiet": False, "waited_s": "x", "reasons": []}}),
     "results: machine.preflight: field 'waited_s' must be a number, got 'x'"),
    (with_machine({"preflight": {"quiet": False, "waited_s": 1e300, "reasons": []}}),
     "results: machine.preflight: field 'waited_s' must be between 0 and 1e+07, got 1e+300"),
    (with_machine({"preflight": {"quiet": False, "waited_s": 3, "reasons": 5}}),
     "results: machine.preflight: field 'reasons' must be a list, got 5"),
    (with_machine({"preflight": {"quiet": False, "waited_s": 3, "reasons": [{"a": 1}]}}),
     "results: machine.preflight: field 'reasons[0]' must be a string, got {'a': 1}"),
    (with_machine({"driver": {"version": "535", "notes": 5}}),
     "results: machine.driver: field 'notes' must be a list, got 5"),
    (paired_results("r"), "results: cases[0] (resnet50-bs2).paired: field 'rule' must be a mapping, got 'r'"),
    (paired_results({"min_effect": 0.04, "max_rounds": 40, "trim": 0.1}),
     "results: cases[0] (resnet50-bs2).paired.rule: missing field 'confidence'"),
    (paired_results({"min_effect": 0.04, "confidence": 0.95, "max_rounds": 40}),
     "results: cases[0] (resnet50-bs2).paired.rule: missing field 'trim'"),
    (paired_results({"min_effect": 0.04, "confidence": 0.95, "max_rounds": 4.5, "trim": 0.1}),
     "results: cases[0] (resnet50-bs2).paired.rule: field 'max_rounds' must be an integer, got 4.5"),
])
def test_a_results_file_with_a_wrong_machine_or_rule_record_is_bad_input(tmp_path, data, message):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    result = run_speedstats(["render", path, "--out", tmp_path / "comment.md"], {})
    assert (result.rc, result.err) == (2, f"speedstats: error: {path}: {message}\n".replace(
        f"{path}: results: ", f"{path}: "))
    assert not (tmp_path / "comment.md").exists()


def test_a_well_formed_machine_record_and_rule_still_render(tmp_path):
    data = paired_results({"min_effect": 0.04, "confidence": 0.95, "max_rounds": 40, "trim": 0.1})
    data["machine"] = {"preflight": {"quiet": False, "waited_s": 12.4, "reasons": ["another process"]},
                       "driver": {"version": "535", "notes": ["an old driver"]}}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    result = run_speedstats(["render", path], {})
    assert result.rc in (0, 1), result.err
    assert "after waiting 12s (another process)" in result.out and "an old driver" in result.out


# -- the head-vs-base rule's counts and budgets -------------------------------------------------------------

@pytest.mark.parametrize("field, value, expected", [
    ("max_rounds", 300_000_000, "at most 1000"),
    ("first_rounds", 5000, "between 3 and 1000"),
    ("step_rounds", 100_000, "between 1 and 1000"),
    ("confirm_rounds", 2_000_000, "between 0 and 1000"),
    ("max_extra_s", 1e9, "between 0 and 86400"),
    ("extra_factor", 1e6, "between 0 and 100"),
    ("futility_z", 1e6, "between 0 and 10"),
])
def test_the_rule_counts_and_budgets_are_bounded_by_what_can_run(tmp_path, field, value, expected):
    suite = tmp_path / "speedstats.yml"
    suite.write_text(f"extends: smoke\nhead_vs_base:\n  step_rounds: 1\n  {field}: {value}\n")
    result = run_speedstats(["suite", "--suite", suite], {})
    assert (result.rc, result.err) == (
        2, f"speedstats: error: {suite}: head_vs_base.{field}: must be {expected}, got {value!r}\n")


# -- flags out of range ------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["1e10", "1e300", "604801"])
def test_a_github_deadline_beyond_a_week_is_bad_input(tmp_path, value):
    body = tmp_path / "body.md"
    body.write_text("hello")
    result = run_speedstats(["comment", "--repo", "o/r", "--pr", "7", "--body-file", body, "--dry-run",
                             "--github-deadline", value], {})
    assert result.rc == 2 and f"--github-deadline: must be at most 604800 seconds (a week), got '{value}'" \
        in result.err
    result = run_speedstats(["comment", "--repo", "o/r", "--pr", "7", "--body-file", body, "--dry-run"],
                            {"SPEEDSTATS_GITHUB_REQUEST_DEADLINE": value, "GITHUB_TOKEN": "ghs_x0000000"})
    assert (result.rc, result.err) == (
        2, f"speedstats: error: SPEEDSTATS_GITHUB_REQUEST_DEADLINE: must be at most 604800, got '{value}'\n")


@pytest.mark.parametrize("job_name", ["{", "}{", "{0}", "{x}", "{}", "speed-stats", "{gpu!r:>99999999}",
                                      "{gpu:>99999999}", "{gpu.real}", "{gpu[0]}"])
def test_a_job_name_that_is_not_plain_text_with_gpu_is_bad_input(tmp_path, job_name):
    result = run_speedstats(["report", "--gpus", '["a100"]', "--shards", tmp_path, "--run-id", "5",
                             "--repo", "o/r", "--job-name", job_name], {})
    assert result.rc == 2 and result.err.startswith("speedstats: error: --job-name: ")
    assert result.err.count("\n") == 1


def test_a_job_name_with_doubled_braces_is_plain_text():
    from speedstats.github import shards

    assert shards.check_job_name("bench {{{gpu}}}") == "bench {{{gpu}}}"


@pytest.mark.parametrize("attempt", ["0", "-1", str(10**23), "1001", "x"])
def test_an_attempt_out_of_range_is_bad_input(tmp_path, attempt):
    result = run_speedstats(["report", "--gpus", '["a100"]', "--shards", tmp_path, "--run-id", "5",
                             "--repo", "o/r", "--attempt", attempt], {})
    assert result.rc == 2 and "--attempt: must be" in result.err


# -- signals: every command ends with its status, one line, and nothing partial ------------------------------

def start_speedstats(argv, env=None):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_", "RUNNER_"))}
    full_env.update({k: str(v) for k, v in (env or {}).items()})
    full_env["PYTHONPATH"] = str(SRC)
    full_env["NO_PROXY"] = full_env["no_proxy"] = "127.0.0.1,127.0.0.2,localhost"
    return subprocess.Popen([sys.executable, "-m", "speedstats", *map(str, argv)], env=full_env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(condition, proc, what, timeout=60):
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"never {what}: {proc.communicate()}")
        time.sleep(0.05)


@pytest.mark.parametrize("signum", [signal.SIGTERM])
@pytest.mark.parametrize("argv", [
    ["render", "-", "--out", "{tmp}/comment.md"],
    ["parse", "-", "--out", "{tmp}/results.json"],
    ["report", "--gpus-file", "-", "--shards", "{tmp}", "--run-id", "5", "--repo", "o/r"],
    ["comment", "--repo", "o/r", "--pr", "7", "--body-file", "-", "--dry-run"],
], ids=["render", "parse", "report", "comment"])
def test_a_signal_while_a_command_reads_its_input_ends_it_with_130_and_one_line(tmp_path, argv, signum):
    """SIGTERM, as a cancelled job and `kill` send it; SIGINT takes the same path (test_sigint_...)."""
    proc = start_speedstats([a.format(tmp=tmp_path) for a in argv])
    wait_for(lambda: reading_stdin(proc.pid), proc, "read its input")
    proc.send_signal(signum)
    proc.wait(timeout=60)  # stdin stays open: its end must not end the command first
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out, err) == (130, "", "speedstats: interrupted\n")
    assert list(tmp_path.iterdir()) == []


def test_sigint_takes_the_same_path(tmp_path):
    test_a_signal_while_a_command_reads_its_input_ends_it_with_130_and_one_line(
        tmp_path, ["render", "-", "--out", "{tmp}/comment.md"], signal.SIGINT)


def test_a_sigterm_during_fetch_baselines_download_leaves_nothing_in_dest(fake_github, tmp_path):
    from fakegithub import actions_env

    repo, token = "o/r", "ghs_SignalT0kenNeverToBePrinted00000000007"
    gh = fake_github(token)
    gh.add_workflow_run(repo, 100, "c" * 40, conclusion="success", event="push", workflow="build.yml",
                        branch="master", name="Build")
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("oneflow-0.9.1-cp310-none-any.whl", b"w" * 4000)
    blob = gh.add_artifact(repo, 100, "wheelhouse", archive.getvalue())
    gh.drip("GET", f"/_blobs/{blob}", interval_s=0.05)  # minutes for the whole archive
    dest = tmp_path / "baseline"
    env = actions_env(gh, token, repo, tmp_path)
    argv = ["fetch-baseline", "--workflow", "build.yml", "--branch", "master", "--dest", dest]
    proc = start_speedstats(argv, env)
    wait_for(lambda: dest.is_dir() and any(dest.glob(".baseline-*.zip")), proc, "started the download")
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)  # stdin stays open: its end must not end the command first
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out) == (130, "")
    assert err.endswith("speedstats: interrupted\n") and "Traceback" not in err
    assert list(dest.iterdir()) == []


def test_a_history_file_that_is_a_fifo_is_refused_before_it_is_read(tmp_path):
    from speedstats.history import append_history
    from speedstats.results import results_from_dict

    fifo = tmp_path / "history.jsonl"
    os.mkfifo(fifo)
    timer = unblock_later(fifo)
    with pytest.raises(UserError) as refused:
        append_history(fifo, results_from_dict(RESULTS), commit="a" * 40)
    timer.cancel()
    assert str(refused.value) == f"{fifo}: the history file is a FIFO, not a regular file"


def test_a_preflight_record_without_its_wait_still_says_the_gpu_was_not_quiet(tmp_path):
    data = json.loads((Path(__file__).parent / "data" / "head-vs-base-results.json").read_text())
    data["machine"]["preflight"]["waited_s"] = None
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    result = run_speedstats(["render", str(path)], {})
    assert result.rc == 1 and "The GPU was not quiet before the first case after waiting 0s" in result.out
