"""The README tells the truth: its commands, example comment, workflow, inputs, outputs and suite
example are the project's own."""

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from speedstats.suite import load_suite
from test_action import action, clean_environ

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def fenced_blocks(text, language):
    return re.findall(rf"^```{language}\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)


def section(title):
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, re.MULTILINE | re.DOTALL)
    assert match, f"README has no section '## {title}'"
    return match.group(1)


def table_rows(text):
    """The first cell and the rest of each row of the first markdown table in text."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if line.startswith("| `"):
            rows.append((cells[0].strip("`"), cells[1:]))
    return rows


def test_the_first_lines_are_the_two_set_up_commands():
    lines = README.splitlines()
    assert lines[0] == "```sh"
    assert lines[1].startswith("./scripts/smoke.sh ") and "smoke suite on the CPU" in lines[1]
    assert lines[2].startswith("./scripts/test.sh ") and "whole test suite" in lines[2]
    assert lines[3] == "```"
    for script in ("scripts/smoke.sh", "scripts/test.sh"):
        assert os.access(ROOT / script, os.X_OK), script
        assert "./scripts/bootstrap.sh" in (ROOT / script).read_text()


def test_the_example_comment_is_what_render_writes_for_those_figures(tmp_path):
    fixture = ROOT / "tests" / "data" / "pr-cu12-release-body.md"
    env = clean_environ()
    subprocess.run([sys.executable, "-m", "speedstats", "parse", str(fixture), "--out", str(tmp_path / "r.json")],
                   check=True, env=env)
    rendered = subprocess.run([sys.executable, "-m", "speedstats", "render", str(tmp_path / "r.json")],
                              check=True, env=env, capture_output=True, text=True).stdout
    assert rendered.startswith("<details>\n <summary>Speed stats:</summary>")
    # Embedded as it is, between blank lines, so that GitHub renders it as the comment.
    assert f"\n\n{rendered}\n\n" in section("The comment")


def test_the_copy_paste_workflow_is_the_example_workflow():
    example = (ROOT / ".github" / "workflows" / "speedstats-example.yml").read_text(encoding="utf-8")
    assert example in fenced_blocks(section("Adding it to a repository"), "yaml")


def test_every_input_is_documented_with_its_default():
    inputs = action()["inputs"]
    rows = table_rows(section("Adding it to a repository").split("### Inputs", 1)[1].split("### Outputs")[0])
    assert [name for name, _ in rows] == list(inputs)
    for name, (default, what) in rows:
        declared = str(inputs[name].get("default", ""))
        if declared:
            assert default == f"`{declared}`", name
        assert len(what) > 20, name


def test_every_output_is_documented():
    rows = table_rows(section("Adding it to a repository").split("### Outputs", 1)[1].split("\n### ", 1)[0])
    assert [name for name, _ in rows] == list(action()["outputs"])


def test_every_exit_status_is_in_the_table_with_what_the_step_does():
    from speedstats import errors

    statuses = sorted(value for name, value in vars(errors).items()
                      if name.startswith("EXIT_") and name != "EXIT_INTERRUPTED")
    rows = table_rows(section("Adding it to a repository").split("### Exit statuses", 1)[1])
    assert [int(status) for status, _ in rows] == statuses == [0, 1, 2, 3, 4, 5, 6, 7]
    for status, (meaning, strict, lenient) in rows:
        assert meaning and strict.startswith(("succeeds", "fails"))
        assert lenient.startswith("succeeds" if status in ("0", "1") else "fails")


def test_the_suite_example_sets_thresholds_per_gpu(tmp_path):
    (suite_text,) = [b for b in fenced_blocks(section("Thresholds per GPU"), "yaml")
                     if b.startswith("# .github/speedstats.yml")]
    path = tmp_path / "speedstats.yml"
    path.write_text(suite_text)
    suite = load_suite(path)
    bs16 = suite.case("resnet50-bs16")
    assert bs16.ms_threshold("NVIDIA GeForce RTX 3080 Ti") == 48.0
    assert bs16.ms_threshold("NVIDIA A100-SXM4-80GB") == 30.0
    assert bs16.ms_threshold("NVIDIA GeForce GTX 1080") == 129.0  # the built-in default stays
    assert bs16.min_relative_speed == 1.2
    assert suite.case("swin-dataloader-w8") is None
    assert suite.lock_timeout_s == 7200
    assert [c.id for c in suite.cases] == [c.id for c in load_suite(profile="default").cases
                                           if c.id != "swin-dataloader-w8"]


def test_the_measured_section_is_there_near_the_end():
    titles = re.findall(r"^## (.+)$", README, re.MULTILINE)
    assert "Measured" in titles[-2:]


def test_no_host_paths_in_the_shipped_files():
    shipped = ["README.md", "action.yml", "Dockerfile", ".dockerignore", "docker/entrypoint.py",
               ".github/workflows/ci.yml", ".github/workflows/speedstats-example.yml"]
    for name in shipped:
        text = (ROOT / name).read_text(encoding="utf-8")
        assert not re.search(r"/(work|root|home/\w+)/", text), name
    assert yaml.safe_load(README.split("```yaml\n", 1)[1].split("```", 1)[0])  # the first yaml block parses
