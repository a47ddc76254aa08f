#!/bin/sh
# Makes v1.db, the sample of cache format 1 that tests/unit/cache opens:
# the three sources in sources/, compiled for sm_90 by the jitk CLI into a
# fresh cache. Run it from anywhere, with the CLI of a build:
#   cache/samples/make-v1.sh build/bin/jitk
# Keep the old sample when the format is unchanged: the point of it is that
# a database written by an earlier jitk still opens.
set -eu
JITK=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$HERE/sources"
export JITK_CACHE_DIR="$TMP/cache"
"$JITK" compile saxpy.cu --arch sm_90 -o "$TMP/a"
"$JITK" compile templated.cu --arch sm_90 --name-expression 'scale_by<float>' \
  --name-expression 'scale_by<double>' -o "$TMP/b"
"$JITK" compile scale.cu --arch sm_90 -o "$TMP/c"
"$JITK" cache verify
cp "$JITK_CACHE_DIR/kernels.db" "$HERE/v1.db"
echo "wrote $HERE/v1.db"
