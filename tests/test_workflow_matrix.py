"""The GPU matrix workflow: shards named per GPU and attempt, one report job that alone may write."""

from pathlib import Path

import yaml

from actions_runner import action
from helpers import project_home
from speedstats.github import shards

WORKFLOW = Path(__file__).resolve().parents[1] / "examples" / "workflows" / "speedstats-gpu-matrix.yml"


def load():
    data = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    data["on"] = data.pop(True, data.get("on"))
    return data


def step(job, uses_prefix):
    return next(s for s in job["steps"] if str(s.get("uses", "")).startswith(uses_prefix))


def test_only_the_report_job_may_write_and_it_runs_unless_cancelled():
    workflow = load()
    assert workflow["permissions"] == {}  # each job its own
    jobs = workflow["jobs"]
    assert all(job["permissions"]["contents"] == "read" for job in jobs.values())
    writers = [name for name, job in jobs.items() if "write" in (job.get("permissions") or {}).values()]
    assert writers == ["report"]
    report = jobs["report"]
    assert report["needs"] == ["gpus", "speed-stats"]
    assert report["if"].startswith("${{ !cancelled()")
    assert report["permissions"]["pull-requests"] == "write" and report["permissions"]["actions"] == "read"
    assert report["concurrency"]["group"] == ("speedstats-matrix-report-${{ github.event.pull_request.number "
                                              "}}")
    assert report["concurrency"]["cancel-in-progress"] is False


def test_the_matrix_and_the_report_read_the_same_gpu_list():
    jobs = load()["jobs"]
    matrix = jobs["speed-stats"]["strategy"]
    assert (matrix["matrix"]["gpu"] == "${{ fromJSON(needs.gpus.outputs.gpus) }}"
            and matrix["fail-fast"] is False)
    post = next(s for s in jobs["report"]["steps"] if (s.get("with") or {}).get("command") == "report")
    assert post["with"]["gpus"] == "${{ needs.gpus.outputs.gpus }}"
    assert post["with"]["automerge-job"] == "speed-stats"
    # The job that holds the write token runs the action's own image: it installs nothing, runs no script.
    assert not [s for s in jobs["report"]["steps"] if "run" in s or "setup-python" in s.get("uses", "")]


def test_shards_are_named_per_gpu_and_attempt_and_downloaded_each_into_its_folder():
    jobs = load()["jobs"]
    shard_job = jobs["speed-stats"]
    assert shard_job["name"] == shards.DEFAULT_JOB_NAME.format(gpu="${{ matrix.gpu }}")
    assert "${{ matrix.gpu }}" in shard_job["runs-on"]
    upload = step(shard_job, "actions/upload-artifact@")
    assert upload["if"] == "always()"
    assert upload["with"]["name"] == shards.artifact_name("${{ matrix.gpu }}", "${{ github.run_attempt }}")
    pack = next(s for s in shard_job["steps"] if (s.get("with") or {}).get("command") == "shard")
    assert pack["if"] == "always()" and pack["with"]["status"] == "${{ job.status }}"
    assert upload["with"]["path"] == action()["inputs"]["shard-dir"]["default"]
    download = step(jobs["report"], "actions/download-artifact@")
    assert download["with"] == {"pattern": shards.ARTIFACT_PREFIX + "*", "path": "speedstats-shards"}


def test_every_with_of_the_action_is_an_input():
    inputs = action()["inputs"]
    for job in load()["jobs"].values():
        for s in job["steps"]:
            if str(s.get("uses", "")).split("@")[0] == project_home():
                assert set(s["with"]) <= set(inputs), s.get("name")
