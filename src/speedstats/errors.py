"""Exit statuses and the errors that carry them; the CLI prints an error on one line.

The statuses keep one meaning across every command and the action's entrypoint:

    0  pass                     3  a case produced no figures
    1  the verdict failed       4  the device stayed busy past the lock timeout
    2  bad input                5  GitHub unreachable after the retries (or past the deadline)
                                6  internal error (a bug): one line, the traceback in a file
                                7  a case was measured on a disturbed machine (other processes on
                                   the CPU, a throttled or busy GPU): its figures are not comparable
                                8  bisect: the bad build is not shown slower than the good one
                                9  bisect: the time budget ran out; the same command goes on

`speedstats run` gives 3 before 7, and 7 before 1: figures from a disturbed machine judge nothing.
Every command stopped by SIGTERM or SIGINT exits EXIT_INTERRUPTED (130, as a shell reports Ctrl-C) with
one line, after its cleanup: no temporary or partial file is left.
A token GitHub refuses a write (403) outside a fork's pull request is bad input too: the line names
the permission it needs.
"""

import contextlib
import signal
import threading

EXIT_OK = 0
EXIT_VERDICT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_CASE_FAILED = 3
EXIT_DEVICE_BUSY = 4
EXIT_GITHUB_UNREACHABLE = 5
EXIT_INTERNAL_ERROR = 6
EXIT_DISTURBED = 7
EXIT_NOT_SLOWER = 8
EXIT_BUDGET_SPENT = 9
EXIT_INTERRUPTED = 130


class SpeedstatsError(Exception):
    """An error the CLI reports on one line, exiting with `exit_code`."""

    exit_code = EXIT_BAD_INPUT


class UserError(SpeedstatsError):
    """Bad input: a file, a field or a flag (or an output that cannot be written). The message names it."""

    exit_code = EXIT_BAD_INPUT


class GitHubUnreachable(SpeedstatsError):
    """GitHub did not answer usefully within the retries or the deadline (network, 5xx, rate limits)."""

    exit_code = EXIT_GITHUB_UNREACHABLE


def _unwind(signum, frame):
    # Once: a second signal must not cut short the cleanup that the first one started.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def unwinding_on_signals():
    """Inside, SIGTERM (a cancelled job, `kill`) and SIGINT (Ctrl-C) raise KeyboardInterrupt in the main
    thread, so every cleanup on the way out runs (finally blocks, atomic writes, the runner killing its
    workers); the handlers that were there before are put back after. Elsewhere than the main thread,
    where no handler can be set, it changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, _unwind) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
