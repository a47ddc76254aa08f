#!/bin/sh
# No jitk binary may depend on libcuda.so.1: the driver is dlopen'ed, so
# everything starts on a machine without one. Usage: no_libcuda.sh FILE...
status=0
for f in "$@"; do
  if readelf -d "$f" | grep -q 'NEEDED.*libcuda\.so'; then
    echo "FAIL: $f depends on libcuda: $(readelf -d "$f" | grep NEEDED | tr -s ' ')"
    status=1
  fi
done
[ $status -eq 0 ] && echo "none of $# binaries depends on libcuda"
exit $status
