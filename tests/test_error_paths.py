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
from speedstats import cli
from speedstats.bundle import read_bundle_zip, write_bundle
from speedstats.errors import UserError
from speedstats.fsutil import write_atomic

ROOT = Path(__file__).resolve().parents[1]
RESULTS = {
    "schema": "speedstats/results/v1", "suite": "smoke", "device": "cpu", "gpu_name": "Some CPU",
    "cases": [{"id": "resnet50-bs2", "kind": "resnet50", "batch_size": 2, "times": 5, "input_shape": [2, 3, 64, 64],
               "frameworks": {"oneflow": {"total_s": 0.5, "per_iter_s": 0.1, "times": 5},
                              "pytorch": {"total_s": 0.25, "per_iter_s": 0.05, "times": 5}}}],
}


@pytest.fixture
def results_file(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(RESULTS))
    return path


def speedstats(*argv, **kwargs):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "speedstats", *map(str, argv)], stderr=subprocess.PIPE, text=True,
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
    proc = subprocess.run([sys.executable, "-c", script, "render", str(results_file), "--out", str(out / "comment.md")],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    assert proc.returncode == 2
    assert proc.stderr == f"speedstats: error: {out / 'comment.md'}: cannot write the output file: File too large\n"
    assert [p.name for p in out.iterdir()] == ["comment.md"] and (out / "comment.md").read_text() == "old"


def test_write_atomic_refuses_a_device():
    with pytest.raises(UserError, match="is not a regular file"):
        write_atomic("/dev/full", "x")


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
    prefix = "speedstats: error: internal error in 'speedstats render' during render_command (speedstats/render_cli.py:"
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


# -- trend, bundles -----------------------------------------------------------------------------------------


def test_dollars_in_a_gpu_name_or_case_id_are_drawn_as_text(tmp_path):
    pytest.importorskip("matplotlib")
    from speedstats.analysis.history import append_history
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
