"""A runner over fake workers (tests/fakeworker.py): a real SuiteRunner whose workers report the round
times a plan gives, a suite small enough for it, and the plans of profiled rounds."""

import json
import sys
from pathlib import Path

from oneflow_builds import SLOWED_PLACE
from speedstats.bench.runner import SuiteRunner
from speedstats.contenders import BASE, HEAD, PYTORCH
from speedstats.suite import suite_from_dict

FAKE_WORKER = Path(__file__).resolve().parent / "fakeworker.py"


def suite(rounds=3, times=3, **fields):
    case = {"id": "resnet50-bs2", "kind": "resnet50", "batch_size": 2, "image_size": 64, "times": times,
            "min_relative_speed": 0.25}
    # Other processes' CPU time (other tests on this machine) never disturbs these rounds: the
    # disturbance tests throttle a GPU instead, when the plan says.
    # No profiled rounds after a slower head unless a test asks (tests/test_attribution.py does), and
    # no cap on a case's wall time that a slow machine could reach.
    data = {"name": "fake", "warmup": 0, "rounds": rounds, "timeout_s": 30, "cases": [case],
            "disturbance": {"retry_wait_s": 0, "max_other_cores": 1000.0}, "attribute": "never",
            "head_vs_base": {"case_cap_factor": 101}}
    data.update(fields)
    return suite_from_dict(data, "test suite")


class Bench:
    """A runner over fake workers: `run(suite, plan)` runs the suite, each contender's workers following
    its launches in `plan`; the results, the progress lines and the workers' events are kept."""

    def __init__(self, folder):
        self.folder = folder
        self.lines = []

    def run(self, the_suite, plan, **runner_args):
        plan_path = self.folder / "plan.json"
        plan_path.write_text(json.dumps({"contenders": plan}))
        runner = SuiteRunner(the_suite, runner_args.pop("device", "cpu"), self.folder / "out",
                             progress=self.lines.append, contenders=list(plan),
                             worker_program=(sys.executable, str(FAKE_WORKER), "--plan", str(plan_path)),
                             **runner_args)
        self.results = runner.run()
        return self.results.cases[0]

    @property
    def events(self):
        return (self.folder / "events.log").read_text(encoding="utf-8").splitlines()

    def control(self, *parts):
        return self.folder / "out" / "workers" / "resnet50-bs2" / Path(*parts)


# The profiles of a profiled round: the slowed place as the base spends it, and 40 ms slower.
PROFILE = {"self_s": {"oneflow.a:f": 0.01, SLOWED_PLACE: 0.002},
           "total_s": {"oneflow.a:f": 0.01, SLOWED_PLACE: 0.002}}
SLOW_PROFILE = {"self_s": {"oneflow.a:f": 0.01, SLOWED_PLACE: 0.042},
                "total_s": {"oneflow.a:f": 0.01, SLOWED_PLACE: 0.042}}


def head_vs_base(head_s, profile, **fields):
    """A plan: one worker each, the head's round taking head_s with `profile`, the base's PROFILE."""
    return {HEAD: [{"rounds": [head_s], "profile": profile}], BASE: [{"rounds": [0.1], "profile": PROFILE}],
            PYTORCH: [{"rounds": [0.05]}]}
