#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs what it needs (.venv), then runs pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh
exec .venv/bin/python -m pytest "$@"
