#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs what it needs (.venv), then runs pytest.
# --fast: the tests that need neither OneFlow nor PyTorch, nor a venv or pip install of their own, nor a
# linter, and each race once (the tiers are pytest markers, pyproject.toml), in .venv-light: the light
# dependencies only (scripts/bootstrap.sh --light), on four processes (pytest-xdist): on two cores the
# third and fourth keep them busy while the others wait on a subprocess, a loopback server or a deadline.
set -euo pipefail
cd "$(dirname "$0")/.."
# Keep bytecode (and pytest's rewritten test modules) between runs: without it every xdist process
# compiles and rewrites every module again, a quarter of the fast tier's time on two cores.
unset PYTHONDONTWRITEBYTECODE
if [ "${1:-}" = --fast ]; then
  shift
  ./scripts/bootstrap.sh --light
  exec .venv-light/bin/python -m pytest -n 4 -m "not heavy and not frameworks and not venv and not lint and not repeat" "$@"
fi
./scripts/bootstrap.sh
exec .venv/bin/python -m pytest "$@"
