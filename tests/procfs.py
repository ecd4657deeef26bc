"""What /proc says of a process, read independently of speedstats.bench.processes (which the tests check)."""
from pathlib import Path


def running(pid):
    """True while the process exists and has not exited (a zombie has exited: it runs nothing)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rindex(b")") + 2:].split()[0] != b"Z"
