#!/usr/bin/env bash
# The GPU side of speedstats on a machine with an NVIDIA GPU, Python 3.12 and a CUDA build of torch,
# without OneFlow and without a package index (nothing is installed):
#
#   scripts/gpu-check.sh            (PYTHON=python3.12 to pick the interpreter; OUT=DIR to keep the output)
#
# 1. prints the machine's state as the run records it (bench.machine_state): driver and the CUDA
#    version it supports, each GPU's clocks, clocks-event reasons, temperature, power, PCIe link,
#    MIG and ECC, the compute processes on it, and the driver and architecture checks against the
#    installed torch (and against the pinned torch's architecture list);
# 2. runs the PyTorch side of the ResNet50 cases on CUDA through `speedstats run --only pytorch`:
#    single GPU, and DDP over 2 GPUs when there are two or more, and prints the comment and the state
#    recorded around each round;
# 3. runs one profiled round of PyTorch's worker on CUDA and prints its ops' own device time
#    (bench.opprofile, as the profiled rounds of a slower head record them; OneFlow's side needs
#    OneFlow, which has no wheel for this Python).
# Needs torch (a CUDA build), torchvision, timm, jinja2, pyyaml and nvidia-ml-py; without a GPU it
# stops with one line saying so. Exits with the run's status (7: the machine was disturbed).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
OUT=${OUT:-$(mktemp -d -t speedstats-gpu-check.XXXXXX)}
mkdir -p "$OUT"

"$PYTHON" - <<'PY'
import importlib.util
import sys

missing = [m for m in ("torch", "torchvision", "timm", "jinja2", "yaml", "pynvml")
           if importlib.util.find_spec(m) is None]
if missing:
    sys.exit(f"gpu-check: {', '.join(missing)} not installed for {sys.executable}; "
             "this script installs nothing")
import torch

if not torch.cuda.is_available():
    sys.exit(f"gpu-check: no CUDA GPU for torch {torch.__version__} (CUDA {torch.version.cuda}): "
             "this script needs a machine with an NVIDIA GPU and its driver")
print(f"gpu-check: python {sys.version.split()[0]}, torch {torch.__version__} (CUDA {torch.version.cuda}), "
      f"{torch.cuda.device_count()} GPU(s)")
PY

echo "== the machine, as the run records it"
"$PYTHON" - <<'PY'
import json
import time

import torch

from speedstats.bench import driver_check
from speedstats.bench.machine_state import MachineWatch
from speedstats.machine import DisturbanceSpec

watch = MachineWatch("cuda")
info = watch.run_info()
torch_build = {"family": "pytorch",
               "packages": {"torch": {"version": torch.__version__, "cuda": torch.version.cuda,
                                      "cuda_archs": torch._C._cuda_getArchFlags().split()}}}
info["torch_arch_list"] = torch.cuda.get_arch_list()
try:
    info["driver_check"] = driver_check.check_driver({"pytorch": torch_build}, info["driver"]) or "ok"
except Exception as exc:  # a UserError: the line the run would fail with
    info["driver_check"] = str(exc)
try:
    driver_check.check_architectures({"pytorch": torch_build}, info["gpus"])
    info["architecture_check"] = "ok"
except Exception as exc:
    info["architecture_check"] = str(exc)
# The image's torch (the first of PYTORCH_ARCH_BUILDS) against this GPU, as the action would meet it.
requirement, _, archs = driver_check.PYTORCH_ARCH_BUILDS[0]
pinned = {"family": "pytorch", "packages": {"torch": {"version": requirement, "cuda_archs": list(archs)}}}
try:
    driver_check.check_architectures({"pytorch": pinned}, info["gpus"])
    info["architecture_check_pinned_torch"] = "ok"
except Exception as exc:
    info["architecture_check_pinned_torch"] = str(exc)
begin = watch.begin([])
time.sleep(1.0)
info["one_second_idle"] = watch.end(begin)
info["quiet_check"] = watch.quiet_check(DisturbanceSpec()) or "quiet"
watch.close()
print(json.dumps(info, indent=2))
PY

GPUS=$("$PYTHON" -c "import torch; print(torch.cuda.device_count())")
{
  echo "name: gpu-check"
  echo "warmup: 5"
  echo "timeout_s: 600"
  echo "cases:"
  echo "  - {id: resnet50-bs16, kind: resnet50, batch_size: 16, image_size: 224, times: 50, rounds: 3}"
  echo "  - {id: resnet50-bs2, kind: resnet50, batch_size: 2, image_size: 224, times: 100, rounds: 3}"
  if [ "$GPUS" -ge 2 ]; then
    echo "  - {id: resnet50-ddp-bs16, kind: resnet50, ddp: true, world_size: 2, batch_size: 16, times: 50,"
    echo "     rounds: 3, env: {OMP_NUM_THREADS: '1'}}"
  fi
} > "$OUT/suite.yml"
[ "$GPUS" -ge 2 ] || echo "gpu-check: one GPU: no DDP case"

echo "== speedstats run --only pytorch --device cuda (output in $OUT)"
status=0
SPEEDSTATS_LOCK_DIR="$OUT/locks" "$PYTHON" -m speedstats run --suite "$OUT/suite.yml" --device cuda \
  --only pytorch --out "$OUT/out" --cache-dir "$OUT/cache" || status=$?

echo "== the state recorded around each round"
"$PYTHON" - "$OUT/out/results.json" <<'PY'
import json
import sys

results = json.load(open(sys.argv[1], encoding="utf-8"))
print(json.dumps({"driver": (results.get("machine") or {}).get("driver"),
                  "preflight": (results.get("machine") or {}).get("preflight")}))
for case in results["cases"]:
    for role, fw in case["frameworks"].items():
        for k, state in enumerate(fw.get("round_states") or []):
            keys = ("index", "sm_clock_mhz", "sm_clock_max_mhz", "clock_events", "temperature_c", "power_w",
                    "power_limit_w", "foreign_processes")
            gpus = [{key: gpu.get(key) for key in keys} for gpu in state.get("gpus") or []]
            print(f"{case['id']} {role} round {k + 1}: {fw['rounds_s'][k] * 1000:.2f}ms, other cores "
                  f"{state['cpu'].get('other_cores')}, gpus {json.dumps(gpus)}")
        if fw.get("remeasured"):
            print(f"{case['id']} {role}: {len(fw['remeasured'])} disturbed rounds measured again")
    if case.get("disturbance"):
        print(f"{case['id']}: DISTURBED: {case['disturbance']['text']}")
PY
echo "== PyTorch's ops in a profiled round on CUDA (bench.opprofile)"
"$PYTHON" - "$OUT/ops" <<'PY' || status=$?
import json
import subprocess
import sys
from pathlib import Path

from speedstats.bench.environment import subprocess_env
from speedstats.bench.workerspec import SPEC_FILE, WorkerSpec

control = Path(sys.argv[1])
control.mkdir(parents=True)
spec = WorkerSpec(framework="pytorch", device="cuda", batch_size=16, image_size=224, times=10, warmup=5,
                  rounds=2, timeout_s=300)  # op_profile left to its default: on CUDA
(control / SPEC_FILE).write_text(spec.to_json())
(control / "profile-0").write_text("")
(control / "stop").write_text("")
subprocess.run([sys.executable, "-m", "speedstats.bench.worker", "--control", str(control)],
               env=subprocess_env("pytorch"), check=True, timeout=600)
report = json.loads((control / "round-0.json").read_text())
profile, steps = report["profile"], report["profile"]["steps"]
own = profile.get("op_self_s") or {}
print(f"ops on {profile.get('op_device')}: {len(own)} with device time, "
      f"{sum(own.values()) * 1000 / steps:.2f}ms per step of a {report['total_s'] * 1000 / steps:.2f}ms step")
for op, seconds in sorted(own.items(), key=lambda item: -item[1])[:10]:
    print(f"  {op}: {seconds * 1000 / steps:.3f}ms per step")
if not own:
    sys.exit(f"gpu-check: no op with device time: {profile.get('op_reason')}")
PY
echo "gpu-check: exit status $status"
exit "$status"
