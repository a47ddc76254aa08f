#!/usr/bin/env python3
"""Compares two builds' `jitk-bench sweep --json` runs, as tools/gpu-ab.sh
makes them: for each case, the median time of each build over its runs,
the ratio of the two, each build's median share of copy bandwidth, and
the wrong elements of all runs (which must be 0).

    tools/ab-summary.py A_GLOB B_GLOB    e.g. 'ab/new-*.jsonl' 'ab/old-*.jsonl'

Run-to-run spread is printed too (the largest time over the smallest, per
build): a difference smaller than the spread is noise.
"""
import glob
import json
import statistics
import sys


def load(pattern):
    runs = {}
    files = sorted(glob.glob(pattern))
    if not files:
        sys.exit(f"ab-summary: no file matches {pattern}")
    for name in files:
        with open(name) as f:
            for line in f:
                r = json.loads(line)
                runs.setdefault(r["id"], []).append(r)
    return runs


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    a, b = load(sys.argv[1]), load(sys.argv[2])
    print(f"{'case':50s} {'A ms':>8s} {'B ms':>8s}  A/B  A spread B spread  A of copy B of copy"
          "  wrong")
    for case, ra in a.items():
        rb = b.get(case)
        if not rb:
            continue
        ta, tb = [r["ms"] for r in ra], [r["ms"] for r in rb]
        ma, mb = statistics.median(ta), statistics.median(tb)
        wrong = sum(r["wrong"] for r in ra + rb)
        print(f"{case:50s} {ma:8.4f} {mb:8.4f} {ma / mb:5.3f}  {max(ta) / min(ta):8.3f} "
              f"{max(tb) / min(tb):8.3f}  {statistics.median(r['ratio'] for r in ra):9.3f} "
              f"{statistics.median(r['ratio'] for r in rb):9.3f}  {wrong}")


if __name__ == "__main__":
    main()
