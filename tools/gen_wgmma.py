#!/usr/bin/env python3
"""Prints the wgmma wrappers of templates/jitk/matmul_sm90.cuh: one inline
PTX statement per shape and input type, whose 64 to 128 accumulator
operands are too many to write by hand. Run it and paste its output
between the markers in that header when a shape is added.

The 8-bit wrappers take scale_d, wgmma's scale-d predicate: 0 makes the
MMA write A B over the accumulator instead of adding to it, which is how
an FP8 plan with promotion starts each K-tile's partial sum.

The tf32 wrappers named _rs take A from registers (four 32-bit values a
thread, wgmma's fragment layout), for an A that lies M-major in shared
memory, which wgmma cannot read as tf32 from a descriptor: a swapped
tf32 plan's A is the user's row-major B."""

SHAPES = (128, 256)
# The narrow tiles of swapped decode plans (D^T = B^T A^T, M the wgmma's
# N), for 16-bit and tf32 inputs.
SMALL = (8, 16, 32, 64)
TYPES = (("f16", "f16", 16), ("bf16", "bf16", 16), ("tf32", "tf32", 8))
# The 8-bit pairs (A's type, then B's) cuBLASLt runs on Hopper: not both
# e5m2. K-major A and B only, so no transpose operands, as for tf32.
FP8_TYPES = (("e4m3", "e4m3.e4m3", 32), ("e4m3_e5m2", "e4m3.e5m2", 32),
             ("e5m2_e4m3", "e5m2.e4m3", 32))


def accumulators(regs):
    """Prints the braced list of a wrapper's accumulator operands, 16 to
    a line."""
    pieces = [f"%{i}" for i in range(regs)]
    print('      "{"')
    for j in range(0, regs, 16):
        chunk = ", ".join(pieces[j:j + 16])
        sep = ", " if j + 16 < regs else ""
        print(f'      "{chunk}{sep}"')


def outputs(regs):
    """Prints the accumulators' read-write constraints, 8 to a line."""
    cons = [f'"+f"(d[{i}])' for i in range(regs)]
    print("      : " + ",\n        ".join(", ".join(cons[j:j + 8]) for j in range(0, regs, 8)))


def rs_wrapper(n):
    regs = n // 2
    print(f"__device__ __forceinline__ void wgmma_tf32_rs_n{n}(float (&d)[{regs}], "
          f"const unsigned int (&a)[4], unsigned long long b) {{")
    print('  asm volatile(\n      "{\\n.reg .pred p;\\nsetp.ne.b32 p, 1, 0;\\n"')
    print(f'      "wgmma.mma_async.sync.aligned.m64n{n}k8.f32.tf32.tf32 "')
    accumulators(regs)
    print(f'      "}}, {{%{regs}, %{regs + 1}, %{regs + 2}, %{regs + 3}}}, %{regs + 4}, p, 1, 1;\\n}}\\n"')
    outputs(regs)
    print('      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b));')
    print("}")


def wrapper(n, name, ptx, k, trans, scale_d=False):
    regs = n // 2
    tmpl = "template <int TA, int TB>\n" if trans else ""
    extra_param = ", int scale_d" if scale_d else ""
    print(f"{tmpl}__device__ __forceinline__ void wgmma_{name}_n{n}(float (&d)[{regs}], "
          f"unsigned long long a, unsigned long long b{extra_param}) {{")
    tail = f"p, 1, 1, %{regs + 2}, %{regs + 3};" if trans else "p, 1, 1;"
    pred = f"%{regs + 2}" if scale_d else "1"
    print(f'  asm volatile(\n      "{{\\n.reg .pred p;\\nsetp.ne.b32 p, {pred}, 0;\\n"')
    if "." in ptx:
        print(f'      "wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{ptx} "')
    else:
        print(f'      "wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{ptx}.{ptx} "')
    accumulators(regs)
    print(f'      "}}, %{regs}, %{regs + 1}, {tail}\\n}}\\n"')
    outputs(regs)
    extra = ', "n"(TA), "n"(TB)' if trans else ', "r"(scale_d)' if scale_d else ""
    print(f'      : "l"(a), "l"(b){extra});')
    print("}")


for n in SHAPES:
    for name, ptx, k in TYPES:
        wrapper(n, name, ptx, k, k == 16)
for n in SHAPES:
    for name, ptx, k in FP8_TYPES:
        wrapper(n, name, ptx, k, False, True)
for n in SMALL:
    for name, ptx, k in TYPES:
        wrapper(n, name, ptx, k, k == 16)
for n in SMALL + SHAPES:
    rs_wrapper(n)
