"""The documentation tells the truth: the README's commands, example comment, workflow, inputs, outputs,
exit statuses and suite example are the project's own, and the docs it links to (methodology, runner,
measurements, CONTRIBUTING) state what the code and the shipped files do."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from actions_runner import action, clean_environ
from speedstats.suite import BUILD_FIELDS, MODES, load_suite

ROOT = Path(__file__).resolve().parents[1]
README_LINES_MAX = 340  # 300, and the table of examples and the versioning policy of the first release,
# then the check-run input and its permission in the example, then bisect and reproduce
DOCS = ["README.md", "CONTRIBUTING.md", "docs/methodology.md", "docs/runner.md", "docs/measurements.md",
        "docs/forks.md", "docs/reading-the-comparison.md", "docs/matrix.md", "CHANGELOG.md", "docs/bisect.md",
        "docs/history.md"]


def read(name):
    return (ROOT / name).read_text(encoding="utf-8")


README = read("README.md")


def fenced_blocks(text, language):
    return re.findall(rf"^```{language}\n(.*?)^```$", text, re.MULTILINE | re.DOTALL)


def headings(text):
    """(level, title, line index) of each markdown heading, skipping fenced code (yaml comments)."""
    found, fenced = [], False
    for index, line in enumerate(text.splitlines()):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"^(#+) (.+)$", line)):
            found.append((len(match.group(1)), match.group(2), index))
    return found


def section(title, text=README, level=2):
    """The body of the heading `title` at `level`, up to the next heading of that level or higher."""
    lines = text.splitlines(keepends=True)
    marks = headings(text)
    starts = [i for lv, t, i in marks if lv == level and t == title]
    assert len(starts) == 1, f"no single section '{'#' * level} {title}'"
    end = next((i for lv, _, i in marks if i > starts[0] and lv <= level), len(lines))
    return "".join(lines[starts[0] + 1:end])


def table_rows(text):
    """The first cell and the rest of each row, of the table rows in text whose first cell is code."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if line.startswith("| `"):
            rows.append((cells[0].strip("`"), cells[1:]))
    return rows


def rendered(*argv):
    return subprocess.run([sys.executable, "-m", "speedstats", *map(str, argv)], check=True,
                          env=clean_environ(), capture_output=True, text=True).stdout


# -- README.md: for the people who use it ---------------------------------------------------------------


def test_the_readme_opens_with_what_speedstats_is_then_the_two_set_up_commands_and_stays_short():
    lines = README.splitlines()
    assert len(lines) <= README_LINES_MAX
    assert lines[0] == "# speedstats" and lines[1] == ""
    fence = lines.index("```sh")
    sentence = " ".join(lines[2:fence]).strip()  # one paragraph of one sentence, then the commands
    assert sentence.startswith("speedstats is ") and sentence.count(". ") == 0 and sentence.endswith(".")
    smoke, test, end = lines[fence + 1:fence + 4]
    assert smoke.startswith("./scripts/smoke.sh ") and "the main job on the CPU" in smoke
    assert test.startswith("./scripts/test.sh ") and "whole test suite" in test
    assert end == "```"
    for script in ("scripts/smoke.sh", "scripts/test.sh"):
        assert os.access(ROOT / script, os.X_OK), script
        assert "./scripts/bootstrap.sh" in read(script)
    # What the paragraph under the commands promises is what smoke.sh runs.
    smoke = read("scripts/smoke.sh")
    assert "run --profile smoke --device cpu --out out/smoke" in smoke
    assert "`out/smoke/comment.md`" in README.split("\n## ", 1)[0]


def test_the_table_of_files_to_copy_names_every_example_and_only_those():
    rows = table_rows(section("Which file to copy"))
    named = [name for first, _ in rows for name in re.findall(r"`([\w.-]+\.yml)`", "`" + first + "`")]
    assert sorted(named) == sorted(p.name for p in (ROOT / "examples" / "workflows").glob("*.yml"))


def test_the_example_comment_is_what_render_writes_for_a_real_smoke_run(tmp_path):
    comment = section("The comment")
    results = ROOT / "tests" / "data" / "smoke-results.json"
    assert "`speedstats render tests/data/smoke-results.json --profile smoke`" in comment
    body = rendered("render", results, "--profile", "smoke")
    assert body.startswith("<details>\n <summary>Speed stats:</summary>")
    # Embedded as it is, between blank lines, so that GitHub renders it as the comment.
    assert f"\n\n{body}\n\n" in comment


def test_the_copy_paste_workflow_is_the_example_workflow():
    example = read("examples/workflows/speedstats-pull-request.yml")
    assert example in fenced_blocks(section("Adding it to a repository"), "yaml")


def test_every_input_is_documented_with_its_default():
    inputs = action()["inputs"]
    rows = table_rows(section("Inputs"))
    assert [name for name, _ in rows] == list(inputs)
    for name, (default, what) in rows:
        declared = str(inputs[name].get("default", ""))
        if declared:
            assert default == f"`{declared}`", name
        assert len(what) > 20, name


def test_every_output_is_documented():
    rows = table_rows(section("Outputs"))
    assert [name for name, _ in rows] == list(action()["outputs"])


def test_every_exit_status_is_in_the_table_with_what_the_step_does():
    from speedstats import errors

    statuses = sorted(value for name, value in vars(errors).items()
                      if name.startswith("EXIT_") and name != "EXIT_INTERRUPTED")
    rows = table_rows(section("Exit statuses"))
    assert [int(status) for status, _ in rows] == statuses == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    for status, (meaning, strict, lenient) in rows:
        assert meaning and strict.startswith(("succeeds", "fails"))
        assert lenient.startswith("succeeds" if status in ("0", "1") else "fails")
    assert f"exits {errors.EXIT_INTERRUPTED}" in section("Exit statuses")  # a cancelled run


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


# -- the docs the README links to --------------------------------------------------------------------------


def test_the_gpu_example_in_the_methodology_is_what_render_writes_for_a_real_pull_request(tmp_path):
    fixture = ROOT / "tests" / "data" / "pr-cu12-release-body.md"
    rendered("parse", fixture, "--out", tmp_path / "r.json")
    body = rendered("render", tmp_path / "r.json")
    assert body.startswith("<details>\n <summary>Speed stats:</summary>\n\n ``` \nGPU Name: NVIDIA GeForce "
                           "RTX 3080 Ti")
    assert f"\n\n{body}\n\n" in section("The suite", read("docs/methodology.md"))


def test_the_methodology_names_the_modes_and_the_build_inputs_that_exist():
    methodology = read("docs/methodology.md")
    modes = section("What a step measures: `old-bot` and `clean`", methodology)
    assert re.findall(r"^\| \| the old job \| `([\w-]+)` \| `([\w-]+)` \|$", modes, re.MULTILINE) == [MODES]
    contenders = section("The build under test", methodology)
    rows = re.findall(r"^\| [^|]+ \| `([\w-]+)` / `(--[\w-]+)` / `builds\.(\w+)` \|", contenders,
                      re.MULTILINE)
    assert len(rows) == 4
    inputs = action()["inputs"]
    run_help = rendered("run", "--help")
    for action_input, flag, field in rows:
        assert action_input in inputs and flag in run_help and field in BUILD_FIELDS, (action_input, flag,
                                                                                       field)


def test_the_runner_doc_gives_the_daemon_settings_the_shm_check_asks_for():
    from speedstats.bench import shm

    runner = read("docs/runner.md")
    (daemon_text,) = fenced_blocks(section("What the host needs", runner), "json")
    daemon = json.loads(daemon_text)
    assert daemon["default-runtime"] == "nvidia" and "nvidia" in daemon["runtimes"]
    assert f'"default-shm-size": "{daemon["default-shm-size"]}"' in shm.FIX
    assert '"default-runtime": "nvidia"' in shm.FIX
    dockerfile = read("Dockerfile")
    # No NVIDIA_REQUIRE_CUDA in the image (it refused older drivers even for an older torch): the run checks.
    assert not re.findall(r"NVIDIA_REQUIRE_CUDA=", dockerfile)
    assert "sets no `NVIDIA_REQUIRE_CUDA`" in runner and "## Which driver runs which build" in runner
    (base,) = re.findall(r"^FROM (\S+)", dockerfile, re.MULTILINE)
    assert f"`{base.split('@')[0]}`" in runner


def test_every_measurement_comes_with_the_command_that_reproduces_it():
    measurements = read("docs/measurements.md")
    titles = [title for level, title, _ in headings(measurements) if level == 2]
    assert len(titles) >= 5
    commands = []
    for title in titles:
        blocks = fenced_blocks(section(title, measurements), "sh")
        assert blocks, f"docs/measurements.md: '{title}' has no command"
        commands += [line for block in blocks for line in block.splitlines() if line.strip()]
    named = set()
    for command in commands:
        for path in re.findall(r"(?:\./)?((?:scripts|benchmarks|\.ci)/[\w./-]+)", command):
            assert (ROOT / path).exists(), f"docs/measurements.md runs {path}, which does not exist"
            named.add(path)
    assert {f"benchmarks/{p.name}" for p in (ROOT / "benchmarks").glob("*.py")} <= named


def github_anchor(title):
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def test_every_link_between_the_docs_points_at_a_file_and_heading_that_exist():
    for name in DOCS:
        text = re.sub(r"^```.*?^```$", "", read(name), flags=re.MULTILINE | re.DOTALL)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            document = (ROOT / name).parent / path if path else ROOT / name
            assert document.resolve().is_file(), f"{name}: link to {target}: no such file"
            if anchor:
                titles = [title for _, title, _ in headings(document.read_text(encoding="utf-8"))]
                assert anchor in {github_anchor(t)
                                  for t in titles}, f"{name}: link to {target}: no such heading"


def test_the_readme_links_every_doc():
    for name in DOCS[1:]:
        assert f"]({name})" in README, name


def test_contributing_names_the_test_tiers_and_the_test_builds():
    contributing = read("CONTRIBUTING.md")
    commands = fenced_blocks(section("The tests", contributing), "sh")[0]
    assert "./scripts/test.sh --fast " in commands and "./scripts/test.sh  " in commands
    assert (ROOT / "tests" / "oneflow_builds.py").is_file() and "`tests/oneflow_builds.py`" in contributing
    for maker in ("pinned_oneflow_wheel", "repacked_oneflow_wheel", "slow_oneflow_wheel"):
        assert f"`{maker}`" in contributing and f"def {maker}(" in read("tests/oneflow_builds.py")
    assert "`src/speedstats/pipeline.py`" in contributing and "`templates/`" in contributing


def test_no_host_paths_in_the_shipped_files():
    shipped = ["action.yml", "Dockerfile", ".dockerignore", "docker/entrypoint.py",
               ".github/workflows/ci.yml", ".github/workflows/release.yml",
               *[str(p.relative_to(ROOT)) for p in sorted((ROOT / "examples").rglob("*.*"))]] + DOCS
    for name in shipped:
        text = read(name)
        assert not re.search(r"/(work|root|home/\w+)/", text), name
    assert yaml.safe_load(README.split("```yaml\n", 1)[1].split("```", 1)[0])  # the first yaml block parses
