"""Every error path ends in one line and the right exit status, with nothing half written."""

import io
import json
import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from fakegithub import run_speedstats
from helpers import RESULTS
from speedstats import cli
from speedstats.bench import protocol
from speedstats.bundle import read_bundle_zip, write_bundle
from speedstats.errors import UserError
from speedstats.fsutil import write_atomic

ROOT = Path(__file__).resolve().parents[1]
OWN_ENV_PREFIXES = ("GITHUB_", "INPUT_", "RUNNER_", "SPEEDSTATS_")


@pytest.fixture
def results_file(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(RESULTS))
    return path


def speedstats(*argv, **kwargs):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "speedstats", *map(str, argv)], stderr=subprocess.PIPE,
                          text=True,
                          env=env, timeout=120, check=False, **kwargs)


# -- --out ------------------------------------------------------------------------------------------------


def test_out_under_a_file_is_one_line(results_file, tmp_path):
    (tmp_path / "a-file").write_text("x")
    result = run_speedstats(["render", results_file, "--out", tmp_path / "a-file" / "comment.md"], {})
    assert result.rc == 2
    assert result.err == (f"speedstats: error: {tmp_path / 'a-file' / 'comment.md'}: cannot write the output "
                          "file: a parent is not a folder\n")


def test_out_that_is_a_folder_is_one_line(results_file, tmp_path):
    result = run_speedstats(["render", results_file, "--out", tmp_path], {})
    assert (result.rc, result.err) == (2, f"speedstats: error: {tmp_path}: the output file is a folder\n")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_out_in_a_read_only_folder_is_one_line(results_file, tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    result = run_speedstats(["render", results_file, "--out", folder / "comment.md"], {})
    assert result.rc == 2 and "Permission denied" in result.err and len(result.err.splitlines()) == 1


def test_special_files_are_refused_and_left_as_they_are(results_file, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    target = tmp_path / "target.md"
    target.write_text("kept")
    link = tmp_path / "link.md"
    link.symlink_to(target)
    for path, what in ((fifo, "is not a regular file"), (link, "is a symbolic link"),
                       (Path("/dev/full"), "is not a regular file")):
        result = run_speedstats(["render", results_file, "--out", path], {})
        assert result.rc == 2, result.err
        assert result.err.startswith(f"speedstats: error: {path}: the output file {what}")
        assert len(result.err.splitlines()) == 1
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert os.path.islink(link) and target.read_text() == "kept"
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "link.md", "results.json", "target.md"]


def test_a_missing_out_is_created(results_file, tmp_path):
    out = tmp_path / "new" / "folder" / "comment.md"
    assert run_speedstats(["render", results_file, "--out", out], {}).rc == 0
    assert out.read_text(encoding="utf-8").startswith("<details>")


def test_a_full_disk_leaves_the_old_file_and_no_temporary_file(results_file, tmp_path):
    # RLIMIT_FSIZE makes a write fail as a full disk would (EFBIG instead of ENOSPC)
    out = tmp_path / "out"
    out.mkdir()
    (out / "comment.md").write_text("old")
    script = ("import resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
              "resource.setrlimit(resource.RLIMIT_FSIZE, (100, 100)); from speedstats.cli import main; "
              "sys.exit(main(sys.argv[1:]))")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    proc = subprocess.run([sys.executable, "-c", script, "render", str(results_file), "--out",
                           str(out / "comment.md")],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    assert proc.returncode == 2
    assert proc.stderr == (f"speedstats: error: {out / 'comment.md'}: cannot write the output file: File too "
                           "large\n")
    assert [p.name for p in out.iterdir()] == ["comment.md"] and (out / "comment.md").read_text() == "old"



def _cannot_mount_tmpfs():
    import shutil

    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return "needs root and unshare(1): a private mount namespace with a tiny tmpfs"
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
                           capture_output=True, text=True, check=False)
    if probe.returncode:
        return f"unshare -m with a tmpfs mount is not allowed here: {probe.stderr.strip()}"
    return None


TINY_RUN_SUITE = """\
name: tiny-disk
warmup: 1
cases:
  - {id: resnet50-bs1, kind: resnet50, batch_size: 1, image_size: 32, times: 1}
"""


@pytest.mark.heavy  # probes the installed PyTorch (about 15 s); measures nothing
def test_run_on_a_full_disk_is_exit_2_naming_the_file_with_nothing_half_written(tmp_path):
    why = _cannot_mount_tmpfs()
    if why:
        pytest.skip(why)
    pytest.importorskip("torch")
    (tmp_path / "suite.yml").write_text(TINY_RUN_SUITE, encoding="utf-8")
    disk = tmp_path / "disk"
    disk.mkdir()
    out = disk / "out"
    env = {k: v for k, v in os.environ.items() if not k.startswith(OWN_ENV_PREFIXES)}
    env.update(PYTHONPATH=str(ROOT / "src"), SPEEDSTATS_LOCK_DIR=str(tmp_path / "locks"),
               TMPDIR=str(tmp_path))
    # A 256 KiB tmpfs, its folder made, then filled to the last block.
    script = (f"mount -t tmpfs -o size=256k tmpfs {disk} && mkdir {out} && "
              f"(dd if=/dev/zero of={disk}/fill bs=4k 2>/dev/null; true) && "
              f"{sys.executable} -m speedstats run --suite {tmp_path / 'suite.yml'} --device cpu "
              f"--only pytorch --out {out} --cache-dir {tmp_path / 'cache'} --quiet; status=$?; "
              f"find {out} -type f; exit $status")  # the files the run left, before the tmpfs goes
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, env=env,
                          timeout=300, check=False)
    spec = out / "workers" / "resnet50-bs1" / "pytorch" / protocol.SPEC_FILE
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""  # no file at all: no 0-byte spec.json, no temporary file
    assert proc.stderr.splitlines()[-1] == (f"speedstats: error: {spec}: cannot write the worker's spec: "
                                            "No space left on device")
    assert "Traceback" not in proc.stderr



FULL_DISK_WRITES = """
import json, sys
from pathlib import Path
from speedstats.history import append_history
from speedstats.bench.protocol import round_file
from speedstats.bench.worker import _write_json
from speedstats.bundle import write_bundle
from speedstats.errors import UserError
from speedstats.results import loads
disk = Path(sys.argv[1])
results = json.dumps(json.loads(sys.argv[2]))
writes = {
    "history": lambda: append_history(disk / "history.jsonl", loads(results), commit="a" * 40),
    "bundle": lambda: write_bundle(disk / "bundle", results, "body", 7, "d" * 40, 55, "o/r"),
    "report": lambda: _write_json(disk / round_file(0), {"total_s": 1.0}),
}
for name, write in writes.items():
    try:
        write()
        print(name, "written")
    except UserError as exc:
        print(name, exc)
"""


def test_each_output_on_a_full_disk_is_a_user_error_naming_it_with_nothing_left(tmp_path):
    why = _cannot_mount_tmpfs()
    if why:
        pytest.skip(why)
    disk = tmp_path / "disk"
    disk.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    script = (f"mount -t tmpfs -o size=64k tmpfs {disk} "
              f"&& (dd if=/dev/zero of={disk}/fill bs=4k 2>/dev/null; true) "
              f"&& {sys.executable} -c \"$0\" {disk} '{json.dumps(RESULTS)}'; "
              f"find {disk} -mindepth 1 ! -name fill")
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script, FULL_DISK_WRITES], capture_output=True,
                          text=True, env=env, timeout=60, check=False)
    full = "No space left on device"
    assert proc.stdout.splitlines() == [
        f"history {disk / 'history.jsonl'}: cannot write the output file: {full}",
        f"bundle {disk / 'bundle' / 'results.json'}: cannot write the output file: {full}",
        f"report {disk / protocol.round_file(0)}: cannot write the worker's report: {full}",
        f"{disk / 'bundle'}",  # the empty folder; no file in it
    ], proc.stderr


def test_write_atomic_refuses_a_device():
    with pytest.raises(UserError, match="is not a regular file"):
        write_atomic("/dev/full", "x")



def test_a_sigterm_while_builds_are_inspected_ends_interrupted(tmp_path):
    import signal

    pytest.importorskip("torch")
    (tmp_path / "suite.yml").write_text(TINY_RUN_SUITE, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(OWN_ENV_PREFIXES)}
    env.update(PYTHONPATH=str(ROOT / "src"), SPEEDSTATS_LOCK_DIR=str(tmp_path / "locks"))
    proc = subprocess.Popen([sys.executable, "-m", "speedstats", "run", "--suite", tmp_path / "suite.yml",
                             "--device", "cpu", "--only", "pytorch", "--out", str(tmp_path / "out"),
                             "--cache-dir", str(tmp_path / "cache")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        first = proc.stderr.readline()  # printed just before the builds are inspected (a probe of seconds)
        assert first.startswith("speedstats: suite 'tiny-disk', 1 cases, device cpu"), first
        proc.send_signal(signal.SIGTERM)
        rest = proc.stderr.read()
        assert proc.wait(timeout=60) == 130, rest
    finally:
        proc.kill()
    assert rest.splitlines()[-1] == "speedstats: interrupted"
    assert not (tmp_path / "out" / "results.json").exists()


# -- a misspelt command ------------------------------------------------------------------------------------


def test_a_misspelt_command_is_one_line_with_the_closest_command():
    result = speedstats("rnu", stdout=subprocess.PIPE)
    assert (result.returncode, result.stdout, result.stderr) == (
        2, "", "speedstats: error: unknown command 'rnu' (did you mean run?)\n")
    result = speedstats("--debug", "post-from-artefact", "--dry-run")
    assert (result.returncode, result.stderr) == (
        2, "speedstats: error: unknown command 'post-from-artefact' (did you mean post-from-artifact?)\n")
    result = speedstats("xyzzy")
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("speedstats: error: unknown command 'xyzzy' (the commands: run, render, ")
    assert speedstats("run", "--help", stdout=subprocess.DEVNULL).returncode == 0


def test_each_command_is_registered_by_the_module_the_table_names_and_parses_alone():
    every = cli._command_parser_action(cli.build_parser()).choices
    assert list(every) == list(cli.COMMANDS)
    for command, module in cli.COMMANDS.items():
        alone = cli._command_parser_action(cli.build_parser(command)).choices
        assert command in alone and set(alone) <= {c for c, m in cli.COMMANDS.items() if m == module}
        assert [a.dest for a in alone[command]._actions] == [a.dest for a in every[command]._actions]


# -- stdout -----------------------------------------------------------------------------------------------


def test_a_closed_stdout_is_one_line(results_file):
    result = speedstats("render", results_file, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                        preexec_fn=lambda: os.close(1))
    message = "speedstats: error: stdout: closed; write the output to a file with --out\n"
    assert (result.returncode, result.stderr) == (2, message)


def test_a_broken_pipe_is_one_line(results_file):
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = speedstats("render", results_file, stdout=write_end)
    finally:
        os.close(write_end)
    assert result.returncode == 2
    assert result.stderr == ("speedstats: error: stdout: closed before the output was written "
                             "(write it to a file with --out)\n")


# -- internal errors --------------------------------------------------------------------------------------


def test_an_internal_error_is_one_line_naming_the_command_and_operation(results_file, monkeypatch, capsys):
    from speedstats import render_cli

    def broken(*args, **kwargs):
        return {}["no such key"]  # a bug in the renderer

    monkeypatch.setattr(render_cli, "render_speed_stats", broken)
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_SecretThatMustNotLeak0000000000001")
    assert cli.main(["render", str(results_file)]) == 6
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    prefix = ("speedstats: error: internal error in 'speedstats render' during render_command "
              "(speedstats/render_cli.py:")
    assert err.startswith(prefix) and "KeyError: 'no such key'; traceback in " in err
    log = Path(err.split("traceback in ")[1].split(" (or run")[0])
    try:
        assert "Traceback (most recent call last)" in log.read_text() and "render_command" in log.read_text()
    finally:
        log.unlink()
    assert cli.main(["--debug", "render", str(results_file)]) == 6
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last)") and err.splitlines()[-1].startswith(prefix)
    assert cli.main(["render", str(results_file), "--debug"]) == 6
    assert capsys.readouterr().err.startswith("Traceback")



def _broken_render(monkeypatch):
    from speedstats import render_cli

    def broken(*args, **kwargs):
        return {}["no such key"]

    monkeypatch.setattr(render_cli, "render_speed_stats", broken)


def _traceback_path(err):
    assert err.count("\n") == 1 and "; traceback in " in err, err
    return Path(err.split("traceback in ")[1].split(" (or run")[0])


@pytest.mark.parametrize("place", ["out", "runner-temp", "temp"])
def test_an_internal_errors_traceback_goes_beside_the_output_or_in_runner_temp(
        results_file, tmp_path, monkeypatch, capsys, place):
    _broken_render(monkeypatch)
    temp, runner_temp, out = tmp_path / "temp", tmp_path / "runner-temp", tmp_path / "out"
    for folder in (temp, runner_temp, out):
        folder.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(temp))
    monkeypatch.delenv("RUNNER_TEMP", raising=False)
    if place != "temp":
        monkeypatch.setenv("RUNNER_TEMP", str(runner_temp))
    argv = ["render", str(results_file)] + (["--out", str(out / "comment.md")] if place == "out" else [])
    assert cli.main(argv) == 6
    log = _traceback_path(capsys.readouterr().err)
    expected = {"out": out, "runner-temp": runner_temp, "temp": temp}[place]
    assert log.parent == expected and log.name.startswith("speedstats-traceback-") and log.suffix == ".txt"
    assert "Traceback (most recent call last)" in log.read_text(encoding="utf-8")
    # the one file, and nothing anywhere else
    assert [p for folder in (temp, runner_temp, out) for p in folder.iterdir()] == [log]


def test_an_internal_error_with_no_room_for_its_traceback_prints_it_and_leaves_no_file(
        results_file, tmp_path, monkeypatch, capsys):
    _broken_render(monkeypatch)
    monkeypatch.setenv("RUNNER_TEMP", str(tmp_path / "not-a-folder"))
    monkeypatch.setattr("tempfile.tempdir", "/proc")  # not writable, even for root
    assert cli.main(["render", str(results_file)]) == 6
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last)")
    assert err.splitlines()[-1].startswith("speedstats: error: internal error in 'speedstats render'")
    assert "traceback in" not in err


# -- trend, bundles -----------------------------------------------------------------------------------------


def test_dollars_in_a_gpu_name_or_case_id_are_drawn_as_text(tmp_path):
    pytest.importorskip("matplotlib")
    from speedstats.history import append_history
    from speedstats.results import loads

    data = json.loads(json.dumps(RESULTS))
    data["gpu_name"] = "GPU $\\undefinedcmd$"  # mathtext would fail on both
    data["cases"][0]["id"] = "case$^$"
    history = tmp_path / "h.jsonl"
    append_history(history, loads(json.dumps(data)), commit="a" * 40)
    result = run_speedstats(["trend", history, "--out", tmp_path / "trend"], {})
    assert result.rc == 0, result.err
    assert (tmp_path / "trend" / "case___.png").stat().st_size > 1000


def bundle_bytes(tmp_path):
    folder = tmp_path / "bundle"
    write_bundle(folder, json.dumps(RESULTS), None, 7, "d" * 40, 55, "o/r")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.iterdir()):
            archive.write(path, path.name)
    return buf.getvalue()


@pytest.mark.parametrize("damage", ["truncated", "flipped", "header"])
def test_a_corrupt_bundle_zip_is_one_line(tmp_path, damage):
    data = bytearray(bundle_bytes(tmp_path))
    if damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "flipped":  # the compressed bytes of bundle.json (after its 30 + 11 byte header)
        for i in range(41, 46):
            data[i] ^= 0xFF
    else:
        for i in range(160, 165):
            data[i] ^= 0xFF
    with pytest.raises(UserError) as caught:
        read_bundle_zip(bytes(data), "artifact 'b' of run 55")
    assert str(caught.value).startswith("artifact 'b' of run 55: ")
    if damage == "flipped":
        assert "unreadable archive member: Error -3 while decompressing data" in str(caught.value)
    assert "\n" not in str(caught.value)
