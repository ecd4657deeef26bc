#!/usr/bin/env bash
# The main job on the CPU: the smoke suite with both frameworks, the rendered comment on stdout
# and in out/smoke/comment.md (results in out/smoke/results.json). No GitHub needed.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
exec .venv/bin/speedstats run --profile smoke --device cpu --out out/smoke "$@"
