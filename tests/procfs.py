"""What /proc says of a process, read independently of speedstats.bench.processes (which the tests check)."""
import os
from pathlib import Path


def running(pid):
    """True while the process exists and has not exited (a zombie has exited: it runs nothing)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2:].split()[0] != b"Z"


READ_SYSCALLS = {"x86_64": "0", "aarch64": "63"}


def reading_stdin(pid):
    """Whether the process waits in a read of its stdin (a pipe): where the kernel says (wchan), else
    the system call it is in (read, fd 0)."""
    try:
        if Path(f"/proc/{pid}/wchan").read_text().endswith("pipe_read"):
            return True
        call = Path(f"/proc/{pid}/syscall").read_text().split()
    except OSError:
        return False
    return call[:2] == [READ_SYSCALLS.get(os.uname().machine), "0x0"]
