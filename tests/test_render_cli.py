"""`speedstats render` and `speedstats parse` on the command line: output, exit codes, bad input."""

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from speedstats.cli import main
from speedstats.parse import parse_speed_stats

DATA = Path(__file__).parent / "data"
SRC = Path(__file__).parents[1] / "src"


def read(name):
    return (DATA / name).read_text(encoding="utf-8")


@pytest.fixture
def results_file(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(parse_speed_stats(read("pr-cu12-release-thread.txt")).to_json(), encoding="utf-8")
    return path


def edit_results(path, change):
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_render_prints_the_body_exactly_and_exits_0(results_file, capsys):
    assert main(["render", str(results_file)]) == 0
    out, err = capsys.readouterr()
    assert (out, err) == (read("pr-cu12-release-body.md"), "")


def test_render_exits_1_when_the_verdict_fails_with_the_reasons_on_stderr(results_file, capsys):
    def slow_oneflow(data):
        data["cases"][0]["frameworks"]["oneflow"].update(per_iter_s=0.1304, total_s=13.04)

    assert main(["render", str(edit_results(results_file, slow_oneflow))]) == 1
    out, err = capsys.readouterr()
    assert out.split("\n")[6:9] == [
        " ❌ OneFlow resnet50 time: 130.4ms (= 13040.0ms / 100, input_shape=[16, 3, 224, 224])",
        "PyTorch resnet50 time: 57.2ms (= 5724.1ms / 100, input_shape=[16, 3, 224, 224])",
        "❌ Relative speed: 0.44 (= 57.2ms / 130.4ms)",
    ]
    assert err == (
        "speedstats: verdict: failed (score 3)\n"
        "speedstats:   resnet50-bs16: relative speed 0.44 is below 1.05\n"
        "speedstats:   resnet50-bs16: OneFlow 130.4ms is above 129.0ms on NVIDIA GeForce RTX 3080 Ti\n"
    )


def test_render_out_writes_the_file_and_prints_nothing(results_file, tmp_path, capsys):
    out_file = tmp_path / "out" / "comment.md"
    assert main(["render", str(results_file), "--out", str(out_file)]) == 0
    assert out_file.read_text(encoding="utf-8") == read("pr-cu12-release-body.md")
    assert capsys.readouterr() == ("", "")


def test_the_suite_follows_the_results_profile_unless_given(results_file, capsys):
    def smoke_run(data):
        data["suite"] = "smoke"
        data["cases"] = [c for c in data["cases"] if c["id"] == "resnet50-bs2"]
        data["cases"][0]["frameworks"]["pytorch"].update(per_iter_s=0.0092, total_s=1.834)  # 0.50

    edit_results(results_file, smoke_run)
    assert main(["render", str(results_file)]) == 0  # smoke: at least 0.25
    assert "✔️ Relative speed: 0.50 (= 9.2ms / 18.3ms)" in capsys.readouterr().out
    assert main(["render", str(results_file), "--profile", "default"]) == 0  # one miss scores 1
    assert "❌ Relative speed: 0.50 (= 9.2ms / 18.3ms)" in capsys.readouterr().out
    edit_results(results_file, lambda data: data.update(suite="my-own-suite"))
    assert main(["render", str(results_file)]) == 0
    assert "❌ Relative speed: 0.50" in capsys.readouterr().out  # not a profile: the default suite


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def malformed_json(tmp_path, results_file):
    return ["render", str(write(tmp_path / "broken.json", '{"suite": "default",\n "cases": [}'))]


def missing_field(tmp_path, results_file):
    return ["render", str(edit_results(results_file, lambda data: data.pop("gpu_name")))]


def missing_framework_field(tmp_path, results_file):
    return ["render",
            str(edit_results(results_file, lambda d: d["cases"][2]["frameworks"]["pytorch"].pop("total_s")))]


def non_numeric_threshold(tmp_path, results_file):
    suite = write(tmp_path / "suite.yml",
                  "extends: default\ncases:\n  - id: resnet50-bs8\n    min_relative_speed: fast\n")
    return ["render", str(results_file), "--suite", str(suite)]


def non_numeric_ms_threshold(tmp_path, results_file):
    suite = write(tmp_path / "suite.yml",
                  "extends: default\ncases:\n  - id: resnet50-bs16\n    max_oneflow_ms:\n      default: "
                  "'129.0'\n")
    return ["render", str(results_file), "--suite", str(suite)]


def unknown_template_variable(tmp_path, results_file):
    (tmp_path / "templates").mkdir()
    write(tmp_path / "templates" / "speed_stats.md.j2", "Speed stats on {{ gpu }}\n")
    return ["render", str(results_file), "--templates", str(tmp_path / "templates")]


def truncated_stats_line(tmp_path, results_file):
    text = read("pr-revert-thread.txt").replace("input_shape=[2, 3, 224, 224], ddp, world size=2)",
                                                "input_sh", 1)
    return ["parse", str(write(tmp_path / "thread.txt", text))]


def missing_input(tmp_path, results_file):
    return ["parse", str(tmp_path / "nothing.txt")]


@pytest.mark.parametrize("make_args, message", [
    (malformed_json, r"broken\.json: not valid JSON: Expecting value at line 2 column 12$"),
    (missing_field, r"results\.json: missing field 'gpu_name'$"),
    (missing_framework_field,
     (r"results\.json: cases\[2\] \(resnet50-bs4\)\.frameworks\.pytorch: missing field "
                              r"'total_s' \(required when there is no 'error'\)$")),
    (non_numeric_threshold, (r"suite\.yml: cases\[1\] \(resnet50-bs8\): field 'min_relative_speed' must be a "
                            r"number, got 'fast'$")),
    (non_numeric_ms_threshold,
     (r"suite\.yml: cases\[0\] \(resnet50-bs16\): field 'max_oneflow_ms\.default' must "
                               r"be a number, got '129\.0'$")),
    (unknown_template_variable, r"templates/speed_stats\.md\.j2:1: UndefinedError: 'gpu' is undefined$"),
    (truncated_stats_line,
     (r"thread\.txt: line 61: truncated or malformed stats line: 'OneFlow resnet50 time: "
                           r"25\.0ms \(= 5002\.8ms / 200, input_sh'$")),
    (missing_input, r"nothing\.txt: Speed stats file not found$"),
])
def test_bad_input_is_one_line_naming_what_is_wrong_exit_2_and_nothing_written(
    tmp_path, results_file, capsys, make_args, message
):
    args = make_args(tmp_path, results_file)
    out_file = tmp_path / "out.txt"
    assert main([*args, "--out", str(out_file)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1 and err.startswith("speedstats: error: ")
    assert re.search(message, err.rstrip("\n")), err
    assert not out_file.exists() and sorted(p.name for p in out_file.parent.glob(".out.txt*")) == []
    assert main(args) == 2  # the same to stdout: nothing printed
    assert capsys.readouterr().out == ""


def test_parse_reads_stdin_and_its_output_renders_back(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO(read("pr-revert-raw.log")))
    assert main(["parse"]) == 0
    parsed, err = capsys.readouterr()
    assert err == "" and parsed == parse_speed_stats(read("pr-revert-raw.log")).to_json()
    results_file = write(tmp_path / "results.json", parsed)
    assert main(["render", str(results_file)]) == 0
    assert capsys.readouterr().out == read("pr-revert-body.md")


def test_parse_out_and_block(tmp_path, capsys):
    both = write(tmp_path / "both.txt", read("pr-cu12-release-thread.txt") + "\n\n"
                 + read("pr-revert-thread.txt"))
    assert main(["parse", str(both), "--block", "2", "--out", str(tmp_path / "r.json")]) == 0
    assert capsys.readouterr() == ("", "")
    assert (tmp_path / "r.json").read_text(encoding="utf-8") == parse_speed_stats(
        read("pr-revert-thread.txt")).to_json()


def test_render_runs_with_only_jinja2_and_pyyaml(tmp_path, results_file):
    import jinja2
    import markupsafe
    import yaml

    light = tmp_path / "light"
    light.mkdir()
    for module in (jinja2, markupsafe, yaml):
        package = Path(module.__file__).parent
        (light / package.name).symlink_to(package, target_is_directory=True)
    attempts = tmp_path / "heavy-imports.txt"
    for heavy in ("torch", "oneflow"):  # record any attempt to import them, even one that is caught
        (light / heavy).mkdir()
        write(light / heavy / "__init__.py",
              f"open({str(attempts)!r}, 'a').write('{heavy}\\n')\nraise ImportError('{heavy} is not "
              "installed')\n")
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": os.pathsep.join([str(SRC), str(light)])}

    command = subprocess.run([sys.executable, "-S", "-m", "speedstats", "render", str(results_file)],
                             env=env, capture_output=True, timeout=60, check=False)
    assert (command.returncode, command.stderr) == (0, b"")
    assert command.stdout.decode("utf-8") == read("pr-cu12-release-body.md")

    probe = (
        "import sys\n"
        "from speedstats.cli import main\n"
        "rc = main(['render', sys.argv[1], '--out', sys.argv[2]])\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'oneflow', 'github'))\n"
        "print(rc, heavy, 'site' in sys.modules)\n"
    )
    out_file = tmp_path / "comment.md"
    checked = subprocess.run([sys.executable, "-S", "-c", probe, str(results_file), str(out_file)],
                             env=env, capture_output=True, text=True, timeout=60, check=False)
    assert (checked.returncode, checked.stdout, checked.stderr) == (0, "0 [] False\n", "")
    assert out_file.read_text(encoding="utf-8") == read("pr-cu12-release-body.md")
    assert not attempts.exists()
