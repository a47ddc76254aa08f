"""tools/ncu_sass_summary.py: sums samples, stalls and executed
instructions of a small source page as ncu prints it, lists the
instructions asked for, and fails with a clear message on a CSV that is
not one."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "..", "..", "tools", "ncu_sass_summary.py")

PAGE = '''"Kernel Name","matmul",
"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed","stall_wait","stall_barrier","stall_barrier (Not Issued)"
"0x7f0000000100","  LOP3.LUT R9, R159, 0x3fc00, RZ, 0xc0, !PT","30","1000","25","0","0"
"0x7f0000000110","  R2UR UR16, R10","10","1000","8","0","0"
"0x7f0000000120","  HGMMA.64x128x16.F32.BF16 R24, gdesc[UR16].tnspB, R24","50","250","5","40","40"
"0x7f0000000130","@!P0  BRA 0x7f0000000100","0","1000","0","0","0"
'''


def run(*args):
    return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True)


def main():
    fails = 0
    with tempfile.TemporaryDirectory() as tmp:
        page = os.path.join(tmp, "page.csv")
        with open(page, "w", encoding="utf-8") as f:
            f.write(PAGE)
        r = run(page, "--share", "0.2")
        out = r.stdout
        checks = [
            (r.returncode == 0, f"exit {r.returncode}: {r.stderr}"),
            ("instructions 4, warp samples 90, executed 3250" in out, "totals"),
            ("stalls: wait 38, barrier 40" in out or "stalls: barrier 40, wait 38" in out,
             "stalls summed, the Not Issued columns left out"),
            ("samples by opcode: HGMMA 50, LOP3 30, R2UR 10, BRA 0" in out, "samples by opcode"),
            ("executed by opcode: LOP3 1000, R2UR 1000, BRA 1000, HGMMA 250" in out,
             "executed by opcode (predicates stripped)"),
            ("0x00000      30        1000  LOP3.LUT" in out, "an instruction over the share"),
            ("0x00020      50         250  HGMMA" in out and "barrier 40, wait 5" in out,
             "the key instruction with its stalls"),
            ("R2UR UR16" not in out, "an instruction under the share and not a key one"),
        ]
        for ok, what in checks:
            if not ok:
                print(f"FAIL: {what}\n{out}")
                fails += 1
        bad = os.path.join(tmp, "bad.csv")
        with open(bad, "w", encoding="utf-8") as f:
            f.write("a,b\n1,2\n")
        r = run(bad)
        if r.returncode != 1 or "SourceCounters" not in r.stderr:
            print(f"FAIL: a CSV without the page's header: exit {r.returncode}, {r.stderr}")
            fails += 1
        r = run(os.path.join(tmp, "missing.csv"))
        if r.returncode != 1 or "No such file" not in r.stderr:
            print(f"FAIL: a missing file: exit {r.returncode}, {r.stderr}")
            fails += 1
    print("ok" if fails == 0 else f"{fails} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
