#!/usr/bin/env python3
"""Summarizes Nsight Compute's per-instruction (SASS) source page.

Input: the CSV that ``ncu -i REPORT --page source --csv --print-source sass``
prints for one kernel profiled with ``--section SourceCounters``. Output,
on stdout: the warp samples and instructions executed in all, the stall
reasons summed over the kernel, the same two counts summed by opcode, and
the instructions that hold at least ``--share`` of the samples or whose
opcode matches ``--key`` (MMAs, barriers, TMA, shared and global memory by
default), with their addresses relative to the kernel's first instruction.

Where a kernel spends its issue slots shows up here: an instruction count
far above a peer's for the same MMAs, or stalls such as ``wait``,
``selected`` and ``dispatch`` ahead of ``barrier``, say the warps are busy
issuing rather than waiting for the tensor cores. The summary is short
enough to bring back from the GPU machine where the CSV itself is not.

Usage: ncu_sass_summary.py CSV [--share FRACTION] [--key REGEX]
"""
import argparse
import collections
import csv
import re
import signal
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"
DEFAULT_KEY = r"(HGMMA|QGMMA|IMMA|HMMA|BAR|UTMA|UBLKCP|SYNCS|DEPBAR|WARPGROUP|STS|STG|LDS|LDG|SHFL|EXIT)"


def count(value):
    """A cell's integer count; empty cells count as 0."""
    value = value.strip().replace(",", "")
    return int(float(value)) if value else 0


def opcode(source):
    """The instruction's opcode without its predicate and modifiers."""
    m = re.match(r"\s*(@!?U?P\w+\s+)?([A-Z0-9_]+)", source)
    return m.group(2) if m else "?"


def read(path):
    """The header and rows of the source page, past its kernel-name line."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = [r for r in csv.reader(f) if r]
    for i, row in enumerate(rows):
        if "Address" in row and "Source" in row and SAMPLES in row:
            return row, rows[i + 1:]
    raise ValueError(f"{path}: no header with Address, Source and '{SAMPLES}' "
                     "(was the kernel profiled with --section SourceCounters?)")


def summarize(path, share, key, out):
    header, rows = read(path)
    col = {name: i for i, name in enumerate(header)}
    stalls = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    rows = [r for r in rows if len(r) == len(header)]
    if not rows:
        raise ValueError(f"{path}: no instructions")
    base = int(rows[0][col["Address"]], 16)
    samples = [count(r[col[SAMPLES]]) for r in rows]
    executed = [count(r[col[EXECUTED]]) for r in rows]
    total = sum(samples)
    print(f"instructions {len(rows)}, warp samples {total}, executed {sum(executed)}", file=out)
    by_stall = collections.Counter()
    for r in rows:
        for s in stalls:
            by_stall[s[len("stall_"):]] += count(r[col[s]])
    print("stalls:", ", ".join(f"{k} {v}" for k, v in by_stall.most_common(12)), file=out)
    by_op_s, by_op_e = collections.Counter(), collections.Counter()
    for r, s, e in zip(rows, samples, executed):
        op = opcode(r[col["Source"]])
        by_op_s[op] += s
        by_op_e[op] += e
    print("samples by opcode:", ", ".join(f"{k} {v}" for k, v in by_op_s.most_common(20)),
          file=out)
    print("executed by opcode:", ", ".join(f"{k} {v}" for k, v in by_op_e.most_common(20)),
          file=out)
    print("address, samples, executed, instruction, largest stalls:", file=out)
    pattern = re.compile(key)
    for r, s, e in zip(rows, samples, executed):
        source = r[col["Source"]].strip()
        if s >= share * total or pattern.search(source):
            top = sorted(((count(r[col[x]]), x[len("stall_"):]) for x in stalls), reverse=True)
            why = ", ".join(f"{name} {n}" for n, name in top[:3] if n)
            print(f"{int(r[col['Address']], 16) - base:#07x} {s:7d} {e:11d}  {source[:64]:64} {why}",
                  file=out)


def main(argv):
    # Piped into head, stop quietly when the reader goes.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv")
    parser.add_argument("--share", type=float, default=0.003,
                        help="list instructions with at least this share of the samples")
    parser.add_argument("--key", default=DEFAULT_KEY,
                        help="also list instructions whose text matches this regular expression")
    args = parser.parse_args(argv)
    try:
        summarize(args.csv, args.share, args.key, sys.stdout)
    except (OSError, ValueError, KeyError) as err:
        print(f"ncu_sass_summary.py: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
