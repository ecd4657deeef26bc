"""Suite files: the built-in profiles, user overrides, and one-line errors."""

import pytest

from speedstats.errors import UserError
from speedstats.suite import load_suite

ANCHOR_ORDER = [
    "resnet50-bs16", "resnet50-bs8", "resnet50-bs4", "resnet50-bs2", "resnet50-bs1",
    "swin-dataloader-w1", "swin-dataloader-w4", "swin-dataloader-w8",
    "resnet50-ddp-bs16", "resnet50-ddp-bs8", "resnet50-ddp-bs4", "resnet50-ddp-bs2", "resnet50-ddp-bs1",
]


def test_default_suite_is_the_anchor_suite_with_its_thresholds():
    suite = load_suite()
    assert [c.id for c in suite.cases] == ANCHOR_ORDER
    by_id = {c.id: c for c in suite.cases}
    relative = {16: 1.05, 8: 1.04, 4: 1.01, 2: 0.99, 1: 0.95}
    relative_ddp = {16: 1.12, 8: 1.10, 4: 1.18, 2: 1.18, 1: 1.15}
    for bs in (16, 8, 4, 2, 1):
        single, ddp = by_id[f"resnet50-bs{bs}"], by_id[f"resnet50-ddp-bs{bs}"]
        assert single.input_shape == ddp.input_shape == [bs, 3, 224, 224]
        assert single.times == ddp.times == (100 if bs >= 8 else 200)
        assert single.warmup == ddp.warmup == 5
        assert single.min_relative_speed == relative[bs] and ddp.min_relative_speed == relative_ddp[bs]
        assert not single.ddp and single.world_size == 1 and ddp.ddp and ddp.world_size == 2
    assert by_id["resnet50-bs16"].ms_threshold("NVIDIA GeForce RTX 3080 Ti") == 129.0
    assert by_id["resnet50-ddp-bs16"].ms_threshold("anything") == 136.3
    assert by_id["resnet50-bs8"].ms_threshold("anything") is None
    for w in (1, 4, 8):
        loader = by_id[f"swin-dataloader-w{w}"]
        assert (loader.batch_size, loader.num_workers, loader.times, loader.input_size) == (32, w, 200, 224)
        assert loader.min_relative_speed is None and loader.max_oneflow_ms == {}


def test_smoke_profile_has_every_case_kind_and_thresholds_of_its_own():
    suite = load_suite(profile="smoke")
    kinds = {(c.kind, c.ddp) for c in suite.cases}
    assert kinds == {("resnet50", False), ("resnet50", True), ("swin_dataloader", False)}
    assert {c.num_workers for c in suite.cases if c.kind == "swin_dataloader"} <= {0, 1, 2}
    assert all(c.world_size == 2 for c in suite.cases if c.ddp)
    assert all(c.min_relative_speed is not None and c.min_relative_speed < 0.5
               for c in suite.cases if c.kind == "resnet50")


OLD_CONTAINER_ENV = {"NVIDIA_TF32_OVERRIDE": "0", "NCCL_P2P_DISABLE": "1", "ONEFLOW_TIMEOUT_SECONDS": "90",
                     "ONEFLOW_THRAED_LOCAL_CACHED_SIZE": "16384"}


@pytest.mark.parametrize("profile", ["default", "smoke"])
def test_profiles_measure_in_old_bot_mode_with_the_old_containers_variables(profile):
    suite = load_suite(profile=profile)
    assert suite.mode == "old-bot" and suite.model == "shared" and suite.env == OLD_CONTAINER_ENV
    for case in suite.cases:
        assert case.mode == "old-bot" and case.model == "shared"
        expected = dict(OLD_CONTAINER_ENV, OMP_NUM_THREADS="1") if case.ddp else OLD_CONTAINER_ENV
        assert case.env == expected, case.id


def test_mode_model_and_env_merge_from_suite_to_case(tmp_path):
    path = tmp_path / "clean.yml"
    path.write_text(
        "extends: default\n"
        "mode: clean\n"
        "model: library\n"
        "env: {NVIDIA_TF32_OVERRIDE: 1, EXTRA: 2.5}\n"
        "cases:\n"
        "  - {id: resnet50-bs16, mode: old-bot, env: {CASE_ONLY: x}}\n"
        "  - {id: resnet50-ddp-bs8, env: {OMP_NUM_THREADS: 4}}\n"
    )
    suite = load_suite(path)
    first, ddp = suite.case("resnet50-bs16"), suite.case("resnet50-ddp-bs8")
    assert (first.mode, first.model) == ("old-bot", "shared")  # old-bot without a model: the shared one
    assert (ddp.mode, ddp.model) == ("clean", "library")
    assert first.env == dict(OLD_CONTAINER_ENV, NVIDIA_TF32_OVERRIDE="1", EXTRA="2.5", CASE_ONLY="x")
    assert ddp.env == dict(OLD_CONTAINER_ENV, NVIDIA_TF32_OVERRIDE="1", EXTRA="2.5", OMP_NUM_THREADS="4")


def test_user_file_overrides_fields_adds_and_skips_cases(tmp_path):
    path = tmp_path / "mine.yml"
    path.write_text(
        "extends: default\n"
        "rounds: 5\n"
        "cases:\n"
        "  - id: resnet50-bs16\n"
        "    times: 50\n"
        "    max_oneflow_ms: {NVIDIA GeForce RTX 3080 Ti: 45.0}\n"
        "  - {id: swin-dataloader-w8, skip: true}\n"
        "  - {id: resnet50-bs32, kind: resnet50, batch_size: 32, times: 50}\n"
    )
    suite = load_suite(path)
    ids = [c.id for c in suite.cases]
    assert "swin-dataloader-w8" not in ids and ids[-1] == "resnet50-bs32" and len(ids) == 13
    first = suite.case("resnet50-bs16")
    assert first.times == 50 and first.min_relative_speed == 1.05 and first.rounds == 5
    assert first.ms_threshold("NVIDIA GeForce RTX 3080 Ti") == 45.0
    assert first.ms_threshold("NVIDIA A100") == 129.0  # the default survives a per-GPU addition


@pytest.mark.parametrize("text, message", [
    ("extends: default\ncases:\n  - {id: resnet50-bs16, min_relative_speed: fast}\n",
     "cases[0] (resnet50-bs16): field 'min_relative_speed' must be a number, got 'fast'"),
    ("extends: default\ncases:\n  - {id: resnet50-bs16, max_oneflow_ms: {default: '129.0'}}\n",
     "cases[0] (resnet50-bs16): field 'max_oneflow_ms.default' must be a number, got '129.0'"),
    ("cases:\n  - {id: a, kind: resnet50, batch_size: 0, times: 1}\n",
     "cases[0] (a): field 'batch_size' must be at least 1, got 0"),
    ("cases:\n  - {id: a, kind: transformer, batch_size: 1, times: 1}\n",
     "cases[0] (a): field 'kind' must be one of resnet50, swin_dataloader, got 'transformer'"),
    ("cases:\n  - {id: a, kind: resnet5, batch_size: 1, times: 1}\n",
     ("cases[0] (a): field 'kind' must be one of resnet50, swin_dataloader, got 'resnet5' "
      "(did you mean resnet50?)")),
    ("cases:\n  - {id: a, kind: resnet50, batch_size: 1, times: 1, tiems: 3}\n",
     "cases[0] (a): unknown field 'tiems'"),
    ("extends: nightly\n", "unknown profile 'nightly' (built-in: default, smoke)"),
    ("extends: default\ncases:\n  - {id: resnet50-bs16, min_relative_speed: .nan}\n",
     ("cases[0] (resnet50-bs16): field 'min_relative_speed' must be a finite number of sensible size, got "
      "nan")),
    ("extends: default\ncases:\n  - {id: resnet50-bs16, min_relative_speed: -1}\n",
     "cases[0] (resnet50-bs16): field 'min_relative_speed' must be at least 0, got -1"),
    ("extends: default\ncases:\n  - {id: resnet50-bs16, max_oneflow_ms: {default: .inf}}\n",
     ("cases[0] (resnet50-bs16): field 'max_oneflow_ms.default' must be a finite number of sensible size, "
      "got inf")),
    ("extends: default\ncases:\n  - {id: resnet50-bs16, max_oneflow_ms: -5}\n",
     "cases[0] (resnet50-bs16): field 'max_oneflow_ms.default' must be at least 0, got -5"),
    ("extends: default\ncases:\n  - {id: resnet50-bs16, timeout_s: .nan}\n",
     "cases[0] (resnet50-bs16): field 'timeout_s' must be a finite number of sensible size, got nan"),
    ("extends: default\nlock_timeout_s: -1\n", "field 'lock_timeout_s' must be at least 0, got -1"),
    ("extends: default\nlock_timeout_s: .nan\n",
     "field 'lock_timeout_s' must be a finite number of sensible size"),
    ("cases:\n  - {id: a, kind: resnet50, batch_size: " + "9" * 400 + ", times: 1}\n",
     "cases[0] (a): field 'batch_size' must be a finite number of sensible size, got 9999"),
    ("cases:\n  - {id: a, kind: swin_dataloader, batch_size: 2, times: 1, num_workers: -1}\n",
     "cases[0] (a): field 'num_workers' must be at least 0, got -1"),
    ("extends: default\ncases:\n  - {id: resnet50-bs16, skip: 'false'}\n",
     "cases[0]: field 'skip' must be true or false, got 'false'"),
    ("cases:\n  - {id: a, kind: resnet50, batch_size: 1, times: 1, skip: 'yes'}\n",
     "cases[0]: field 'skip' must be true or false, got 'yes'"),
    ("cases:\n  - {id: a, kind: resnet50, batch_size: 1, times: 1, skip: true}\n",
     "every case has 'skip: true'; nothing to run"),
    ("extends: default\ndataset: {cache_dir: 5}\n",
     "dataset: field 'cache_dir' must be a folder path, got 5"),
    ("cases: [\n", "not valid YAML at line 2"),
    ("extends: default\nmode: fair\n", "field 'mode' must be one of old-bot, clean, got 'fair'"),
    ("extends: default\nmode: olbot\n",
     "field 'mode' must be one of old-bot, clean, got 'olbot' (did you mean old-bot?)"),
    ("extends: default\nmodel: library\n", "field 'model': library needs 'mode: clean'"),
    ("extends: default\nenv: {NVIDIA_TF32_OVERRIDE: true}\n",
     "field 'env.NVIDIA_TF32_OVERRIDE' must be a string or a number, got True"),
    ("extends: default\ncases:\n  - {id: resnet50-bs16, env: {A: [1]}}\n",
     "cases[0] (resnet50-bs16): field 'env.A' must be a string or a number, got [1]"),
    ("extends: default\nenv: [A=1]\n", "field 'env' must map variable names to values"),
    ("extends: default\ntoo_few_gpus: wait\n", "field 'too_few_gpus' must be one of skip, fail, got 'wait'"),
])
def test_bad_suite_names_the_file_and_field(tmp_path, text, message):
    path = tmp_path / "suite.yml"
    path.write_text(text)
    with pytest.raises(UserError) as err:
        load_suite(path)
    assert message in str(err.value)
    assert "\n" not in str(err.value)
    if "profile" not in message:
        assert str(err.value).startswith(str(path))


def test_too_few_gpus_is_skip_by_default_and_a_file_may_make_it_fail(tmp_path):
    assert load_suite(profile="default").too_few_gpus == "skip"
    path = tmp_path / "suite.yml"
    path.write_text("extends: default\ntoo_few_gpus: fail\n")
    assert load_suite(path).too_few_gpus == "fail"


def test_skip_true_drops_a_case_without_extends_too(tmp_path):
    path = tmp_path / "suite.yml"
    path.write_text("cases:\n  - {id: a, kind: resnet50, batch_size: 1, times: 1}\n"
                    "  - {id: b, kind: resnet50, batch_size: 2, times: 1, skip: true}\n"
                    "  - {id: c, kind: resnet50, batch_size: 4, times: 1, skip: false}\n")
    assert [c.id for c in load_suite(path).cases] == ["a", "c"]


def billion_laughs(levels=9, width=10):
    """A suite whose dataset.cache_dir expands to width**levels strings through YAML aliases."""
    lines = ["extends: smoke", "dataset:", "  cache_dir:", f"    - &l0 [{', '.join(['lol'] * width)}]"]
    for level in range(1, levels):
        lines.append(f"    - &l{level} [{', '.join([f'*l{level - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def run_limited(argv, cwd, memory_bytes=1 << 30, timeout=60):
    """`python -m speedstats ARGV` with at most memory_bytes of address space."""
    import os
    import resource
    import subprocess
    import sys
    from pathlib import Path

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))

    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_", "SPEEDSTATS_"))}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1] / "src")
    return subprocess.run([sys.executable, "-m", "speedstats", *map(str, argv)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout, preexec_fn=limit, check=False)


@pytest.mark.parametrize("command", ["render", "run"])
def test_a_yaml_alias_bomb_is_refused_quickly_in_bounded_memory(tmp_path, command):
    from pathlib import Path

    suite = tmp_path / "bomb.yml"
    suite.write_text(billion_laughs())
    results = Path(__file__).resolve().parent / "data" / "smoke-results.json"
    argv = [command, results] if command == "render" else [command, "--device", "cpu", "--out", tmp_path]
    proc = run_limited(argv + ["--suite", suite], tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == (f"speedstats: error: {suite}: not a suite: it expands to more than 10000 YAML "
                           "values (aliases counted where they are used)\n")
    assert proc.stdout == "" and sorted(p.name for p in tmp_path.iterdir()) == ["bomb.yml"]


def test_anchors_and_aliases_within_the_bound_are_read(tmp_path):
    path = tmp_path / "suite.yml"
    path.write_text("extends: smoke\nenv: &shared {A: '1'}\ncases:\n  - {id: resnet50-bs2, env: *shared}\n")
    suite = load_suite(path)
    assert suite.env["A"] == "1" and suite.case("resnet50-bs2").env["A"] == "1"


@pytest.mark.parametrize("text, message", [
    ("extends: default\ndataset: {cache_dir: [" + "'" + "x" * 100000 + "']}\n",
     "dataset: field 'cache_dir' must be a folder path, got ['xxxxxxx"),
    ("extends: default\ncases:\n  - {id: resnet50-bs16, kind: '" + "k" * 100000 + "'}\n",
     "cases[0] (resnet50-bs16): field 'kind' must be one of resnet50, swin_dataloader, got 'kkkk"),
    ("cases:\n  - {id: a, kind: resnet50, batch_size: " + "9" * 5000 + ", times: 1}\n",
     "not a suite: a value cannot be read (Exceeds the limit (4300)"),
    ("extends: default\n1: x\n", "unknown field '1'"),
])
def test_messages_quote_a_bounded_part_of_a_value(tmp_path, text, message):
    path = tmp_path / "suite.yml"
    path.write_text(text)
    with pytest.raises(UserError) as err:
        load_suite(path)
    assert message in str(err.value) and len(str(err.value)) < len(str(path)) + 250
