#!/bin/sh
# One abi3 wheel serves every CPython from 3.10 on: installs WHEEL into a
# fresh venv of each of python3.10 to python3.14 found (on PATH or under
# pyenv), and runs
# abi3_smoke.py there (with the stand-in driver when JITK_TEST_FAKECUDA
# names it). Versions not installed are listed and skipped; exit 77 when
# none is found.
#
#   tests/python/abi3_check.sh WHEEL
set -eu
[ $# -eq 1 ] || { echo "usage: $0 WHEEL" >&2; exit 2; }
wheel=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
here=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cp "$here/abi3_smoke.py" "$scratch/"
JITK_CACHE_DIR=$scratch/cache
export JITK_CACHE_DIR
ran=0
missing=""
for v in 3.10 3.11 3.12 3.13 3.14; do
  # On PATH, or installed by pyenv (whose shims refuse versions not chosen).
  py=""
  for c in "$(command -v "python$v" 2>/dev/null || true)" \
           "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$v".*/bin/"python$v"; do
    if [ -x "$c" ] && "$c" -c 'import venv' 2>/dev/null; then py=$c; break; fi
  done
  if [ -z "$py" ]; then
    missing="$missing $v"
    continue
  fi
  "$py" -m venv "$scratch/venv$v"
  "$scratch/venv$v/bin/python" -m pip install -q --disable-pip-version-check --no-deps "$wheel"
  if [ -n "${JITK_TEST_FAKECUDA:-}" ]; then
    (cd "$scratch" && LD_LIBRARY_PATH=$(dirname "$JITK_TEST_FAKECUDA") \
      "$scratch/venv$v/bin/python" abi3_smoke.py)
  else
    (cd "$scratch" && "$scratch/venv$v/bin/python" abi3_smoke.py)
  fi
  ran=$((ran + 1))
done
[ -n "$missing" ] && echo "not installed here, skipped: Python$missing"
[ "$ran" -gt 0 ] || { echo "skipped: no python3.10 or newer found"; exit 77; }
