#!/bin/sh
# Checks that jitk's wheel works on a machine with no CUDA toolkit, taking
# NVRTC, the CUDA headers, CCCL, nvJitLink and the device runtime from
# NVIDIA's wheels (pip install 'jitk[cuda]'), as a user with the driver and
# pip alone installs it.
#
#   tests/python/wheels_only.sh WHEEL
#
# WHEEL is jitk's wheel (pip wheel . --no-deps -w DIR). The script makes a
# venv in a scratch folder, installs the wheel with its `cuda` extra from
# the package index, and runs wheels_only_check.py in a mount namespace
# where every /usr/local/cuda* folder is an empty tmpfs, with CUDA_HOME,
# CUDA_PATH and LD_LIBRARY_PATH unset. It needs root (or the right to
# unshare a mount namespace) and network access to the package index; where
# either is missing it says so and exits 77, which is a skip, not a pass.
set -eu
[ $# -eq 1 ] || { echo "usage: $0 WHEEL" >&2; exit 2; }
wheel=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
[ -f "$wheel" ] || { echo "no wheel at $wheel" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir "$scratch/probe"
if ! unshare -m mount -t tmpfs none "$scratch/probe" 2>/dev/null; then
  echo "skipped: cannot mount in a new mount namespace here (needs root)"
  exit 77
fi
python3 -m venv "$scratch/venv"
if ! "$scratch/venv/bin/python" -m pip install -q --disable-pip-version-check \
    "$wheel[cuda]" 2>"$scratch/pip.err"; then
  if grep -q -i -E "connection|resolve|network|unreachable" "$scratch/pip.err"; then
    echo "skipped: the package index cannot be reached"
    exit 77
  fi
  cat "$scratch/pip.err" >&2
  exit 1
fi
"$scratch/venv/bin/python" -m pip list --disable-pip-version-check 2>/dev/null | grep -i -E "^(jitk|nvidia)"

# The toolkit's folders are hidden behind empty file systems; the check
# runs from the scratch folder so that the repository's python/ is not
# imported instead of the installed package.
cp "$here/wheels_only_check.py" "$scratch/"
unshare -m sh -c '
  set -e
  for d in /usr/local/cuda*; do
    if [ -d "$d" ] && [ ! -L "$d" ]; then mount -t tmpfs none "$d"; fi
  done
  cd "$1" && exec env -u CUDA_HOME -u CUDA_PATH -u LD_LIBRARY_PATH \
    "$1/venv/bin/python" wheels_only_check.py
' sh "$scratch"
