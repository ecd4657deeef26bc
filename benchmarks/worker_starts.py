"""What starting a case's workers costs, one after another (as `speedstats run` starts them) against all
at once: the wall time a second pair of processes adds, and what starting it beside the first would save.

    python benchmarks/worker_starts.py [--workers oneflow,oneflow,pytorch] [--repeats 3]
        [--profile smoke] [--case resnet50-bs2]

Starts one worker of the profile's case per framework in --workers (the installed builds; the worker
`speedstats run` starts: import, model, warm-up iterations) until each has written ready.json, then
stops it (SIGSTOP) as the runner does; first one after another, then all at once, --repeats times in
turns. Prints each way's wall time until every worker was ready, and each framework's median single
start. Needs the full environment and a quiet machine.
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from speedstats.bench.protocol import READY_FILE
from speedstats.bench.workers import Worker
from speedstats.contenders import HEAD, PYTORCH
from speedstats.suite import load_suite

ROLES = {"oneflow": HEAD, "pytorch": PYTORCH}


def workers(case, args, folder):
    deadline = time.monotonic() + 600
    return [Worker(ROLES[name], case, args.device, folder / f"w{i}", None, deadline, rounds=1)
            for i, name in enumerate(args.workers)]


def one_after_another(started):
    """The wall time until all are ready, each started when the one before it was; each one's own."""
    began, each = time.monotonic(), []
    for worker in started:
        t = time.monotonic()
        worker.start()
        worker.await_file(READY_FILE)
        worker.pause()
        each.append(time.monotonic() - t)
    return time.monotonic() - began, each


def all_at_once(started):
    began = time.monotonic()
    for worker in started:
        worker.start()
    for worker in started:
        worker.await_file(READY_FILE)
        worker.pause()
    return time.monotonic() - began


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="oneflow,oneflow,pytorch", type=lambda text: text.split(","),
                        help="the frameworks of the workers, comma-separated (oneflow, pytorch)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", default="smoke")
    parser.add_argument("--case", default="resnet50-bs2")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args(argv)
    case = next(c for c in load_suite(profile=args.profile).cases if c.id == args.case)
    print(f"$ python benchmarks/worker_starts.py --workers {','.join(args.workers)} --repeats {args.repeats} "
          f"--profile {args.profile} --case {args.case} --device {args.device}")
    sequential, together, singles = [], [], []
    with tempfile.TemporaryDirectory(prefix="speedstats-starts-") as tmp:
        for r in range(args.repeats):
            for way in ("one after another", "all at once"):
                started = workers(case, args, Path(tmp) / f"{r}-{way.replace(' ', '-')}")
                try:
                    if way == "all at once":
                        together.append(all_at_once(started))
                    else:
                        wall, each = one_after_another(started)
                        sequential.append(wall)
                        singles.extend(zip(args.workers, each))
                finally:
                    for worker in started:
                        worker.kill()
                print(f"{way}: {len(started)} workers ready after "
                      f"{(together if way == 'all at once' else sequential)[-1]:.1f}s", flush=True)
    alone = {name: statistics.median(seconds for n, seconds in singles if n == name)
             for name in dict.fromkeys(args.workers)}
    print(f"median of {args.repeats}: one after another {statistics.median(sequential):.1f}s, all at once "
          f"{statistics.median(together):.1f}s; a single start "
          + ", ".join(f"{name} {seconds:.1f}s" for name, seconds in alone.items()))


if __name__ == "__main__":
    main()
