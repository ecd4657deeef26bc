"""Every process a case starts dies with the case and with the run (Linux).

Three mechanisms, each covering what the others cannot:

- The runner is a child subreaper: a process of ours whose parent dies is re-parented to the runner,
  never to init, so nothing can leave its tree. `kill_tree` then finds a worker's processes by
  walking /proc for the descendants of its first process *and* for every process carrying its tag
  in the environment (torch.distributed.run starts each rank in a session of its own, so a process
  group or session kill misses them; once the launcher is dead they are no longer its descendants),
  SIGKILLs them all, reaps what was re-parented to us and waits until none is left.
- Every process we start asks for SIGKILL when its parent dies (PR_SET_PDEATHSIG): the worker at
  start-up, the DDP launchers through `speedstats.bench.launch`. SIGKILL of the runner thus takes
  the launchers down, and they their ranks.
- The device lock's open file is inherited by every worker process (see speedstats.lock), so the
  kernel keeps the device locked until the last of them has exited, whatever killed the runner.
"""

import ctypes
import os
import signal
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
TAG_VARIABLE = "SPEEDSTATS_WORKER_TAG"
PARENT_VARIABLE = "SPEEDSTATS_PARENT_PID"
LOCK_FDS_VARIABLE = "SPEEDSTATS_LOCK_FDS"
KILL_WAIT_S = 30.0
_POLL_S = 0.01


def _prctl(option, value):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl({option}): {os.strerror(errno)}")


def become_subreaper():
    """Orphans among our descendants are re-parented to this process (and reaped by kill_tree)."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)


def die_with_parent(expected_parent=None):
    """SIGKILL this process when its parent exits; exit at once if the parent is already gone."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if expected_parent is None:
        expected_parent = os.environ.get(PARENT_VARIABLE)
    if expected_parent and os.getppid() != int(expected_parent):
        os._exit(1)  # the parent died before PR_SET_PDEATHSIG took effect


def stat_fields(pid):
    """The fields of /proc/PID/stat after the command name (fields[0] is the state), or None when the
    process is gone."""
    text = _read(f"/proc/{pid}/stat")
    if not text:
        return None
    return text[text.rindex(b")") + 2:].split()


def _read(path):
    """The bytes of a /proc file, or None when it cannot be read (the process is gone). os.read rather
    than open(): the runner reads every process's stat before each round, and a buffered file object
    costs about half as much again."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _stat(pid):
    """(parent pid, state letter, start time) of a process, or None when it is gone."""
    fields = stat_fields(pid)
    if fields is None:
        return None
    return int(fields[1]), fields[0].decode(), int(fields[19])


def _has_tag(pid, tag):
    environ = _read(f"/proc/{pid}/environ")
    return environ is not None and f"{TAG_VARIABLE}={tag}".encode() in environ.split(b"\0")


def _all_pids():
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def members(root_pid, tag, known=None):
    """{pid: (parent pid, state, start time)} of the root, every process carrying tag, the processes
    of `known` ({pid: start time}) that still exist (one that is exiting has no environment left to read),
    and all their descendants."""
    table = {}
    for pid in _all_pids():
        stat = _stat(pid)
        if stat is not None:
            table[pid] = stat
    me = os.getpid()
    seeds = [pid for pid, started in (known or {}).items() if pid in table and table[pid][2] == started]
    # A process carrying the tag was started by the root's tree, so not before the root: while the root
    # lives, the environments of older processes (most of a runner's) need not be read.
    since = None
    if root_pid in table:
        seeds.append(root_pid)
        since = table[root_pid][2]
    if tag:
        seeds.extend(pid for pid, (_, _, started) in table.items()
                     if pid != me and (since is None or started >= since) and _has_tag(pid, tag))
    children = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found = set()
    while seeds:
        pid = seeds.pop()
        if pid not in found:
            found.add(pid)
            seeds.extend(children.get(pid, ()))
    return {pid: table[pid] for pid in found}


def kill_tree(popen, tag, wait_s=KILL_WAIT_S):
    """SIGKILL a worker's process, all its descendants and all processes with its tag; reap those
    that are our children and wait until none is left (at most wait_s). Returns the pids still there."""
    me = os.getpid()
    deadline = time.monotonic() + wait_s
    known = {}
    while True:
        # A process that has exited (zombie) and is ours is reaped; one that is someone else's
        # child waits for that parent, which is being killed, to hand it over to us.
        if popen is not None:
            popen.poll()
        left = members(popen.pid if popen is not None and popen.returncode is None else -1, tag, known)
        known.update((pid, stat[2]) for pid, stat in left.items())
        for pid, (ppid, state, _) in left.items():
            if state != "Z":
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            elif ppid == me and (popen is None or pid != popen.pid):
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass
        if popen is not None:
            popen.poll()
        if not left or time.monotonic() > deadline:
            return sorted(left)
        time.sleep(_POLL_S)


def descendants(roots):
    """The pids of the processes in roots that still exist and of all their descendants (read from
    /proc/PID/stat only: cheap enough to repeat while a round runs)."""
    children, alive = {}, set()
    for pid in _all_pids():
        stat = _stat(pid)
        if stat is not None:
            alive.add(pid)
            children.setdefault(stat[0], []).append(pid)
    found, seeds = set(), [pid for pid in roots if pid in alive]
    while seeds:
        pid = seeds.pop()
        if pid not in found:
            found.add(pid)
            seeds.extend(children.get(pid, ()))
    return found


def resident_bytes(pid):
    """The resident memory of a process (VmRSS of /proc/PID/status) in bytes; 0 when it is gone or has
    none (a zombie, a kernel thread)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0
