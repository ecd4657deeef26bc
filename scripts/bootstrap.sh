#!/usr/bin/env bash
# Creates .venv (CPython 3.10) with everything speedstats and its tests need.
# --light: creates .venv-light instead, with the renderer's and the bot's dependencies and the test
# tools only (requirements/light.txt and test.txt: no torch, no oneflow), for ./scripts/test.sh --fast.
# Safe to rerun: a finished environment is detected by its stamp and left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  "") light=false; default_venv=.venv ;;
  --light) light=true; default_venv=.venv-light ;;
  *) echo "bootstrap: unknown option ${1} (usage: scripts/bootstrap.sh [--light])" >&2; exit 2 ;;
esac
VENV=${SPEEDSTATS_VENV:-$default_venv}
SETUPTOOLS_VERSION=84.2.1
STAMP="$VENV/.speedstats-installed"
want=$(cat requirements/*.txt constraints.txt scripts/bootstrap.sh | sha256sum | cut -d' ' -f1)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  exit 0
fi

find_python310() {
  for candidate in python3.10 "$(pyenv root 2>/dev/null)/versions/3.10"*/bin/python3.10; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 10)' 2>/dev/null; then
      command -v "$candidate"; return 0
    fi
  done
  return 1
}
PY=$(find_python310) || { echo "bootstrap: CPython 3.10 not found (oneflow 0.9.0 has wheels for 3.8-3.10 only)" >&2; exit 1; }

echo "bootstrap: installing into $VENV with $PY (the first time takes several minutes)" >&2
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
pip=("$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -c constraints.txt)
finish() {
  echo "$want" > "$STAMP"
  echo "bootstrap: $VENV ready" >&2
  exit 0
}
if $light; then
  "${pip[@]}" -r requirements/light.txt -r requirements/test.txt "setuptools==$SETUPTOOLS_VERSION"
  "${pip[@]}" --no-build-isolation --no-deps -e .
  finish
fi
# The full environment: the Dockerfile repeats these steps, in this order (tests/test_dockerfile.py).
"${pip[@]}" -r requirements/light.txt -r requirements/test.txt -r requirements/bench.txt
# flowvision 0.2.2 needs a newer oneflow (oneflow.jit._script_if_tracing); 0.2.1 ships only as an
# sdist that builds with setuptools<70 and no build isolation. Then the pinned setuptools goes back.
"${pip[@]}" "setuptools<70" wheel
"${pip[@]}" --no-build-isolation --no-deps flowvision==0.2.1
"${pip[@]}" "setuptools==$SETUPTOOLS_VERSION"
"${pip[@]}" --no-build-isolation --no-deps -e .
finish
