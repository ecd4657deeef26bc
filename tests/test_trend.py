"""`speedstats trend`: one PNG per case from the history file, one line per framework."""

import statistics
import sys
from pathlib import Path

import pytest

from speedstats import cli
from speedstats import results as results_model
from speedstats.analysis.trend import DPI, FIGURE_SIZE, FRAMEWORK_STYLE, draw_trends, plot_case
from speedstats.errors import UserError
from speedstats.history import append_history, read_history
from speedstats.parse import parse_speed_stats
from speedstats.results import CaseResult, FrameworkResult, Results

GPU = "NVIDIA GeForce RTX 3080 Ti"


def framework(rounds, times):
    per_iter = statistics.median(rounds)
    return FrameworkResult(total_s=per_iter * times, per_iter_s=per_iter, times=times, rounds_s=list(rounds))


def run(oneflow_ms, gpu_name=GPU, with_dataloader=True):
    rounds = [oneflow_ms / 1000 * f for f in (0.98, 1.0, 1.03)]
    cases = [CaseResult(
        id="resnet50-bs16", kind="resnet50", batch_size=16, times=100, input_shape=[16, 3, 224, 224],
        frameworks={"oneflow": framework(rounds, 100), "pytorch": framework([0.057, 0.058, 0.056], 100)},
    )]
    if with_dataloader:
        cases.append(CaseResult(
            id="swin-dataloader-w1", kind="swin_dataloader", batch_size=32, times=200, num_workers=1,
            frameworks={"oneflow": framework([0.200], 200), "pytorch": framework([0.130], 200)},
        ))
    return Results(suite="default", device="cuda", gpu_name=gpu_name, cases=cases)


@pytest.fixture
def history(tmp_path):
    path = tmp_path / "history.jsonl"
    append_history(path, run(40.0, gpu_name="NVIDIA GeForce GTX 1080"), commit="9" * 40)
    for i, ms in enumerate([40.0, 41.0, 46.0, 43.0]):
        append_history(path, run(ms, with_dataloader=i != 2), commit=f"{i}abcdef" + "0" * 33)
    return path


def colour_present(image, hex_colour):
    """Whether the RGB(A) float image has at least a few pixels of exactly this colour."""
    np = pytest.importorskip("numpy")
    rgb = np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)]) / 255
    close = np.all(np.abs(image[:, :, :3] - rgb) < 1.5 / 255, axis=2)
    return int(close.sum())


def test_one_png_per_case_with_one_line_per_framework(history, tmp_path):
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    entries, problems = read_history(history)
    assert problems == []
    plots, other_machine = draw_trends(entries, tmp_path / "trend")
    assert other_machine == 1  # the GTX 1080 run is not drawn next to the RTX 3080 Ti ones
    assert [(p.case_id, p.path.name, p.runs) for p in plots] == [
        ("resnet50-bs16", "resnet50-bs16.png", 4),
        ("swin-dataloader-w1", "swin-dataloader-w1.png", 4),
    ]
    for plot in plots:
        assert plot.path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert plot.path.stat().st_size > 10_000
        image = imread(plot.path)
        assert image.shape[:2] == (FIGURE_SIZE[1] * DPI, FIGURE_SIZE[0] * DPI)
        for style in FRAMEWORK_STYLE.values():
            assert colour_present(image, style["color"]) > 200
        axes = plot.figure.axes[0]
        lines = axes.get_lines()
        assert [line.get_label() for line in lines] == ["OneFlow", "PyTorch"]
        assert [line.get_color() for line in lines] == [s["color"] for s in FRAMEWORK_STYLE.values()]
        assert [t.get_text() for t in axes.get_legend().get_texts()] == ["OneFlow", "PyTorch"]
        assert [t.get_text() for t in axes.get_xticklabels()] == ["0abcdef", "1abcdef", "2abcdef", "3abcdef"]

    resnet = plots[0].figure.axes[0]
    assert list(resnet.get_lines()[0].get_ydata()) == pytest.approx([40.0, 41.0, 46.0, 43.0])
    assert resnet.get_ylabel() == "time per iteration (ms)"
    assert resnet.get_title() == f"resnet50-bs16 on {GPU} (cuda)"
    dataloader = plots[1].figure.axes[0].get_lines()[0].get_ydata()
    assert dataloader[2] != dataloader[2]  # the run without that case leaves a gap (NaN)
    assert plots[1].figure.axes[0].get_ylabel() == "time per iteration (s)"


def test_cli_writes_pngs_and_an_index_and_reports_bad_lines(history, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    with open(history, "a", encoding="utf-8") as f:
        f.write("not json\n")
    out = tmp_path / "trend"
    assert cli.main(["trend", str(history), "--out", str(out), "--case", "resnet50-bs16", "--last", "2"]) == 0
    captured = capsys.readouterr()
    assert captured.out == f"{out / 'resnet50-bs16.png'}\n"
    assert captured.err == (
        f"speedstats: warning: skipped {history}:6: not valid JSON: Expecting value (column 1)\n"
        "speedstats: note: left out 1 run(s) on another device or GPU than the newest\n"
    )
    assert sorted(p.name for p in out.iterdir()) == ["index.md", "resnet50-bs16.png"]
    assert (out / "index.md").read_text(encoding="utf-8") == (
        "# Speed over commits\n\n![resnet50-bs16](resnet50-bs16.png)\n\n"
    )

    assert cli.main(["trend", str(history), "--out", str(out), "--case", "resnet50-bs99"]) == 2
    assert capsys.readouterr().err.endswith(
        "speedstats: error: --case: no run in the history has case 'resnet50-bs99'\n"
    )
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    assert cli.main(["trend", str(empty), "--out", str(out)]) == 2
    assert capsys.readouterr().err == f"speedstats: error: {empty}: no usable run in the history file\n"


def test_a_clear_error_when_matplotlib_is_missing(history, tmp_path, monkeypatch):
    entries, _ = read_history(history)
    # A None entry in sys.modules makes `import matplotlib.figure` raise ImportError, as when absent.
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(UserError, match=r"^matplotlib: not installed; 'speedstats trend' needs it"):
        plot_case(entries, "resnet50-bs16", tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


DATA = Path(__file__).parent / "data"


def test_trend_of_real_smoke_suite_runs(tmp_path):
    pytest.importorskip("matplotlib")
    from matplotlib.image import imread

    history = tmp_path / "history.jsonl"
    # An older run on a GPU, read back from a real Speed stats comment: left out of the CPU plots.
    old_comment = parse_speed_stats((DATA / "pr-cu12-release-body.md").read_text(encoding="utf-8"))
    append_history(history, old_comment, commit="c" * 40)
    append_history(history, results_model.load(DATA / "smoke-results.json"), commit="a1b2c3d4e5f6" + "0" * 28)
    append_history(history, results_model.load(DATA / "smoke-results-head.json"), commit="f6e5d4c3b2a1"
                   + "0" * 28)
    entries, problems = read_history(history)
    assert problems == [] and len(entries) == 3
    plots, other_machine = draw_trends(entries, tmp_path / "trend")
    assert other_machine == 1
    smoke_ids = [c.id for c in entries[-1].results.cases]
    assert [p.case_id for p in plots] == smoke_ids and len(smoke_ids) == 5
    for plot in plots:
        assert plot.path.name == f"{plot.case_id}.png" and plot.path.stat().st_size > 10_000
        image = imread(plot.path)
        assert image.shape[:2] == (450, 800)
        for style in FRAMEWORK_STYLE.values():
            assert colour_present(image, style["color"]) > 200
        lines = plot.figure.axes[0].get_lines()
        assert [line.get_label() for line in lines] == ["OneFlow", "PyTorch"]
        assert [t.get_text() for t in plot.figure.axes[0].get_xticklabels()] == ["a1b2c3d", "f6e5d4c"]
        for line, name in zip(lines, ("oneflow", "pytorch")):
            scale = 1000 if plot.case_id.startswith("resnet50") else 1
            expected = [
                next(c for c in e.results.cases if c.id == plot.case_id).frameworks[name].per_iter_s * scale
                for e in entries[1:]
            ]
            assert list(line.get_ydata()) == pytest.approx(expected)


def test_a_change_point_is_marked_between_the_runs_on_either_side_with_its_shift(tmp_path):
    pytest.importorskip("matplotlib")
    from histories import history_runs, history_text
    from speedstats.history import read_history_text

    history = read_history_text(history_text(history_runs(20, shift_at=12, shift=0.15)), "h.jsonl")
    (plot,), _ = draw_trends(history.entries, tmp_path)
    ((role, x, ratio),) = plot.changes
    assert (role, x) == ("oneflow", 12) and ratio == pytest.approx(1.15, abs=0.02)
    axes = plot.figure.axes[0]
    lines = axes.get_lines()
    assert [line.get_label() for line in lines[:2]] == ["OneFlow", "PyTorch"] and len(lines) == 3
    mark = lines[2]
    assert list(mark.get_xdata()) == [11.5, 11.5] and mark.get_linestyle() == "--"
    assert mark.get_color() == FRAMEWORK_STYLE["oneflow"]["color"]
    (label,) = axes.texts
    assert label.get_text() == f"{(ratio - 1) * 100:+.1f}%"


def test_trend_says_when_older_runs_are_summarised(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from histories import history_runs

    path = tmp_path / "history.jsonl"
    for commit, results in history_runs(24):
        append_history(path, results, commit=commit, max_runs=20)
    assert cli.main(["trend", str(path), "--out", str(tmp_path / "out")]) == 0
    assert capsys.readouterr().err.startswith(
        f"speedstats: note: {path}: 4 older run(s) are summarised in the file (commits ")
