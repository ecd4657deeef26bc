"""Size and API calls of one matrix report: `speedstats report` for 1, 4, 8 and 10 GPUs.

    PYTHONPATH=src:tests .venv/bin/python benchmarks/matrix_report_size.py

Each GPU's shard holds the default suite measured head against base with every case confirmed slower
(the largest block a GPU makes: the Speed stats block, the head-vs-base table, the confirmations and
the builds line). The report runs against the loopback fake GitHub of tests/fakegithub.py, which
counts every request: first a report on a pull request without one, then the next push's report,
which turns it from pass to fail (the alert) and the one after, back to pass (the alert hidden).
Prints a markdown table: the body's characters (GitHub's limit is 65,536), whether it was cut, and
the requests of each report by method.
"""

import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

from fakegithub import FakeGitHub, actions_env, event_payload, run_speedstats
from matrix_shards import PR, REPO, TOKEN, default_suite_shards, make_shard


def one_report(gh, root, gpus, sha, run_id):
    for gpu in gpus:
        gh.add_job(REPO, run_id, f"speed-stats ({gpu})")
    env = actions_env(gh, TOKEN, REPO, root, event=event_payload("pull_request", REPO, PR, sha),
                      GITHUB_RUN_ID=run_id, GITHUB_RUN_ATTEMPT=1)
    before = len(gh.requests)
    argv = ["report", "--gpus", json.dumps(gpus), "--shards", root / "speedstats-shards"]
    result = run_speedstats(argv, env)
    if result.rc != 0:
        sys.exit(f"report failed: {result.err}")
    calls = Counter(r.method for r in gh.requests[before:])
    return " + ".join(f"{n} {m}" for m, n in sorted(calls.items())) + f" = {sum(calls.values())}"


def measure(count, tmp):
    gpus = [f"gpu{i}" for i in range(count)]
    shas = ["1" * 40, "2" * 40, "3" * 40]
    with FakeGitHub() as gh:
        gh.add_token(TOKEN)
        gh.add_pull(REPO, PR, head_sha=shas[0])
        rows = []
        for step, (sha, what) in enumerate(zip(shas, ("first report, pass", "turns red", "passes again"))):
            run_id = 100 + step
            if step:
                gh.push(REPO, PR, sha)
            gh.add_workflow_run(REPO, run_id, sha, pull_requests=[PR])
            root = Path(tmp) / f"{count}-{step}"
            if what == "turns red":
                default_suite_shards(root, gpus, sha=sha, run_id=run_id)
            else:
                for gpu in gpus:
                    make_shard(root, gpu, sha=sha, run_id=run_id)
            calls = one_report(gh, root, gpus, sha, run_id)
            body = next(c["body"] for c in gh.comments(REPO, PR) if "speedstats:speed-stats" in c["body"])
            rows.append((what, len(body), "cut" in body and "to fit GitHub's limit" in body, calls))
        return rows


def main():
    print("| GPUs | report | body characters | cut | requests |")
    print("| ---: | --- | ---: | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for count in (1, 4, 8, 10):
            for what, size, cut, calls in measure(count, tmp):
                print(f"| {count} | {what} | {size} | {'yes' if cut else 'no'} | {calls} |")


if __name__ == "__main__":
    main()
