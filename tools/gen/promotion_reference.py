#!/usr/bin/env python3
"""Writes NumPy's promotion table for jitk's dtypes, the reference that
tests/unit/array/test_dtype.c compares jitk's table against.

NumPy (with ml_dtypes for bfloat16) gives every pair except those of
bfloat16 with 16-, 32- and 64-bit integers and with float16, which it
refuses. For those jitk applies NumPy's own rule, the smallest type both
convert to without loss: bfloat16's 8-bit significand holds no 16-bit
integer, so such pairs go to float32 or float64 exactly as float16's do.

    python3 tools/gen/promotion_reference.py > tests/unit/array/promotion_reference.txt
"""
import numpy as np
import ml_dtypes

NAMES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
         "uint32", "uint64", "float16", "bfloat16", "float32", "float64",
         "complex64", "complex128"]


def dtype(name):
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def result(a, b):
    try:
        return str(np.result_type(dtype(a), dtype(b)))
    except Exception:
        # Only bfloat16 pairs land here; resolve them as float16 would.
        other = b if a == "bfloat16" else a
        if other == "float16":
            return "float32"
        return str(np.result_type(np.float16, dtype(other)))


print("# NumPy %s, ml_dtypes %s: row, column, result" % (np.__version__, ml_dtypes.__version__))
for a in NAMES:
    for b in NAMES:
        print(a, b, result(a, b))
