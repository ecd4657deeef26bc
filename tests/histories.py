"""Main's history made in memory, for the tests of the change points, `speedstats changes`, the trend's
marks, the data branch and the tracking issues: runs of a case whose OneFlow time shifts at a chosen run,
PyTorch steady beside it, each run with its rounds, all drawn from a seeded generator.

    runs = history_runs(40, shift_at=22, shift=0.10)   # [(commit, Results)], oldest first
    text = history_text(runs)                          # the history file's lines
"""
from __future__ import annotations

import hashlib
import math
import random

from speedstats.history import history_line
from speedstats.results import CaseResult, FrameworkResult, Results

GPU = "NVIDIA A100-SXM4-80GB"
CASE = "resnet50-bs16"
ONEFLOW_S = 0.040
PYTORCH_S = 0.050
ROUNDS = 5
TIMES = 20


def commit_of(i):
    """A 40-digit commit sha for run i, the same in every test."""
    return hashlib.sha1(f"commit {i}".encode()).hexdigest()


def framework(per_iter_s, rng, scatter):
    rounds = sorted(per_iter_s * math.exp(rng.gauss(0, scatter)) for _ in range(ROUNDS))
    mid = rounds[len(rounds) // 2]
    return FrameworkResult(total_s=mid * TIMES, per_iter_s=mid, times=TIMES, rounds_s=rounds,
                           round_iterations=TIMES)


def run_results(oneflow_s, pytorch_s=PYTORCH_S, rng=None, scatter=0.01, gpu_name=GPU, case_id=CASE):
    rng = rng or random.Random(0)
    case = CaseResult(id=case_id, kind="resnet50", batch_size=16, times=TIMES, input_shape=[16, 3, 224, 224],
                      frameworks={"oneflow": framework(oneflow_s, rng, scatter),
                                  "pytorch": framework(pytorch_s, rng, scatter)})
    return Results(suite="default", device="cuda", gpu_name=gpu_name, cases=[case])


def history_runs(count, shift_at=None, shift=0.10, seed=7, run_scatter=0.01, gpu_name=GPU, first=0,
                 pytorch_shift_at=None):
    """[(commit, Results)] of `count` runs, oldest first, numbered from `first`: OneFlow's time is
    ONEFLOW_S, times 1 + shift from run shift_at on (PyTorch's too from pytorch_shift_at on), each run off
    by N(0, run_scatter) on the log scale and its rounds by a further 1%."""
    rng = random.Random(seed)
    runs = []
    for i in range(first, first + count):
        level = math.exp(rng.gauss(0, run_scatter))
        oneflow = ONEFLOW_S * level * (1 + shift if shift_at is not None and i >= shift_at else 1)
        pytorch = PYTORCH_S * math.exp(rng.gauss(0, run_scatter)) * (
            1 + shift if pytorch_shift_at is not None and i >= pytorch_shift_at else 1)
        runs.append((commit_of(i), run_results(oneflow, pytorch, rng, gpu_name=gpu_name)))
    return runs


def recorded_at(i):
    return f"2026-{1 + i // 28:02d}-{1 + i % 28:02d}T03:00:00Z"


def history_text(runs, first=0):
    """The history file's text of runs, run i recorded on day i of 2026."""
    return "".join(history_line(results, commit=commit, recorded_at=recorded_at(first + i))
                   for i, (commit, results) in enumerate(runs))
