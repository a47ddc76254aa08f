#!/bin/sh
# Checks that every C source and header in git is formatted as .clang-format
# says, with clang-format 18.1.8 (another version formats some lines
# differently). Installs that version from PyPI into a venv of its own under
# the build folder unless CLANG_FORMAT names a binary of that version.
#
#   tools/check-format.sh          check; lists the files that differ
#   tools/check-format.sh --fix    reformat them in place
set -eu
cd "$(dirname "$0")/.."
VERSION=18.1.8
CF=${CLANG_FORMAT:-}
if [ -z "$CF" ]; then
  VENV=${BUILD_DIR:-build}/format-venv
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check "clang-format==$VERSION"
  CF=$VENV/bin/clang-format
fi
case "$("$CF" --version)" in
  *"version $VERSION"*) ;;
  *) echo "check-format: $CF is not clang-format $VERSION: $("$CF" --version)" >&2; exit 2 ;;
esac
FILES=$(git ls-files '*.c' '*.h')
if [ "${1:-}" = --fix ]; then
  # shellcheck disable=SC2086
  "$CF" -i $FILES
  exit 0
fi
bad=""
for f in $FILES; do
  "$CF" --dry-run --Werror "$f" >/dev/null 2>&1 || bad="$bad $f"
done
if [ -n "$bad" ]; then
  echo "check-format: not formatted (tools/check-format.sh --fix):" >&2
  for f in $bad; do echo "  $f" >&2; done
  exit 1
fi
echo "check-format: $(echo "$FILES" | wc -l) files formatted"
