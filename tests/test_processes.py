"""Process clean-up with plain Python processes: a tree sweep that finds what escaped its session and
its parent, the parent-death signal, and a launcher's children keeping the device lock."""

import fcntl
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from procfs import running
from speedstats.bench import processes, protocol
from speedstats.bench.environment import subprocess_env
from speedstats.lock import device_lock, held_lock_fds

SRC = str(Path(__file__).resolve().parents[1] / "src")


def wait_for_file(path, timeout_s=30):
    deadline = time.monotonic() + timeout_s
    while not (path.exists() and path.read_text()):
        assert time.monotonic() < deadline, f"{path} never written"
        time.sleep(0.01)
    return int(path.read_text())


def python(code, **kwargs):
    env = dict(os.environ, PYTHONPATH=SRC, **kwargs.pop("env", {}))
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env, **kwargs)


def script(path, code):
    path.write_text(textwrap.dedent(code))
    return str(path)


def test_kill_tree_finds_a_descendant_in_its_own_session_whose_parent_is_gone(tmp_path):
    processes.become_subreaper()
    # The worker starts a child in a session of its own (as torchrun starts its ranks), which starts a
    # grandchild and exits: the grandchild is in no process group of the worker, and no descendant of it.
    grandchild = script(tmp_path / "grandchild.py", f"""
        import os, time
        open({str(tmp_path / "pid")!r}, "w").write(str(os.getpid()))
        time.sleep(600)
    """)
    child = script(tmp_path / "child.py", f"""
        import subprocess, sys
        subprocess.Popen([sys.executable, {grandchild!r}])
    """)
    worker = python(f"""
        import subprocess, sys, time
        subprocess.Popen([sys.executable, {child!r}], start_new_session=True).wait()
        time.sleep(600)
    """, env={processes.TAG_VARIABLE: "case-1"})
    orphan = wait_for_file(tmp_path / "pid")
    assert running(orphan) and os.getsid(orphan) != os.getsid(worker.pid)
    bystander = python("import time; time.sleep(600)", env={processes.TAG_VARIABLE: "case-2"})
    try:
        assert processes.kill_tree(worker, "case-1", wait_s=10) == []
        assert worker.returncode == -signal.SIGKILL
        assert not running(orphan)
        assert bystander.poll() is None  # another worker's process is left alone
    finally:
        bystander.kill()
        bystander.wait()


def test_a_process_that_asked_for_it_dies_with_its_parent(tmp_path):
    child = script(tmp_path / "child.py", f"""
        import os, sys, time
        from speedstats.bench import processes
        processes.die_with_parent(int(sys.argv[1]))
        open({str(tmp_path / "pid")!r}, "w").write(str(os.getpid()))
        time.sleep(600)
    """)
    parent = python(f"""
        import os, subprocess, sys, time
        subprocess.Popen([sys.executable, {child!r}, str(os.getpid())])
        time.sleep(600)
    """)
    orphan = wait_for_file(tmp_path / "pid")
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while running(orphan):
        assert time.monotonic() < deadline, "the child outlived its parent"
        time.sleep(0.01)


def test_the_children_of_a_wrapped_launcher_keep_the_device_locked(tmp_path):
    """A launcher closes every descriptor but 0-2 when it starts a rank; through speedstats.bench.launch
    the rank inherits the device lock anyway, so the device is locked until the rank is gone."""
    (tmp_path / "fake_launcher.py").write_text(textwrap.dedent(f"""
        import os, subprocess, sys
        rank = subprocess.Popen([sys.executable, "-c", "import os, time; open({str(tmp_path / protocol.pid_file(0))!r}, 'w').write(str(os.getpid())); time.sleep(600)"])
        rank.wait()
    """))  # noqa: E501
    locks = tmp_path / "locks"
    with device_lock("cpu", timeout_s=0, lock_dir=locks, stream=sys.stderr):
        fds = held_lock_fds()
        assert len(fds) == 1
        env = subprocess_env("pytorch")
        env.update({"PYTHONPATH": f"{SRC}:{tmp_path}", processes.PARENT_VARIABLE: str(os.getpid()),
                    processes.LOCK_FDS_VARIABLE: str(fds[0])})
        launcher = subprocess.Popen([sys.executable, "-m", "speedstats.bench.launch", str(tmp_path),
                                     "fake_launcher"], env=env, pass_fds=fds)
        rank = wait_for_file(tmp_path / protocol.pid_file(0))
        assert wait_for_file(tmp_path / protocol.LAUNCHER_PID_FILE) == launcher.pid
    assert held_lock_fds() == ()
    lock_file = os.open(locks / "cpu.lock", os.O_RDONLY)
    try:
        launcher.kill()  # the rank is left behind (nothing kills it in this test): the device stays locked
        launcher.wait()
        assert running(rank)
        with pytest.raises(BlockingIOError):
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.kill(rank, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while True:
            try:
                fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                assert time.monotonic() < deadline, "the device stayed locked after the rank died"
                time.sleep(0.01)
    finally:
        os.close(lock_file)


def test_workers_get_no_github_credentials():
    secrets = {name: "s3cret" for name in ("GITHUB_TOKEN", "GH_TOKEN", "INPUT_TOKEN", "ACTIONS_RUNTIME_TOKEN",
                                            "ACTIONS_ID_TOKEN_REQUEST_TOKEN")}
    for framework in ("oneflow", "pytorch"):
        env = subprocess_env(framework, base=dict(secrets, PATH="/usr/bin", GITHUB_REPOSITORY="octo/flow"))
        assert "s3cret" not in env.values()
        assert env["PATH"] == "/usr/bin" and env["GITHUB_REPOSITORY"] == "octo/flow"


def test_workers_inherit_no_rank_a_launcher_would_set():
    # A process that imported OneFlow 0.9.0 has RANK=-1: a worker started from it would wait as rank -1
    # for a rank 0 that never comes. A DDP launcher sets these for each rank itself.
    inherited = {"RANK": "-1", "LOCAL_RANK": "-1", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1",
                 "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
    for framework in ("oneflow", "pytorch"):
        env = subprocess_env(framework, base=dict(inherited, PATH="/usr/bin"), extra={"OMP_NUM_THREADS": "1"})
        assert not set(inherited) & set(env) and env["OMP_NUM_THREADS"] == "1"
