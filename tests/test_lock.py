"""The device lock between real processes: the second waits for the first, a timeout fails clearly,
and a killed holder frees the device."""

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from speedstats.errors import UserError
from speedstats.lock import (
    DeviceBusyError,
    device_lock,
    lock_path,
    lock_targets,
    normalize_device,
    read_holder,
)

SRC = str(Path(__file__).resolve().parents[1] / "src")

# Takes the lock, says "acquired <pid>", holds it until a line arrives on stdin, says "released".
HOLDER = textwrap.dedent(
    """
    import sys
    from speedstats.lock import device_lock
    device, lock_dir, timeout_s = sys.argv[1], sys.argv[2], float(sys.argv[3])
    with device_lock(device, timeout_s, lock_dir=lock_dir):
        print("acquired", flush=True)
        sys.stdin.readline()
        print("released", flush=True)
    """
)


def start_holder(device, lock_dir, timeout_s=30.0):
    env = {**os.environ, "PYTHONPATH": SRC}
    env.pop("GITHUB_JOB", None)
    return subprocess.Popen(
        [sys.executable, "-c", HOLDER, device, str(lock_dir), str(timeout_s)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )


def finish(proc, stdin_line="\n"):
    out, err = proc.communicate(stdin_line, timeout=30)
    return proc.returncode, out, err


def test_second_process_waits_until_the_first_releases(tmp_path):
    first = start_holder("cuda:0", tmp_path)
    assert first.stdout.readline() == "acquired\n"
    second = start_holder("cuda", tmp_path)  # "cuda" is the same GPU as "cuda:0"
    # The second one announces it is waiting, naming the holder, and has not acquired.
    waiting = second.stderr.readline()
    assert waiting.startswith(f"waiting for cuda:0 (held by pid {first.pid} since 20")
    assert waiting.endswith(")…\n")
    first.stdin.write("\n")
    first.stdin.flush()
    assert first.stdout.readline() == "released\n"
    code, out, _ = finish(second)
    assert code == 0
    assert out == "acquired\nreleased\n"
    assert finish(first) == (0, "", "")


def test_other_devices_do_not_wait(tmp_path):
    gpu = start_holder("cuda:0", tmp_path)
    assert gpu.stdout.readline() == "acquired\n"
    other = start_holder("cuda:1", tmp_path, timeout_s=0)
    cpu = start_holder("cpu", tmp_path, timeout_s=0)
    assert finish(other) == (0, "acquired\nreleased\n", "")
    assert finish(cpu) == (0, "acquired\nreleased\n", "")
    assert finish(gpu)[0] == 0


def test_timeout_raises_a_clear_error_in_another_process(tmp_path):
    first = start_holder("cpu", tmp_path)
    assert first.stdout.readline() == "acquired\n"
    waiter = start_holder("cpu", tmp_path, timeout_s=0.3)
    code, out, err = finish(waiter)
    assert code != 0 and out == ""
    assert f"waiting for cpu (held by pid {first.pid} since " in err
    assert "speedstats.lock.DeviceBusyError: cpu: still locked by pid " in err
    assert "wait longer with the suite's lock_timeout_s or --lock-timeout)" in err
    assert finish(first)[0] == 0


def test_a_killed_holder_frees_the_device(tmp_path):
    first = start_holder("cuda:0", tmp_path)
    assert first.stdout.readline() == "acquired\n"
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    first.stdout.close()
    first.stderr.close()
    first.stdin.close()
    with device_lock("cuda:0", timeout_s=0, lock_dir=tmp_path) as held:
        assert held == [lock_path("cuda:0", tmp_path)]
        assert read_holder(held[0]).startswith(f"pid {os.getpid()} since ")


def test_holder_record_is_written_while_held_and_cleared_after(tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_REPOSITORY", "o/r")
    monkeypatch.setenv("GITHUB_RUN_ID", "42")
    monkeypatch.setenv("GITHUB_JOB", "speed")
    with device_lock("cpu", timeout_s=0, lock_dir=tmp_path) as held:
        assert read_holder(held[0]).endswith(", job o/r/42/speed")
    assert (tmp_path / "cpu.lock").read_text() == ""
    assert read_holder(tmp_path / "cpu.lock") is None


def test_timeout_in_process_is_a_user_error_with_its_own_exit_code(tmp_path):
    holder = start_holder("cpu", tmp_path)
    assert holder.stdout.readline() == "acquired\n"
    messages = []

    class Stream:
        def write(self, text):
            messages.append(text)

        def flush(self):
            pass

    with pytest.raises(DeviceBusyError) as caught, \
            device_lock("cpu", timeout_s=0.2, lock_dir=tmp_path, stream=Stream()):
        pass
    assert isinstance(caught.value, UserError) and caught.value.exit_code == 4
    assert str(caught.value).startswith(f"cpu: still locked by pid {holder.pid} since ")
    assert "".join(messages).startswith(f"waiting for cpu (held by pid {holder.pid} since ")
    assert finish(holder)[0] == 0


def test_several_devices_are_all_held(tmp_path):
    with device_lock(["cuda:1", "cuda:0"], timeout_s=0, lock_dir=tmp_path) as held:
        assert held == sorted(lock_path(d, tmp_path) for d in ("cuda:0", "cuda:1"))
        waiter = start_holder("cuda:1", tmp_path, timeout_s=0)
        code, _, err = finish(waiter)
        assert code != 0 and "cuda:1: still locked by pid" in err


def test_a_new_lock_folder_and_file_are_writable_by_every_user(tmp_path):
    with device_lock("cpu", timeout_s=0, lock_dir=tmp_path / "locks") as held:
        assert (tmp_path / "locks").stat().st_mode & 0o7777 == 0o1777
        assert held[0].stat().st_mode & 0o777 == 0o666


def test_a_read_only_lock_file_still_locks(tmp_path):
    path = lock_path("cpu", tmp_path)
    path.write_text("")
    path.chmod(0o444)
    if os.access(path, os.W_OK):
        pytest.skip("running as root: nothing is read-only")
    with device_lock("cpu", timeout_s=0, lock_dir=tmp_path):
        waiter = start_holder("cpu", tmp_path, timeout_s=0)
        code, _, err = finish(waiter)
        assert code != 0 and "cpu: still locked by another process" in err


def test_lock_dir_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SPEEDSTATS_LOCK_DIR", str(tmp_path / "shared"))
    assert lock_path("CPU") == tmp_path / "shared" / "cpu.lock"
    monkeypatch.delenv("SPEEDSTATS_LOCK_DIR")
    assert lock_path("cpu") == Path("/tmp/speedstats-locks/cpu.lock")
    with pytest.raises(UserError, match="device: empty device name"):
        normalize_device(" ")


def gpu_uuids():
    """The UUIDs of the GPUs nvidia-smi sees, in its order; [] without a GPU."""
    if not shutil.which("nvidia-smi"):
        return []
    proc = subprocess.run(["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader"], check=False,
                          capture_output=True, text=True)
    return proc.stdout.split() if proc.returncode == 0 else []


@pytest.mark.skipif(bool(gpu_uuids()), reason="this machine has a GPU")
def test_without_nvml_a_gpu_lock_is_named_by_its_index():
    assert lock_targets("CUDA:1") == [("cuda:1", "cuda-1")]
    assert lock_targets("gpu") == lock_targets("cuda") == [("cuda:0", "cuda-0")]


@pytest.mark.skipif(not gpu_uuids(), reason="needs a GPU and nvidia-smi")
def test_a_gpu_lock_is_named_by_the_physical_gpu(monkeypatch):
    uuids = gpu_uuids()
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert lock_targets("cuda") == [(f"cuda:{i}", u.lower()) for i, u in enumerate(uuids)]
    # The last GPU made the only visible one, by index and by UUID: still the same lock.
    for visible in (str(len(uuids) - 1), uuids[-1]):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
        assert lock_targets("cuda:0") == lock_targets("cuda") == [("cuda:0", uuids[-1].lower())]


def test_cuda_visible_devices_maps_cuda_indices_to_nvml_ones(monkeypatch):
    from speedstats.gpuinfo import _visible_entry

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3, GPU-8932f937-d72c-4106-c12f-20bd9faed9f6")
    assert [_visible_entry(i) for i in range(3)] == [3, "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6", None]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert _visible_entry(0) is None
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert _visible_entry(2) == 2


def test_a_waiter_names_the_job_that_took_the_device_first(tmp_path):
    import select

    with device_lock("cpu", timeout_s=0, lock_dir=tmp_path):
        waiters = [start_holder("cpu", tmp_path), start_holder("cpu", tmp_path)]
        for waiter in waiters:
            assert waiter.stderr.readline().startswith(f"waiting for cpu (held by pid {os.getpid()} since ")
    ready, _, _ = select.select([w.stdout for w in waiters], [], [], 30)
    winner = next(w for w in waiters if w.stdout in ready)
    loser = next(w for w in waiters if w is not winner)
    assert winner.stdout.readline() == "acquired\n"
    # The other one says who holds the device now, and gets it when the winner is done.
    assert loser.stderr.readline().startswith(f"waiting for cpu (held by pid {winner.pid} since ")
    assert finish(winner) == (0, "released\n", "")
    assert finish(loser) == (0, "acquired\nreleased\n", "")
