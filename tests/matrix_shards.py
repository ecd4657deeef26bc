"""A GPU matrix's shards as its jobs leave them (results, comment and shard record, in the folder
download-artifact makes), and the report job run on them against the loopback GitHub."""

import io
import json
import zipfile

from fakegithub import actions_env, event_payload, run_speedstats
from speedstats import results as results_model
from speedstats.github import shards
from speedstats.render import render_speed_stats
from speedstats.suite import load_suite
from speedstats.verdict import judge

REPO = "o/r"
PR = 7
TOKEN = "ghs_MatrixT0kenNeverToBePrinted0000000007"
SHA1, SHA2, SHA3, SHA4 = "1" * 40, "2" * 40, "3" * 40, "4" * 40
RUN = 9100
GPUS = ["a100", "v100", "t4"]
SMOKE = load_suite(profile="smoke")


def results_json(gpu_name, error=None, cancelled=False):
    oneflow = {"error": error} if error else {"total_s": 0.5, "per_iter_s": 0.1, "times": 5}
    return json.dumps({
        "schema": "speedstats/results/v1", "suite": "smoke", "device": "cuda", "gpu_name": gpu_name,
        "cancelled": cancelled,
        "cases": [{"id": "resnet50-bs2", "kind": "resnet50", "batch_size": 2, "times": 5,
                   "input_shape": [2, 3, 64, 64],
                   "frameworks": {"oneflow": oneflow,
                                  "pytorch": {"total_s": 0.25, "per_iter_s": 0.05, "times": 5}}}],
    })


def render(text, suite):
    results = results_model.loads(text)
    return render_speed_stats(results, suite, judge(results, suite))


def block(gpu_name, **kwargs):
    return render(results_json(gpu_name, **kwargs), SMOKE)


def make_shard(root, gpu, sha=SHA1, run_id=RUN, attempt=1, status="success", body=None, pr=PR, **results):
    """A shard folder as the matrix job leaves it and download-artifact puts it under root."""
    out = root / f"out-{gpu}-{attempt}"
    out.mkdir(parents=True)
    if results.get("results", True):
        results.pop("results", None)
        name = results.pop("gpu_name", f"NVIDIA {gpu.upper()}")
        (out / "results.json").write_text(results_json(name, **results), encoding="utf-8")
        (out / "comment.md").write_text(body or block(name, **results), encoding="utf-8")
    folder = root / "speedstats-shards" / shards.artifact_name(gpu, attempt)
    shards.write_shard(folder, gpu, status, out, (pr, sha, run_id, REPO), attempt)
    return folder


def report(gh, tmp_path, *extra, sha=SHA1, run_id=RUN, attempt=1, gpus=GPUS, subprocess_=False):
    env = actions_env(gh, TOKEN, REPO, tmp_path, event=event_payload("pull_request", REPO, PR, sha),
                      GITHUB_RUN_ID=run_id, GITHUB_RUN_ATTEMPT=attempt, GITHUB_SHA=sha,
                      GITHUB_OUTPUT=tmp_path / "output")
    argv = ["report", "--gpus", json.dumps(gpus), "--shards", tmp_path / "speedstats-shards", *extra]
    return run_speedstats(argv, env, subprocess_=subprocess_)


def shard_zip(folder):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.iterdir()):
            archive.write(path, path.name)
    return buf.getvalue()


def fork_report(gh, tmp_path, run_id=RUN):
    env = actions_env(gh, TOKEN, REPO, tmp_path, event_name="workflow_run",
                      event=event_payload("workflow_run", REPO, run_id=run_id, head_sha=SHA1),
                      GITHUB_RUN_ID=1)
    return run_speedstats(["report", "--gpus", json.dumps(["a100", "v100"]), "--from-run"], env)


# -- the default suite on many GPUs: the largest comment a matrix makes -----------------------------


HEAD_ROUNDS = [0.0301, 0.0312, 0.0333, 0.0321, 0.0305, 0.0309, 0.0318, 0.0311, 0.0307, 0.0316]
BASE_ROUNDS = [0.0251, 0.0262, 0.0255, 0.0271, 0.0258, 0.0263, 0.0257, 0.0266, 0.0259, 0.0261]
TORCH_ROUNDS = [0.0180, 0.0181, 0.0179, 0.0180, 0.0182, 0.0190, 0.0184, 0.0183, 0.0178, 0.0181]


def default_suite_results(gpu_name):
    """results.json of the default suite measured head against base, every case slower than its base:
    the largest comment a GPU makes (the block, the head-vs-base table, the confirmations, the builds)."""
    from speedstats.analysis.paired import judge_paired
    from speedstats.results import CaseResult, FrameworkResult, Results

    def fw(rounds, times):
        per_iter = sorted(rounds)[len(rounds) // 2]
        return FrameworkResult(total_s=per_iter * times, per_iter_s=per_iter, times=times,
                               rounds_s=list(rounds), round_iterations=times // len(rounds))

    cases = []
    for spec in load_suite(profile="default").cases:
        record = CaseResult(id=spec.id, kind=spec.kind, batch_size=spec.batch_size, times=spec.times,
                            input_shape=spec.input_shape if spec.kind == "resnet50" else None,
                            num_workers=spec.num_workers, ddp=spec.ddp, world_size=spec.world_size)
        record.frameworks = {"oneflow": fw(HEAD_ROUNDS, spec.times),
                             "oneflow_base": fw(BASE_ROUNDS, spec.times),
                             "pytorch": fw(TORCH_ROUNDS, spec.times)}
        record.paired = judge_paired(HEAD_ROUNDS, BASE_ROUNDS)
        record.confirmation = {"flags": [f"{spec.id}: OneFlow +20.0% against the base build"],
                               "status": "confirmed"}
        cases.append(record)
    builds = {role: {"role": role, "family": family, "source": "installed",
                     "packages": {package: {"version": "0.9.0", "git_commit": "381b12c0ffee"}}}
              for role, family, package in (("oneflow", "oneflow", "oneflow"),
                                            ("pytorch", "pytorch", "torch"),
                                            ("oneflow_base", "oneflow", "oneflow"))}
    return json.dumps(Results(suite="default", device="cuda", gpu_name=gpu_name, cases=cases,
                              builds=builds).to_dict())


def default_suite_shards(root, gpus, sha=SHA1, run_id=RUN):
    for gpu in gpus:
        out = root / f"out-{gpu}"
        out.mkdir(parents=True)
        text = default_suite_results(f"NVIDIA {gpu.upper()} with a long product name")
        (out / "results.json").write_text(text, encoding="utf-8")
        body = render(text, load_suite(profile="default"))
        (out / "comment.md").write_text(body, encoding="utf-8")
        shards.write_shard(root / "speedstats-shards" / shards.artifact_name(gpu, 1), gpu, "failure", out,
                           (PR, sha, run_id, REPO), 1)
