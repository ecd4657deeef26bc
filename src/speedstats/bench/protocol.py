"""The control-file protocol between the runner (bench.workers) and a worker (bench.worker): the names of
the files in a worker's control folder, written here once for both sides.

    runner writes      spec.json           what to measure (a bench.workerspec.WorkerSpec), before the start
    every rank writes  pid-RANK            its process id, first thing
    launcher writes    pid-launcher        its process id (a DDP case: bench.launch)
    every rank writes  env-RANK.json       at start: the values it sees of the suite's env: names
    worker (rank 0) writes ready.json      after setup and warm-up
    runner writes      go-K                to start timed round K (every rank waits for it)
    runner writes      profile-K           instead of go-K: round K profiled (rank 0's Python stack
                                           sampled and, on CUDA, its ops profiled); its round-K.json
                                           also carries `profile`
    runner writes      stop                instead of go-K: no more rounds (spec.rounds is a maximum, room
                                           for sequential rounds and disturbed rounds measured again)
    worker (rank 0) writes round-K.json    {"total_s": ..., "started_unix": ..., "ended_unix": ...}
    worker (rank 0) writes done.json       after the last round: peak memory
    any rank writes    error-RANK.json     on failure, then exits non-zero

Rounds are numbered from 0, in the order the runner asks for them. Every file is written whole
(fsutil.write_atomic): a file that exists is complete.
"""

SPEC_FILE = "spec.json"
LAUNCHER_PID_FILE = "pid-launcher"
READY_FILE = "ready.json"
STOP_FILE = "stop"
DONE_FILE = "done.json"
ERROR_FILES = "error-*.json"  # every rank's error file, as a glob
LOG_FILE = "worker.log"  # the worker's stdout and stderr, kept by the runner

GO, PROFILE = "go", "profile"  # the two ways of starting a round


def pid_file(rank):
    return f"pid-{rank}"


def env_file(rank):
    return f"env-{rank}.json"


def round_start_file(k, kind=GO):
    """The runner's file that starts round k: go-K, or profile-K for a profiled round."""
    return f"{kind}-{k}"


def round_file(k):
    return f"round-{k}.json"


def error_file(rank):
    return f"error-{rank}.json"
