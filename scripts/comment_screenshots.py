#!/usr/bin/env python3
"""Screenshots of the comment for each outcome, as a maintainer sees it on GitHub, in docs/comment/.

Each outcome's results are made here from the project's own analysis (the rule driven over per-round
ratios, as the runner drives it), rendered as `speedstats render` renders them, read as GitHub reads
markdown (markdown-it-py: CommonMark with tables), every <details> opened, and photographed by headless
Chromium. Rerun it after a change of wording and look at the pictures:

    .venv-light/bin/python scripts/comment_screenshots.py [--out docs/comment] [--chromium chromium]

Needs Chromium (Debian: `apt-get install chromium fonts-noto-color-emoji`).
"""

from __future__ import annotations

import argparse
import copy
import html
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from markdown_it import MarkdownIt

from speedstats.analysis.rule import DEFAULT_RULE
from speedstats.analysis.sequence import DONE, Rounds
from speedstats.github.report import GpuRow, render_report
from speedstats.render import render_speed_stats
from speedstats.results import CaseResult, FrameworkResult, Results
from speedstats.verdict import FAIL_MARK, PASS_MARK, judge

ROOT = Path(__file__).resolve().parents[1]
BASE = [0.25, 0.26, 0.25, 0.27, 0.25, 0.26, 0.25, 0.26, 0.27, 0.25]
PYTORCH = [0.18, 0.181, 0.179, 0.18, 0.182, 0.18, 0.181, 0.18, 0.179, 0.18]
# Per-round ratios head/base for each verdict.
RATIOS = {
    "regression": [1.21, 1.18, 1.24, 1.19, 1.22, 1.20, 1.17, 1.23, 1.20, 1.21],
    "no-change": [1.01, 0.99, 1.00, 1.02, 0.99, 1.00, 1.01, 0.98, 1.00, 1.01],
    "likely-slower": [1.20, 0.98, 1.25, 1.01, 1.30, 0.97, 1.18, 1.05, 1.22, 0.99],
    "inconclusive": [1.06, 1.01, 1.08, 0.99, 1.07, 1.02, 1.05, 1.00, 1.06, 1.03],
}
BUILDS = {
    "oneflow": {"family": "oneflow", "source": "wheel",
                "packages": {"oneflow": {"version": "0.9.1.dev20261207+cu117", "git_commit": "381b12c0a1",
                                         "wheel": "oneflow-0.9.1.dev20261207+cu117-cp310-cp310-"
                                                  "manylinux2014_x86_64.whl", "sha256": "ab" * 32}}},
    "oneflow_base": {"family": "oneflow", "source": "wheel",
                     "packages": {"oneflow": {"version": "0.9.1.dev20261206+cu117",
                                              "git_commit": "2f09d1e7b3"}}},
    "pytorch": {"family": "pytorch", "source": "requirement",
                "packages": {"torch": {"version": "2.7.1", "requirement": "torch==2.7.1"}}},
}
STYLE = """
body { font: 14px/1.5 -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif; color: #1f2328;
       margin: 0; padding: 16px; width: 1000px; background: #fff; }
.comment { border: 1px solid #d1d9e0; border-radius: 6px; padding: 16px; }
pre { background: #f6f8fa; padding: 16px; border-radius: 6px; font: 12px/1.45 monospace; white-space: pre; }
table { border-collapse: collapse; margin: 8px 0; } td, th { border: 1px solid #d1d9e0; padding: 6px 13px; }
th { background: #f6f8fa; } p { margin: 0 0 12px; } summary { cursor: pointer; }
"""


def framework(rounds):
    per_iter = sorted(rounds)[len(rounds) // 2]
    return FrameworkResult(total_s=per_iter * 100, per_iter_s=per_iter, times=100, rounds_s=list(rounds),
                           round_iterations=10)


def head_vs_base_case(case_id, batch, ratios):
    rounds = Rounds(DEFAULT_RULE)
    for ratio in ratios:
        if rounds.action == DONE:
            break
        rounds.add(ratio)
    if rounds.action != DONE:
        rounds.stop_now()
    base = [BASE[k % len(BASE)] for k in range(len(rounds.ratios))]
    head = [b * r for b, r in zip(base, ratios)]
    case = CaseResult(id=case_id, kind="resnet50", batch_size=batch, times=100,
                      input_shape=[batch, 3, 224, 224])
    case.frameworks = {"oneflow": framework(head), "oneflow_base": framework(base),
                       "pytorch": framework(PYTORCH)}
    case.paired = rounds.verdict(head, base)
    return case


def results_of(*cases):
    return Results(suite="default", device="cuda", gpu_name="NVIDIA GeForce RTX 3080 Ti", cases=list(cases),
                   builds=copy.deepcopy(BUILDS))


def outcomes():
    """{name: comment body} for each outcome a maintainer reads."""
    passing = results_of(head_vs_base_case("resnet50-bs16", 16, RATIOS["no-change"]))
    del passing.builds["oneflow_base"]
    for case in passing.cases:
        del case.frameworks["oneflow_base"]
        case.paired = None
    bodies = {"pass": passing}
    for verdict, ratios in RATIOS.items():
        bodies[verdict] = results_of(head_vs_base_case("resnet50-bs16", 16, ratios))
    disturbed = results_of(head_vs_base_case("resnet50-bs16", 16, RATIOS["no-change"]))
    disturbed.cases[0].disturbance = {"contenders": {"oneflow": ["another process used 1.8 cores"]},
                                      "text": "another process used 1.8 cores in 4 of 10 rounds"}
    bodies["disturbed"] = disturbed
    failed = results_of(head_vs_base_case("resnet50-bs16", 16, RATIOS["no-change"]),
                        CaseResult(id="resnet50-ddp-bs16", kind="resnet50", batch_size=16, times=0, ddp=True,
                                   world_size=2, input_shape=[16, 3, 224, 224],
                                   error="oneflow: worker exited with status 1: CUDA out of memory"))
    bodies["failed-case"] = failed
    fork = results_of(head_vs_base_case("resnet50-bs16 @octocat [x](https://e.example)", 16,
                                        RATIOS["regression"]))
    fork.gpu_name = "GPU </details> ![i](https://e.example/i.png)"
    bodies["fork"] = fork
    older = results_of(head_vs_base_case("resnet50-bs16", 16, RATIOS["regression"]))
    older.gpu_name = "NVIDIA GeForce GTX 1080"
    rendered = {name: render_speed_stats(r, None, judge(r, None)) for name, r in bodies.items()}
    rows = [GpuRow("rtx3080ti", "passed", "https://github.com/o/r/actions/runs/1/job/11",
                   name="NVIDIA GeForce RTX 3080 Ti", verdict=PASS_MARK + "pass", body=rendered["pass"]),
            GpuRow("gtx1080", "failed", "https://github.com/o/r/actions/runs/1/job/12",
                   name="NVIDIA GeForce GTX 1080", verdict=f"{FAIL_MARK}fail (score 2)",
                   body=render_speed_stats(older, None, judge(older, None)))]
    rendered["matrix-report"] = render_report(rows, "fail", "381b12c0a1" + "0" * 30, 1, 1,
                                              "https://github.com/o/r/actions/runs/1", 0)
    return rendered


def page(body):
    shown = MarkdownIt("commonmark").enable("table").render(body).replace("<details>", "<details open>")
    return (f"<!doctype html><meta charset=utf-8><title>comment</title><style>{STYLE}</style>"
            f"<div class=comment>{shown}</div>")


def height(body):
    """The page's height in pixels, from the markdown: wrapped paragraphs, table rows and code lines."""
    pixels = 80
    for line in body.splitlines():
        if line.startswith("|"):
            pixels += 38
        elif line.strip():
            pixels += 21 * (len(line) // 125 + 1) + 6
        else:
            pixels += 4
    return pixels


def screenshot(chromium, html_path, png_path, pixels):
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--window-size=1040,{pixels}", f"--screenshot={png_path}", html_path.as_uri()],
                   check=True, capture_output=True, timeout=120)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "comment")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    index = ["# The comment, outcome by outcome", "",
             ("Made by `scripts/comment_screenshots.py` (markdown read as GitHub reads it, every "
              "`<details>` opened); rerun it after a change of wording."), ""]
    with tempfile.TemporaryDirectory() as folder:
        for name, body in outcomes().items():
            html_path = Path(folder) / f"{name}.html"
            html_path.write_text(page(body), encoding="utf-8")
            screenshot(args.chromium, html_path, args.out / f"{name}.png", height(body))
            (args.out / f"{name}.md").write_text(body, encoding="utf-8")
            index += [f"## {name}", "", f"![{html.escape(name)}]({name}.png)", "",
                      f"The markdown: [{name}.md]({name}.md)", ""]
    (args.out / "README.md").write_text("\n".join(index), encoding="utf-8")
    print(f"wrote {len(index)} lines and the pictures to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
