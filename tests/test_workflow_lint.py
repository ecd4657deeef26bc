"""The workflows (this repository's own in .github/workflows/, the examples to copy in
examples/workflows/) and the action pass actionlint and zizmor (both pinned in requirements/test.txt).

actionlint reads .github/actionlint.yaml (the custom `gpu` runner label); its shellcheck and pyflakes
passes are off so the result does not depend on what else the machine has. zizmor runs offline with
.github/zizmor.yml (third-party actions pinned by commit sha, this action by release version); a
finding that stands is ignored inline in the workflow, with the reason beside it. Both are given the
files by name: zizmor given a folder looks for .github/workflows/ under it.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import project_home, release

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
EXAMPLES = ROOT / "examples" / "workflows"
ALL_WORKFLOWS = sorted([*WORKFLOWS.glob("*.yml"), *EXAMPLES.glob("*.yml")])


def tool(name):
    found = shutil.which(name, path=os.pathsep.join([str(Path(sys.executable).parent),
                                                     os.environ.get("PATH", "")]))
    assert found, f"{name} is not installed (requirements/test.txt)"
    return found


def run(argv):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "ZIZMOR_"))}
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False, timeout=120, env=env)


@pytest.mark.lint
def test_actionlint_passes_on_every_workflow():
    workflows = [str(p.relative_to(ROOT)) for p in ALL_WORKFLOWS]
    assert {".github/workflows/release.yml", "examples/workflows/speedstats-pull-request.yml"} <= {*workflows}
    proc = run([tool("actionlint"), "-no-color", "-oneline", "-shellcheck=", "-pyflakes=",
                "-config-file", ".github/actionlint.yaml", *workflows])
    assert (proc.returncode, proc.stdout + proc.stderr) == (0, "")


@pytest.mark.lint
def test_zizmor_passes_on_the_workflows_and_the_action():
    proc = run([tool("zizmor"), "--offline", "--no-progress", "--format", "plain", "--config",
                ".github/zizmor.yml",
                *[str(p.relative_to(ROOT)) for p in ALL_WORKFLOWS], "action.yml"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "No findings to report" in proc.stdout + proc.stderr


def auditor_findings(*paths):
    """zizmor's findings with its auditor persona (what the default one leaves out too), by audit."""
    import json

    proc = run([tool("zizmor"), "--offline", "--no-progress", "--persona", "auditor", "--format", "json",
                "--config", ".github/zizmor.yml", *map(str, paths)])
    assert proc.returncode == 0 or proc.returncode >= 10, proc.stderr  # 1x: findings, x their severity
    found = {}
    for finding in json.loads(proc.stdout):
        found.setdefault(finding["ident"], []).append(finding)
    return found


@pytest.mark.lint
def test_no_workflow_grants_a_write_that_each_job_does_not_ask_for_itself():
    """zizmor's excessive-permissions: no workflow-level `permissions:` that writes, every job its own."""
    assert "excessive-permissions" not in auditor_findings(*[p.relative_to(ROOT) for p in ALL_WORKFLOWS])


@pytest.mark.lint
def test_the_released_action_yml_names_its_image_by_digest(tmp_path):
    """The action.yml the release commits (scripts/release.py pin-image) pins its image; this one, by
    its version tag, does not."""

    assert "unpinned-images" in auditor_findings("action.yml")
    released = tmp_path / "action.yml"
    released.write_text(release.pin_image((ROOT / "action.yml").read_text(encoding="utf-8"),
                                          "sha256:" + "0123456789abcdef" * 4), encoding="utf-8")
    assert "unpinned-images" not in auditor_findings(released)


@pytest.mark.parametrize("path", ALL_WORKFLOWS, ids=lambda p: p.name)
def test_third_party_actions_are_pinned_by_commit_and_checkouts_keep_no_token(path):
    import re

    import yaml

    text = path.read_text(encoding="utf-8")
    for uses in re.findall(r"uses:\s*(\S+)", text):
        if uses.split("@")[0] == project_home():
            assert re.fullmatch(rf"{project_home()}@v\d+", uses), uses  # the moving major tag
        else:
            assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", uses), uses
    steps = [s for job in yaml.safe_load(text)["jobs"].values() for s in job.get("steps", [])]
    for step in steps:
        if str(step.get("uses", "")).startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] is False, path.name
