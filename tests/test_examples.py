"""The workflows to copy are examples: they live in examples/workflows/, and .github/workflows/ keeps
only this repository's own CI and release, so nothing here waits for a GPU runner it does not have.
No example runs a fork's code on a self-hosted runner, save the fork workflow built for that."""

from pathlib import Path

import pytest

from actions_runner import condition, load_workflow

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples" / "workflows").glob("*.yml"))
# Runs a fork's pull request on the GPU runner by design, read-only and after a maintainer's approval
# (docs/forks.md); its partner posts without running the fork's code.
FORK_BENCH = ("speedstats-fork-bench.yml", "speed-stats")


def self_hosted(job):
    runs_on = job["runs-on"]
    return "self-hosted" in ([runs_on] if isinstance(runs_on, str) else runs_on)


def pull_request_contexts(head_repo):
    return {"github": {"event_name": "pull_request", "repository": "o/r",
                       "event": {"pull_request": {"head": {"repo": {"full_name": head_repo}}}}}}


def job_results(workflow, contexts):
    """Each job's result on this event: `skipped` unless its `if:` holds given its needs' results."""
    results = {}

    def result(name):
        if name not in results:
            job = workflow["jobs"][name]
            needs = job.get("needs", [])
            needs = [needs] if isinstance(needs, str) else needs
            need_results = {need: {"result": result(need)} for need in needs}
            status = "success" if all(r["result"] == "success" for r in need_results.values()) else "skipped"
            ran = condition(job.get("if", "success()"), {**contexts, "needs": need_results,
                                                         "job": {"status": status}})
            results[name] = "success" if ran else "skipped"
        return results[name]

    for name in workflow["jobs"]:
        result(name)
    return results


def test_the_repositorys_own_workflows_are_ci_and_release_only_and_none_is_self_hosted():
    own = sorted(p.name for p in (ROOT / ".github" / "workflows").iterdir())
    assert own == ["ci.yml", "release.yml"]
    for name in own:
        jobs = load_workflow(ROOT / ".github" / "workflows" / name)["jobs"]
        assert not [job_id for job_id, job in jobs.items() if self_hosted(job)], name


def test_the_examples_are_the_four_set_ups():
    assert [p.name for p in EXAMPLES] == [
        "speedstats-fork-bench.yml", "speedstats-fork-post.yml", "speedstats-gpu-matrix.yml",
        "speedstats-oneflow-pipeline.yml", "speedstats-pull-request.yml"]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_no_self_hosted_job_runs_a_forks_pull_request(path):
    workflow = load_workflow(path)
    if "pull_request" not in workflow["on"]:
        assert "pull_request_target" not in workflow["on"]
        assert not any(self_hosted(job) for job in workflow["jobs"].values())
        return
    from_fork = job_results(workflow, pull_request_contexts("someone/r"))
    from_branch = job_results(workflow, pull_request_contexts("o/r"))
    for job_id, job in workflow["jobs"].items():
        if not self_hosted(job):
            continue
        if (path.name, job_id) == FORK_BENCH:
            assert (from_fork[job_id], from_branch[job_id]) == ("success", "skipped")
            assert (workflow["permissions"], job["permissions"]) == ({}, {"contents": "read"})
            assert "Require approval for all external contributors" in path.read_text(encoding="utf-8")
        else:
            assert (from_fork[job_id], from_branch[job_id]) == ("skipped", "success"), job_id


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_each_job_has_its_own_permissions_and_the_workflow_grants_nothing(path):
    """The job that posts has the writes it needs; a job beside it (a build, a matrix job running a pull
    request's code) gets none of them."""
    workflow = load_workflow(path)
    assert workflow["permissions"] == {}
    for job_id, job in workflow["jobs"].items():
        assert job["permissions"], job_id


def test_the_pipelines_build_job_runs_on_pushes_and_the_repositorys_branches_only():
    workflow = load_workflow(ROOT / "examples" / "workflows" / "speedstats-oneflow-pipeline.yml")
    assert set(workflow["on"]) == {"push", "pull_request"}
    push = {"github": {"event_name": "push", "repository": "o/r", "event": {}}}
    assert job_results(workflow, push)["build"] == "success"
    assert job_results(workflow, pull_request_contexts("someone/r"))["build"] == "skipped"
    assert job_results(workflow, pull_request_contexts("o/r"))["build"] == "success"
