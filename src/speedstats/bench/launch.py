"""Runs a DDP launcher module so that it dies with the runner and its ranks hold the device lock.

    python -m speedstats.bench.launch CONTROL_DIR LAUNCHER_MODULE [ARGS...]

e.g. `... launch DIR torch.distributed.run --nproc_per_node 2 -m speedstats.bench.worker ...`.
Before running the launcher (in this process, through runpy) it asks for SIGKILL when the runner
exits, records its pid in CONTROL_DIR/pid-launcher, tells the ranks it is their parent, and makes
every process the launcher starts inherit the device lock's file descriptors (launchers close all
other descriptors when they start a rank).
"""

import os
import runpy
import subprocess
import sys
from pathlib import Path

from speedstats.bench import processes, protocol
from speedstats.fsutil import write_atomic


def _inherit_lock_fds():
    fds = tuple(int(fd) for fd in os.environ.get(processes.LOCK_FDS_VARIABLE, "").split(",") if fd)
    if not fds:
        return
    original_init = subprocess.Popen.__init__

    def init(self, *args, **kwargs):
        kwargs["pass_fds"] = tuple(kwargs.get("pass_fds", ())) + fds
        original_init(self, *args, **kwargs)

    subprocess.Popen.__init__ = init


def main(argv):
    control, module, *launcher_args = argv
    processes.die_with_parent()
    write_atomic(Path(control, protocol.LAUNCHER_PID_FILE), str(os.getpid()), "launcher's pid file")
    os.environ[processes.PARENT_VARIABLE] = str(os.getpid())
    _inherit_lock_fds()
    sys.argv = [module, *launcher_args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
