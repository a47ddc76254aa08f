"""Reads the cases of `jitk-bench sweep --list` and the results of the sweep
(jitk's from `jitk-bench sweep --json`, torch's from
tools/bench/peers/sweep.py --json) and says how each case compares with the
copy bandwidth and with PyTorch; optionally writes a Markdown section and
one SVG plot per family of cases. Standard library only, so it runs on any
machine that has the JSON files.

    python3 tools/sweep_report.py --cases CASES.jsonl --results R.jsonl [R.jsonl ...]
                                  [--worst N] [--markdown OUT.md] [--svg-dir DIR]

The exit status is 1 when some result counts wrong outputs (an error, not a
slow case), 2 for unreadable input, 0 otherwise.
"""

import argparse
import json
import math
import os
import re
import sys
from xml.sax.saxutils import escape, quoteattr

BIG = 2 ** 24          # cases at least this large are held to the copy bandwidth
GOAL = 0.90            # the ratio to copy a large case should reach
WHO = ("jitk", "torch")

# Colours fixed per dtype, so that a dtype looks the same on every plot.
DTYPE_COLOURS = {
    "float32": "#1f77b4", "float16": "#ff7f0e", "bfloat16": "#2ca02c",
    "int8": "#d62728", "float64": "#9467bd", "complex64": "#8c564b",
}
# A palette for families and for dtypes the table above does not name:
# distinct hues first, then their lighter variants.
PALETTE = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
    "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#aec7e8", "#ffbb78",
    "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7",
    "#dbdb8d", "#9edae5",
]


# ------------------------------------------------------------------ input

def fail(message):
    """Stops on input that cannot be read, with status 2 (1 is kept for
    wrong outputs)."""
    print(f"sweep_report: {message}", file=sys.stderr)
    raise SystemExit(2)


def read_jsonl(path):
    """The JSON objects of a file, one per non-blank line."""
    objs = []
    try:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as ex:
                    fail(f"{path}:{n}: not JSON: {ex}")
                if not isinstance(obj, dict) or "id" not in obj:
                    fail(f"{path}:{n}: not an object with an 'id'")
                objs.append(obj)
    except OSError as ex:
        fail(str(ex))
    return objs


def merge(cases, result_files):
    """Joins results to cases by id. Returns (rows, notes): rows in the
    cases' order, each {'case': case, 'jitk': result or None, 'torch': ...};
    notes are warnings to print (results without a case, repeated results,
    unknown 'who')."""
    rows = {}
    order = []
    notes = []
    for c in cases:
        if c["id"] in rows:
            notes.append(f"case {c['id']} listed twice; the later one is used")
        else:
            order.append(c["id"])
        rows[c["id"]] = {"case": c, "jitk": None, "torch": None}
    for path, results in result_files:
        for r in results:
            who = r.get("who")
            if who not in WHO:
                notes.append(f"{path}: result for {r['id']} from unknown 'who' {who!r} ignored")
                continue
            row = rows.get(r["id"])
            if row is None:
                notes.append(f"{path}: result for {r['id']} ({who}) has no case; ignored")
                continue
            if row[who] is not None:
                # A rerun of a few cases (with --only) is meant to replace
                # the earlier figures, so the file given last wins.
                notes.append(f"{path}: second {who} result for {r['id']}; this one is used")
            row[who] = r
    return [rows[i] for i in order], notes


def measured(r):
    """Whether a result has figures (it exists and was not skipped)."""
    return r is not None and "skipped" not in r and isinstance(r.get("gbs"), (int, float))


def ratio(r):
    return r.get("ratio") if measured(r) else None


def speedup(row):
    """jitk's speed over torch's on the case, or None without both."""
    j, t = row["jitk"], row["torch"]
    if measured(j) and measured(t) and t["gbs"] > 0:
        return j["gbs"] / t["gbs"]
    return None


def wrong_count(r):
    if r is None or "skipped" in r:
        return 0
    w = r.get("wrong", 0)
    return w if isinstance(w, (int, float)) else 0


def is_big(row):
    e = row["case"].get("elements")
    return isinstance(e, (int, float)) and e >= BIG


# ---------------------------------------------------------------- summaries

def same_size_counts(a):
    """'N of M elementwise, N of M reductions' at the goal against the
    same-size copy."""
    names = {"ew-": "elementwise", "red-": "reductions"}
    return ", ".join(f"{len(a['big_at_goal_same'][k])} of {len(a['big_kind'][k])} {names[k]}"
                     for k in ("ew-", "red-"))


def analyse(rows, worst_n):
    big = [r for r in rows if is_big(r) and measured(r["jitk"])]
    worst = sorted(big, key=lambda r: r["jitk"]["ratio"])[:worst_n]
    slower = [r for r in rows if speedup(r) is not None and speedup(r) < 1.0]
    slower.sort(key=speedup)
    errors = []
    for r in rows:
        for who in WHO:
            if wrong_count(r[who]) > 0:
                errors.append((r, who, r[who]["wrong"]))
    both = [r for r in rows if speedup(r) is not None]
    return {
        "cases": len(rows),
        "big": big,
        "big_at_goal": [r for r in big if r["jitk"]["ratio"] >= GOAL],
        # Against a copy of the case's own bytes (launch and ramp costs
        # included), per family kind: elementwise and reduction.
        "big_at_goal_same": {kind: [r for r in big if r["case"]["id"].startswith(kind)
                                    and isinstance(r["jitk"].get("ratio_same_size_copy"),
                                                   (int, float))
                                    and r["jitk"]["ratio_same_size_copy"] >= GOAL]
                             for kind in ("ew-", "red-")},
        "big_kind": {kind: [r for r in big if r["case"]["id"].startswith(kind)]
                     for kind in ("ew-", "red-")},
        "both": both,
        "faster": [r for r in both if speedup(r) > 1.0],
        "worst": worst,
        "slower": slower,
        "errors": errors,
        "copy": {who: median([r[who]["copy_gbs"] for r in rows if measured(r[who])
                              and isinstance(r[who].get("copy_gbs"), (int, float))])
                 for who in WHO},
    }


def median(values):
    if not values:
        return None
    v = sorted(values)
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


def fmt_ratio(r):
    if r is None:
        return "-"
    if "skipped" in r:
        return "skipped"
    value = r.get("ratio") if measured(r) else None
    if not isinstance(value, (int, float)):
        return "-"
    # Launch-bound small cases sit far below 0.01, where three decimals
    # would print every one of them as 0.000.
    return f"{value:.3f}" if value >= 0.01 else f"{value:.1e}"


def fmt_speedup(row):
    s = speedup(row)
    if s is None:
        return "-"
    return f"{s:.2f}x" if s < 100 else f"{s:.0f}x"


def fmt_elements(n):
    """2^k for a power of two, else the count with thousands separated."""
    if not isinstance(n, int) or n <= 0:
        return str(n)
    if n & (n - 1) == 0:
        return f"2^{n.bit_length() - 1}"
    return f"{n:,}"


def brief(row, width):
    """One indented line of a case for the lists after the table."""
    return (f"  {row['case']['id']:<{width}}  {fmt_ratio(row['jitk']):>7}"
            f"  torch {fmt_ratio(row['torch']):>7}  {fmt_speedup(row):>8}")


def print_report(rows, a, worst_n, out=sys.stdout):
    width = max([len(r["case"]["id"]) for r in rows] + [4])
    print(f"{'case':<{width}}  {'jitk':>7}  {'torch':>7}  {'jitk/torch':>10}", file=out)
    for r in rows:
        t = r["torch"]
        line = (f"{r['case']['id']:<{width}}  {fmt_ratio(r['jitk']):>7}  {fmt_ratio(t):>7}"
                f"  {fmt_speedup(r):>10}")
        for who in WHO:
            if r[who] is not None and "skipped" in r[who]:
                line += f"  ({who} skipped: {r[who]['skipped']})"
            if wrong_count(r[who]) > 0:
                line += f"  ({who}: {r[who]['wrong']} wrong)"
        print(line, file=out)
    print(file=out)
    for who in WHO:
        if a["copy"][who] is not None:
            print(f"copy bandwidth measured by {who}: {a['copy'][who]:.1f} GB/s"
                  " (median over results)", file=out)
    print(f"{len(a['big_at_goal'])} of {len(a['big'])} jitk cases of 2^24 elements or more reach "
          f"{GOAL:.2f} of copy; jitk is faster than PyTorch on {len(a['faster'])} of the "
          f"{len(a['both'])} cases both ran", file=out)
    print(f"against the copy of their own bytes: {same_size_counts(a)}", file=out)
    print(file=out)
    print(f"worst {worst_n} jitk cases of 2^24 elements or more, by ratio to copy:", file=out)
    if not a["worst"]:
        print("  (none)", file=out)
    for r in a["worst"]:
        print(brief(r, width), file=out)
    print(file=out)
    print("cases where jitk is slower than PyTorch:", file=out)
    if not a["slower"]:
        print("  (none)", file=out)
    for r in a["slower"]:
        print(brief(r, width), file=out)
    print(file=out)
    if a["errors"]:
        print("ERRORS: outputs outside their tolerance:", file=out)
        for r, who, n in a["errors"]:
            print(f"  {r['case']['id']}: {who}: {n} wrong", file=out)
    else:
        print("no wrong outputs", file=out)


def markdown(rows, a, worst_n):
    """The Markdown section: a summary line and two tables."""
    def table(selected):
        lines = ["| case | elements | jitk | jitk, same-size copy | PyTorch | jitk/PyTorch |",
                 "| --- | ---: | ---: | ---: | ---: | ---: |"]
        for r in selected:
            torch = r["torch"]
            tcell = fmt_ratio(torch)
            if torch is not None and "skipped" in torch:
                tcell = "skipped: " + torch["skipped"].replace("|", "\\|")
            same = (r["jitk"] or {}).get("ratio_same_size_copy")
            scell = f"{same:.3f}" if isinstance(same, (int, float)) else "-"
            lines.append(f"| `{r['case']['id']}` | {fmt_elements(r['case'].get('elements'))} | "
                         f"{fmt_ratio(r['jitk'])} | {scell} | {tcell} | {fmt_speedup(r)} |")
        return lines

    copies = [f"{who} {a['copy'][who]:.1f} GB/s" for who in WHO if a["copy"][who] is not None]
    md = ["## `jitk-bench sweep`: elementwise and reduction layouts", ""]
    summary = (f"{a['cases']} cases. Of the {len(a['big'])} jitk cases of 2^24 elements or "
               f"more, {len(a['big_at_goal'])} reach {GOAL:.2f} of the copy bandwidth "
               f"(against the copy of their own bytes: {same_size_counts(a)}); jitk is "
               f"faster than PyTorch on {len(a['faster'])} of the {len(a['both'])} cases both "
               "ran.")
    if copies:
        summary += f" Copy bandwidth (1 GiB, bytes read + written): {', '.join(copies)}."
    md.append(summary)
    md.append("")
    md.append("Figures are ratios to the copy bandwidth measured in the same process (a copy "
              "of 1 GiB); \"same-size copy\" is the ratio to a copy that moves the case's own "
              "bytes, which launch and ramp costs hold below the 1 GiB copy for the smaller "
              "cases; jitk/PyTorch is jitk's speed over PyTorch's.")
    md.append("")
    md.append(f"### The {worst_n} slowest jitk cases of 2^24 elements or more")
    md.append("")
    md.extend(table(a["worst"]) if a["worst"] else ["(none)"])
    md.append("")
    md.append("### Cases where PyTorch is faster")
    md.append("")
    md.extend(table(a["slower"]) if a["slower"] else ["(none)"])
    md.append("")
    if a["errors"]:
        md.append("### Errors: outputs outside their tolerance")
        md.append("")
        for r, who, n in a["errors"]:
            md.append(f"- `{r['case']['id']}`: {who}, {n} wrong")
        md.append("")
    return "\n".join(md)


# ---------------------------------------------------------------------- SVG

W, H = 680, 400
LEFT, RIGHT, TOP, BOTTOM = 60, 500, 40, 340     # the plot area
Y_MAX = 1.2


def tag(name, text=None, **attrs):
    """One SVG element as text. Attribute names are written with '-' for
    '_' (stroke_width -> stroke-width); values are quoted and escaped, and
    floats rounded to a tenth of a pixel to keep the file short."""
    parts = [name]
    for key, value in attrs.items():
        if isinstance(value, float):
            value = f"{value:.1f}"
        parts.append(f"{key.replace('_', '-')}={quoteattr(str(value))}")
    head = " ".join(parts)
    if text is None:
        return f"<{head}/>"
    return f"<{head}>{text}</{name}>"


class Plot:
    """A scatter plot of ratio to copy against log2 of the elements, written
    by hand as SVG text."""

    def __init__(self, title, x_values):
        self.title = title
        lo = math.floor(min(x_values)) if x_values else 0
        hi = math.ceil(max(x_values)) if x_values else 1
        if hi == lo:
            # One size only (a family of layouts of one array): it stands
            # in the middle of a range two steps wide.
            lo, hi = lo - 1, hi + 1
        # Half a step of margin each side keeps the points at the smallest
        # and largest sizes off the frame.
        self.x0, self.x1 = lo - 0.5, hi + 0.5
        self.body = []
        self.legend = []

    def px(self, x):
        return LEFT + (x - self.x0) / (self.x1 - self.x0) * (RIGHT - LEFT)

    def py(self, y):
        # A ratio above the axis's top is drawn on its edge rather than off
        # the plot; its tooltip still says the real figure.
        y = max(0.0, min(Y_MAX, y))
        return BOTTOM - y / Y_MAX * (BOTTOM - TOP)

    def hline(self, y, **style):
        return tag("line", x1=LEFT, y1=self.py(y), x2=RIGHT, y2=self.py(y), **style)

    def axes(self):
        out = [tag("rect", x=LEFT, y=TOP, width=RIGHT - LEFT, height=BOTTOM - TOP,
                   fill="none", stroke="#444")]
        for i in range(0, 13, 2):
            y = i / 10
            out.append(self.hline(y, stroke="#e4e4e4"))
            out.append(tag("text", f"{y:.1f}", x=LEFT - 6, y=self.py(y) + 4, text_anchor="end"))
        first, last = math.ceil(self.x0), math.floor(self.x1)
        step = 1 if last - first <= 12 else 2
        for x in range(first, last + 1, step):
            xx = self.px(x)
            out.append(tag("line", x1=xx, y1=TOP, x2=xx, y2=BOTTOM, stroke="#e4e4e4"))
            out.append(tag("text", str(x), x=xx, y=BOTTOM + 16, text_anchor="middle"))
        # The goal (dashed) and the copy bandwidth itself.
        out.append(self.hline(GOAL, stroke="#555", stroke_dasharray="6,4"))
        out.append(self.hline(1.0, stroke="#222"))
        out.append(tag("text", f"{GOAL:.1f}", x=LEFT + 4, y=self.py(GOAL) + 14, fill="#555"))
        out.append(tag("text", "log2(elements)", x=(LEFT + RIGHT) / 2, y=BOTTOM + 40,
                       text_anchor="middle"))
        out.append(tag("text", "ratio to copy bandwidth", text_anchor="middle",
                       transform=f"translate(18,{(TOP + BOTTOM) / 2}) rotate(-90)"))
        out.append(tag("text", escape(self.title), x=W / 2, y=22, text_anchor="middle",
                       font_size=15, font_weight="bold"))
        return out

    def point(self, x, y, colour, shape, tip):
        xx, yy = self.px(x), self.py(y)
        tip = f"<title>{escape(tip)}</title>"
        if shape == "square":
            self.body.append(tag("rect", tip, x=xx - 4, y=yy - 4, width=8, height=8,
                                 fill="none", stroke=colour, stroke_width=1.6))
        else:
            self.body.append(tag("circle", tip, cx=xx, cy=yy, r=4, fill=colour,
                                 fill_opacity=0.85))

    def legend_entry(self, label, colour, shape):
        self.legend.append((label, colour, shape))

    def svg(self):
        out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
               f'viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">',
               tag("rect", width=W, height=H, fill="white")]
        out.extend(self.axes())
        out.extend(self.body)
        # Many series share the legend's column by drawing it tighter.
        step = min(18, (H - TOP - 12) / max(1, len(self.legend)))
        y = TOP + 6.0
        for label, colour, shape in self.legend:
            if shape == "square":
                out.append(tag("rect", x=RIGHT + 16, y=y - 4, width=8, height=8, fill="none",
                               stroke=colour, stroke_width=1.6))
            elif shape == "circle":
                out.append(tag("circle", cx=RIGHT + 20, cy=y, r=4, fill=colour))
            else:
                out.append(tag("rect", x=RIGHT + 14, y=y - 5, width=12, height=10, fill=colour))
            out.append(tag("text", escape(label), x=RIGHT + 32, y=y + 4))
            y += step
        out.append("</svg>")
        return "\n".join(out) + "\n"


def colour_for(name, fixed, seen):
    """A stable colour for a series: the fixed table's, else the palette's
    next one not yet used on this plot."""
    if name in fixed:
        return fixed[name]
    used = set(seen.values())
    for c in PALETTE:
        if c not in used:
            seen[name] = c
            return c
    seen[name] = PALETTE[len(seen) % len(PALETTE)]
    return seen[name]


def safe_name(family):
    return re.sub(r"[^A-Za-z0-9._-]", "_", str(family))


def tip(row, who):
    r = row[who]
    c = row["case"]
    return (f"{c['id']} ({who}): {r['ratio']:.3f} of copy, {r['gbs']:.1f} GB/s, "
            f"{fmt_elements(c.get('elements'))} elements")


def x_of(case):
    x = case.get("size_log2")
    if isinstance(x, (int, float)):
        return float(x)
    e = case.get("elements")
    return math.log2(e) if isinstance(e, (int, float)) and e > 0 else None


def family_plot(family, rows):
    pts = [r for r in rows if x_of(r["case"]) is not None
           and any(measured(r[w]) for w in WHO)]
    plot = Plot(f"{family}: ratio to copy bandwidth", [x_of(r["case"]) for r in pts])
    seen = {}
    dtypes = []
    for r in pts:
        dt = r["case"].get("dtype", "?")
        if dt not in dtypes:
            dtypes.append(dt)
    colours = {dt: colour_for(dt, DTYPE_COLOURS, seen) for dt in dtypes}
    # Torch's hollow squares first, so that jitk's filled circles stay on top.
    has_torch = False
    for who, shape in (("torch", "square"), ("jitk", "circle")):
        for r in pts:
            if measured(r[who]):
                has_torch |= who == "torch"
                plot.point(x_of(r["case"]), r[who]["ratio"], colours[r["case"].get("dtype", "?")],
                           shape, tip(r, who))
    plot.legend_entry("jitk", "#333", "circle")
    if has_torch:
        plot.legend_entry("PyTorch", "#333", "square")
    for dt in dtypes:
        plot.legend_entry(dt, colours[dt], "swatch")
    return plot.svg()


def overview_plot(rows):
    pts = [r for r in rows if x_of(r["case"]) is not None and measured(r["jitk"])]
    plot = Plot("every case: jitk's ratio to copy bandwidth", [x_of(r["case"]) for r in pts])
    seen = {}
    families = []
    for r in pts:
        f = r["case"].get("family", "?")
        if f not in families:
            families.append(f)
    colours = {f: colour_for(f, {}, seen) for f in families}
    for r in pts:
        plot.point(x_of(r["case"]), r["jitk"]["ratio"], colours[r["case"].get("family", "?")],
                   "circle", tip(r, "jitk"))
    for f in families:
        plot.legend_entry(f, colours[f], "swatch")
    return plot.svg()


def write_svgs(rows, directory):
    os.makedirs(directory, exist_ok=True)
    families = {}
    for r in rows:
        families.setdefault(r["case"].get("family", "unknown"), []).append(r)
    written = []
    for family, members in families.items():
        path = os.path.join(directory, f"sweep-{safe_name(family)}.svg")
        with open(path, "w", encoding="utf-8") as f:
            f.write(family_plot(family, members))
        written.append(path)
    path = os.path.join(directory, "sweep-all.svg")
    with open(path, "w", encoding="utf-8") as f:
        f.write(overview_plot(rows))
    written.append(path)
    return written


# --------------------------------------------------------------------- main

def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Report on a `jitk-bench sweep` run and its PyTorch peer.")
    ap.add_argument("--cases", required=True, help="the output of `jitk-bench sweep --list`")
    ap.add_argument("--results", required=True, nargs="+",
                    help="result files (jitk's and torch's, in any number; a later file's result "
                         "replaces an earlier one's for the same case and side)")
    ap.add_argument("--worst", type=int, default=10,
                    help="how many of the slowest large cases to list (default 10)")
    ap.add_argument("--markdown", help="write a Markdown section to this file")
    ap.add_argument("--svg-dir",
                    help="write sweep-<family>.svg and sweep-all.svg into this folder")
    args = ap.parse_args(argv)
    if args.worst < 0:
        ap.error("--worst must be >= 0")

    cases = read_jsonl(args.cases)
    rows, notes = merge(cases, [(p, read_jsonl(p)) for p in args.results])
    for n in notes:
        print("note:", n, file=sys.stderr)
    a = analyse(rows, args.worst)
    print_report(rows, a, args.worst)
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(markdown(rows, a, args.worst))
        print(f"wrote {args.markdown}")
    if args.svg_dir:
        for path in write_svgs(rows, args.svg_dir):
            print(f"wrote {path}")
    return 1 if a["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
