"""`speedstats run` as a child process, for the commands that measure through it (bisect, reproduce).

Each comparison is a run of its own, exactly as `speedstats run` makes it (the same checks, builds,
device lock, rounds and verdict), into an output folder of its own, whose results.json the parent reads.
The child writes no step output, job summary or annotation of its own: the GitHub Actions variables
that ask for them are left out of its environment, and the parent says what the runs found. A signal
that stops the parent (SIGTERM, Ctrl-C) stops the child first, which cleans up as a run does.
"""

import os
import signal
import subprocess
import sys

from speedstats.results import load as load_results

# What a run reads to write the Action's outputs, the job summary, annotations and log groups.
ACTIONS_VARIABLES = ("GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GITHUB_ACTIONS")
STOP_WAIT_S = 120  # a run stopped by SIGTERM kills its workers and writes its files; then it is killed


def child_environment(environ=None):
    env = dict(os.environ if environ is None else environ)
    for name in ACTIONS_VARIABLES:
        env.pop(name, None)
    return env


def run_child(argv, progress):
    """Run `speedstats <argv>` (its stderr and stdout are this process's); its exit status."""
    progress("speedstats: $ speedstats " + " ".join(argv))
    proc = subprocess.Popen([sys.executable, "-m", "speedstats", *argv], env=child_environment())
    try:
        return proc.wait()
    except BaseException:  # SIGTERM or SIGINT unwinding this process: stop the run first
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=STOP_WAIT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        raise


def read_results(path):
    """The results.json a child run wrote."""
    return load_results(path)
