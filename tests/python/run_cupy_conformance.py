#!/usr/bin/env python3
"""Runs CuPy's tests of its user-kernel classes (tests/python/cupy_tests/) with
jitk's classes in place of CuPy's, and says which passed.

Usage, on a machine with a GPU, CuPy, pytest and jitk installed:

    tests/python/run_cupy_conformance.py                 # all four files
    tests/python/run_cupy_conformance.py raw -k "not jitify"
    tests/python/run_cupy_conformance.py userkernel reduction --applicable-only
    tests/python/run_cupy_conformance.py --list raw      # the tests, not run
    tests/python/run_cupy_conformance.py --update-doc docs/CONFORMANCE.md \\
        --results DIR                                    # results into the doc

FILE is elementwise, userkernel, reduction or raw (default: all, in that
order, quickest first). Each file runs in a pytest process of its own, so one
can be run alone and its time is reported alone. Arguments after `--` go to
pytest as they are.

Every test is bounded in time (--timeout, default 300 s): one that runs over
fails with "over the per-test limit"; one stuck where Python cannot interrupt
it (inside a kernel or a driver call) has its stacks printed and its process
ended, is recorded as timed out, and pytest starts again after it. A crash
of the process is handled the same way. Nothing beyond pytest and the
standard library is needed (no pytest-timeout, no pytest-xdist).

Writes to --out (default: $OUT when set, else /tmp/jitk-cupy-conformance):
junit-FILE.xml (JUnit XML per pytest process; -2, -3 ... after restarts),
FILE.log (pytest's output), FILE.jsonl (one line per test, written as it
ends, so it survives a crash), FILE.jsonl.stacks (the stacks of a test that
was stuck), results.tsv (every test: outcome, seconds,
whether it applies, first line of its failure) and summary.md (the
per-test-function table of docs/CONFORMANCE.md with results, the failures
of applicable tests and the slowest tests). It prints a summary and exits 1
when an applicable test failed, errored, timed out or crashed, else 0.

How long: under CuPy itself test_raw.py takes over five minutes (nvcc
compiles, Jitify, pickling subprocesses); the other three take about a
minute together, most of it test_reduction.py's large arrays and NumPy
references. The slowest tests are listed at the end of each run, so the
slow parts are plain to see and can be left out with -k.
"""

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CUPY_DIR = os.path.join(HERE, "cupy_tests")
FILES = ("elementwise", "userkernel", "reduction", "raw")

sys.path.insert(0, CUPY_DIR)
import applicability  # noqa: E402

# Outcomes that count against jitk when the test applies.
BAD = ("failed", "error", "timeout", "crashed")
TIMEOUT_TEXT = "over the per-test limit"


def parse_args(argv):
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    else:
        extra = []
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="*", metavar="FILE",
                   help="elementwise, userkernel, reduction, raw")
    p.add_argument("-k", dest="keyword", help="pytest -k expression")
    p.add_argument("--timeout", type=float, default=300.0,
                   help="seconds per test (setup, call, teardown each)")
    p.add_argument("--out", default=os.environ.get("OUT") or
                   "/tmp/jitk-cupy-conformance")
    p.add_argument("--applicable-only", action="store_true",
                   help="leave out the tests that do not apply to jitk")
    p.add_argument("--max-restarts", type=int, default=25,
                   help="pytest restarts per file after crashes/time-outs")
    p.add_argument("--list", action="store_true",
                   help="list the tests with their applicability; run none")
    p.add_argument("--doc", action="store_true",
                   help="print the table of docs/CONFORMANCE.md")
    p.add_argument("--update-doc", metavar="MD",
                   help="replace the table in MD (between its markers)")
    p.add_argument("--results", metavar="DIR",
                   help="with --doc/--update-doc: results.tsv of a run")
    args = p.parse_args(argv)
    for f in args.files:
        if f not in FILES:
            p.error(f"unknown file {f!r}: choose from {', '.join(FILES)}")
    args.files = args.files or list(FILES)
    args.extra = extra
    return args


# ---- the environment -----------------------------------------------------

def prepare_env(args):
    """The variables CuPy and the conftest need, and the checks that would
    otherwise fail late and obscurely."""
    env = dict(os.environ)
    # test_raw.py runs nvcc while it is imported (its skip conditions ask
    # nvcc's version) and builds cubins with it; CuPy finds nvcc on PATH or
    # under CUDA_PATH, and its headers under CUDA_PATH.
    if not shutil.which("nvcc", path=env.get("PATH")):
        for root in (env.get("CUDA_PATH"), env.get("CUDA_HOME"),
                     "/usr/local/cuda"):
            if root and os.path.exists(os.path.join(root, "bin", "nvcc")):
                env["PATH"] = os.path.join(root, "bin") + os.pathsep + \
                    env.get("PATH", "")
                break
    nvcc = shutil.which("nvcc", path=env.get("PATH"))
    if nvcc and "CUDA_PATH" not in env:
        env["CUDA_PATH"] = os.path.dirname(os.path.dirname(
            os.path.realpath(nvcc)))
    if not nvcc:
        print("warning: no nvcc found: test_raw.py will not even be "
              "collected (it asks nvcc's version on import)")
    probe = subprocess.run(
        [sys.executable, "-c",
         "import jitk, cupy, pytest; print(jitk.__version__, cupy.__version__,"
         " pytest.__version__, jitk.device_count())"],
        env=env, capture_output=True, text=True)
    if probe.returncode != 0:
        sys.exit("cannot import jitk, cupy and pytest:\n" + probe.stderr)
    jv, cv, pv, ndev = probe.stdout.split()
    print(f"jitk {jv}, CuPy {cv}, pytest {pv}, {ndev} GPU(s), "
          f"nvcc {nvcc or 'none'}")
    env.setdefault("CUPY_TEST_GPU_LIMIT", ndev)
    env["JITK_CUPY_TIMEOUT"] = str(args.timeout)
    if args.applicable_only:
        env["JITK_CUPY_ONLY_APPLICABLE"] = "1"
    # Our own kernel cache for the run, private as jitk requires, so that
    # the first compile of every kernel is measured in the run's times.
    env.setdefault("JITK_CACHE_DIR", os.path.join(args.out, "jitk-cache"))
    os.makedirs(env["JITK_CACHE_DIR"], mode=0o700, exist_ok=True)
    os.chmod(env["JITK_CACHE_DIR"], 0o700)
    return env


def pytest_cmd(path, args, extra):
    cmd = [sys.executable, "-m", "pytest", path,
           "-c", os.path.join(CUPY_DIR, "pytest.ini"),
           "--rootdir", CUPY_DIR, "--confcutdir", CUPY_DIR,
           "-q", "-rfE", "--durations=10"]
    if args.keyword:
        cmd += ["-k", args.keyword]
    return cmd + extra


# ---- running one file ----------------------------------------------------

def read_log(path):
    started, results = [], {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue  # a line cut short by the crash
                if rec["event"] == "start":
                    started.append(rec["nodeid"])
                else:
                    results[rec["nodeid"]] = rec
    return started, results


def run_file(name, args, env):
    path = os.path.join(CUPY_DIR, f"test_{name}.py")
    log = os.path.join(args.out, f"{name}.jsonl")
    done_file = os.path.join(args.out, f"{name}.done")
    out_file = os.path.join(args.out, f"{name}.log")
    stacks = log + ".stacks"
    for f in (log, done_file, out_file, stacks):
        if os.path.exists(f):
            os.remove(f)
    env = dict(env, JITK_CUPY_LOG=log, JITK_CUPY_DESELECT=done_file)
    start = time.time()
    note = ""
    stacks_seen = 0
    for attempt in range(1, args.max_restarts + 2):
        junit = os.path.join(
            args.out, f"junit-{name}" + (f"-{attempt}" if attempt > 1
                                         else "") + ".xml")
        cmd = pytest_cmd(path, args, args.extra) + ["--junitxml", junit]
        with open(out_file, "a") as out:
            out.write(f"\n=== attempt {attempt}: {' '.join(cmd)}\n")
            out.flush()
            rc = subprocess.run(cmd, cwd=CUPY_DIR, env=env, stdout=out,
                                stderr=subprocess.STDOUT).returncode
        started, results = read_log(log)
        lost = [n for n in started if n not in results]
        if not lost:
            if rc not in (0, 1, 5):
                note = f"pytest exited {rc} (see {out_file})"
            break
        # The conftest's faulthandler writes the stacks there only when a
        # test outlived its limit; a crash leaves it as it was.
        size = os.path.getsize(stacks) if os.path.exists(stacks) else 0
        timed_out = size > stacks_seen
        stacks_seen = size
        with open(log, "a") as f:
            for n in lost:
                f.write(json.dumps({
                    "event": "result", "nodeid": n,
                    "outcome": "timeout" if timed_out else "crashed",
                    "s": args.timeout if timed_out else 0.0,
                    "message": f"the pytest process ended (exit {rc}) "
                               "during this test"}) + "\n")
        with open(done_file, "w") as f:
            f.writelines(n + "\n" for n in list(results) + lost)
        print(f"  {name}: {lost[-1]} {'timed out' if timed_out else 'crashed'}"
              f" (exit {rc}); restarting after it")
    else:
        note = f"gave up after {args.max_restarts} restarts"
    _, results = read_log(log)
    return results, time.time() - start, note


# ---- results -------------------------------------------------------------

def outcome_of(rec):
    if rec["outcome"] == "failed" and TIMEOUT_TEXT in rec.get("message", ""):
        return "timeout"
    return rec["outcome"]


def write_results(path, results):
    with open(path, "w") as f:
        f.write("nodeid\toutcome\tseconds\tapplies\tmessage\n")
        for n, rec in results.items():
            verdict = applicability.classify(n)[0] or "unknown"
            msg = rec.get("message", "").replace("\t", " ").replace("\n", " ")
            f.write(f"{n}\t{outcome_of(rec)}\t{rec['s']:.2f}\t{verdict}\t"
                    f"{msg}\n")


def read_results(directory):
    results = {}
    with open(os.path.join(directory, "results.tsv")) as f:
        next(f)
        for line in f:
            n, outcome, secs, _, msg = line.rstrip("\n").split("\t", 4)
            results[n] = {"outcome": outcome, "s": float(secs),
                          "message": msg}
    return results


def count_text(counter):
    order = ("passed", "failed", "error", "timeout", "crashed", "skipped")
    return ", ".join(f"{counter[o]} {o}" for o in order if counter[o]) or \
        "not run"


def doc_table(results=None):
    """The markdown table of docs/CONFORMANCE.md: one row per test function;
    with results, the outcomes of its items grouped as its verdicts and
    their reasons are (two variants may share a verdict)."""
    grouped = collections.defaultdict(collections.Counter)
    if results:
        for n, rec in results.items():
            e = applicability.entry_of(n)
            if e is not None:
                grouped[(e, *applicability.classify(n))][outcome_of(rec)] += 1
    rows = ["| File | Test | Items | Applies | What it checks, or why not "
            "| Result |", "| --- | --- | ---: | --- | --- | --- |"]
    for e in applicability.ENTRIES:
        test = f"{e.cls}::{e.func}" if e.cls else e.func
        applies, why, result = [], [], []
        for verdict, n, reason in applicability.verdict_counts(e):
            applies.append(f"{verdict} ({n})" if len(e.variants) else verdict)
            why.append(reason)
            if results is None:
                result.append("not run yet")
            else:
                result.append(count_text(grouped[(e, verdict, reason)]))
        rows.append(f"| {e.file.removeprefix('test_').removesuffix('.py')} "
                    f"| `{test}` | {e.count} | {'<br>'.join(applies)} | "
                    f"{'<br>'.join(why)} | {'<br>'.join(result)} |")
    return "\n".join(rows) + "\n"


def doc_summary(results=None):
    per = collections.Counter()
    outcomes = collections.defaultdict(collections.Counter)
    for e in applicability.ENTRIES:
        for verdict, n, _ in applicability.verdict_counts(e):
            per[verdict] += n
    if results:
        for n, rec in results.items():
            outcomes[applicability.classify(n)[0]][outcome_of(rec)] += 1
    total = sum(per.values())
    lines = [f"{total} pytest items in {len(applicability.ENTRIES)} test "
             "functions:", ""]
    for verdict in (applicability.YES, applicability.TWO_GPUS,
                    applicability.SELF_SKIP, applicability.NO):
        line = f"- **{verdict}**: {per[verdict]}"
        if results:
            line += f" ({count_text(outcomes[verdict])})"
        lines.append(line)
    return "\n".join(lines) + "\n"


BEGIN, END = "<!-- conformance table: begin -->", \
    "<!-- conformance table: end -->"


def update_doc(path, results):
    with open(path) as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        sys.exit(f"{path} has no {BEGIN} ... {END} markers")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    body = "\n" + doc_summary(results) + "\n" + doc_table(results)
    with open(path, "w") as f:
        f.write(head + BEGIN + body + END + tail)


def summarize(all_results, times, notes, out):
    lines = []
    totals = collections.Counter()
    for name in times:
        res = all_results.get(name, {})
        c = collections.Counter(outcome_of(r) for r in res.values())
        totals.update(c)
        extra = f"; {notes[name]}" if notes.get(name) else ""
        lines.append(f"test_{name}.py: {count_text(c)} in "
                     f"{times[name]:.0f} s{extra}")
    merged = {n: r for res in all_results.values() for n, r in res.items()}
    app = collections.Counter()
    bad = []
    for n, rec in merged.items():
        verdict = applicability.classify(n)[0]
        if applicability.applies(verdict):
            app[outcome_of(rec)] += 1
            if outcome_of(rec) in BAD:
                bad.append((n, outcome_of(rec), rec.get("message", "")))
    lines.append(f"applicable to jitk: {count_text(app)}")
    if bad:
        lines.append("applicable tests that did not pass:")
        lines += [f"  {o:8} {n}: {m[:160]}" for n, o, m in bad[:40]]
        if len(bad) > 40:
            lines.append(f"  ... {len(bad) - 40} more in results.tsv")
    slow = sorted(merged.items(), key=lambda kv: -kv[1]["s"])[:10]
    lines.append("slowest tests:")
    lines += [f"  {r['s']:7.1f} s  {n}" for n, r in slow]
    text = "\n".join(lines)
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("# CuPy's tests with jitk\n\n```\n" + text + "\n```\n\n" +
                doc_summary(merged) + "\n" + doc_table(merged))
    print(text)
    print(f"{totals['passed']} passed, "
          f"{sum(totals[o] for o in BAD)} failed, "
          f"{totals['skipped']} skipped")
    return 1 if bad else 0


def main(argv):
    args = parse_args(argv)
    if args.doc or args.update_doc:
        results = read_results(args.results) if args.results else None
        if args.update_doc:
            update_doc(args.update_doc, results)
        else:
            print(doc_summary(results) + "\n" + doc_table(results), end="")
        return 0
    os.makedirs(args.out, exist_ok=True)
    env = prepare_env(args)
    if args.list:
        for name in args.files:
            out = subprocess.run(
                pytest_cmd(os.path.join(CUPY_DIR, f"test_{name}.py"), args,
                           args.extra) + ["--collect-only"],
                cwd=CUPY_DIR, env=env, capture_output=True, text=True).stdout
            for n in out.splitlines():
                if "::" in n:
                    print(f"{applicability.classify(n)[0] or '?':24} {n}")
        return 0
    all_results, times, notes = {}, {}, {}
    for name in args.files:
        print(f"test_{name}.py ...", flush=True)
        all_results[name], times[name], notes[name] = run_file(name, args,
                                                                env)
    write_results(os.path.join(args.out, "results.tsv"),
                  {n: r for res in all_results.values()
                   for n, r in res.items()})
    print(f"results in {args.out}")
    return summarize(all_results, times, notes, args.out)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
