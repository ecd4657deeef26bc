"""One rule for the suite that judges a results file, the same in render, post-from-artifact and report.

The suite given (--suite, --profile) judges; else the built-in profile the results name; else the
default profile. Each command runs for real: render through the CLI, the GitHub ones against the
loopback GitHub, and the Speed stats block each one writes or posts must be the same.
"""

import io
import json
import zipfile

import pytest

from fakegithub import actions_env, event_payload, run_speedstats
from speedstats import cli
from speedstats.bundle import write_bundle
from speedstats.github import shards
from speedstats.suite import judging_suite_source

REPO, PR, RUN = "o/r", 7, 6160
SHA = "e" * 40
TOKEN = "ghs_JudgingT0kenNeverToBePrinted000000009"
PASSED = "✔️ Relative speed: 0.50 (= 50.0ms / 100.0ms)"  # smoke: at least 0.25
MISSED = "❌ Relative speed: 0.50 (= 50.0ms / 100.0ms)"  # default: resnet50-bs2 at least 0.99


def results_json(suite):
    return json.dumps({
        "schema": "speedstats/results/v1", "suite": suite, "device": "cpu", "gpu_name": "Some CPU",
        "cases": [{"id": "resnet50-bs2", "kind": "resnet50", "batch_size": 2, "times": 5,
                   "input_shape": [2, 3, 64, 64],
                   "frameworks": {"oneflow": {"total_s": 0.5, "per_iter_s": 0.1, "times": 5},
                                  "pytorch": {"total_s": 0.25, "per_iter_s": 0.05, "times": 5}}}],
    })


def test_the_rule():
    assert judging_suite_source("smoke") == (None, "smoke")
    assert judging_suite_source("my-own-suite") == (None, "default")
    assert judging_suite_source("smoke", profile="default") == (None, "default")
    assert judging_suite_source("smoke", "s.yml") == ("s.yml", None)
    assert judging_suite_source("smoke", "s.yml", "smoke") == ("s.yml", "smoke")
    assert judging_suite_source("smoke", "", "") == (None, "smoke")  # empty inputs are no inputs


def rendered(tmp_path, suite, flags, capsys):
    tmp_path.mkdir()
    path = tmp_path / "results.json"
    path.write_text(results_json(suite), encoding="utf-8")
    assert cli.main(["render", str(path), *flags]) == 0
    return capsys.readouterr().out


def github(fake_github):
    gh = fake_github(TOKEN)
    gh.add_pull(REPO, PR, head_sha=SHA)
    return gh


def posted_from_artifact(gh, tmp_path, suite, flags):
    tmp_path.mkdir()
    folder = tmp_path / "bundle"
    write_bundle(folder, results_json(suite), None, PR, SHA, RUN, REPO)
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in sorted(folder.iterdir()):
            zipped.write(path, path.name)
    gh.add_workflow_run(REPO, RUN, SHA, pull_requests=[PR], conclusion="success")
    gh.add_artifact(REPO, RUN, "speedstats-bundle", archive.getvalue())
    env = actions_env(gh, TOKEN, REPO, tmp_path, event_name="workflow_run",
                      event=event_payload("workflow_run", REPO, run_id=RUN, head_sha=SHA), GITHUB_RUN_ID=9)
    result = run_speedstats(["post-from-artifact", *flags], env)
    assert result.rc == 0, result.err
    (comment,) = gh.comments(REPO, PR)
    return comment["body"]


def reported(gh, tmp_path, suite, flags):
    out = tmp_path / "out-a100"
    out.mkdir(parents=True)
    (out / "results.json").write_text(results_json(suite), encoding="utf-8")
    (out / "comment.md").write_text("the shard's own text, not posted with --rerender", encoding="utf-8")
    shards.write_shard(tmp_path / "speedstats-shards" / shards.artifact_name("a100", 1), "a100", "success",
                       out, (PR, SHA, RUN, REPO), 1)
    env = actions_env(gh, TOKEN, REPO, tmp_path, event=event_payload("pull_request", REPO, PR, SHA),
                      GITHUB_RUN_ID=RUN, GITHUB_RUN_ATTEMPT=1, GITHUB_SHA=SHA)
    result = run_speedstats(["report", "--gpus", '["a100"]', "--shards", tmp_path / "speedstats-shards",
                             "--rerender", *flags], env)
    assert result.rc == 0, result.err
    (comment,) = gh.comments(REPO, PR)
    return comment["body"]


@pytest.mark.parametrize("suite, flags, mark", [
    ("smoke", [], PASSED),
    ("my-own-suite", [], MISSED),  # not a built-in profile: the default one
    ("my-own-suite", ["--profile", "smoke"], PASSED),
    ("smoke", ["--profile", "default"], MISSED),
])
def test_render_post_from_artifact_and_report_judge_by_the_same_suite(fake_github, tmp_path, capsys, suite,
                                                                     flags, mark):
    block = rendered(tmp_path / "render", suite, flags, capsys)
    assert mark in block
    posted = posted_from_artifact(github(fake_github), tmp_path / "artifact", suite, flags)
    assert posted == f"{block}\n\n<!-- speedstats:speed-stats head={SHA} run={RUN} -->"
    assert f"**a100**\n\n{block}\n\n" in reported(github(fake_github), tmp_path / "report", suite, flags)
