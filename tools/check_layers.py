#!/usr/bin/env python3
"""Checks that the lower floors of src/ include nothing from above them,
and that only the driver's floor calls the CUDA driver.

Each folder of src/ below lists the folders (and top-level headers) its
files may include with quotes; system headers and the public header
<jitk/jitk.h> are always allowed. Every folder of src/ must be listed; the
engine (src/engine.c, src/engine.h) sits above them all.

The driver's entry points live in a table (JK_DRIVER_FUNCS in
src/driver/driver.h, the engine's `drv`); only src/driver reaches into it,
and every other file of src/, the engine's included, goes through the
jk_cu_* functions that src/driver/driver.h declares. That keeps what jitk
asks of the driver in one place, where a stand-in or a trace of the calls
can take it over.

    tools/check_layers.py [ROOT]     ROOT: the repository (default: ..)

Exits 1 and names every offending line when a floor reaches up or a file
outside src/driver calls the driver through its table.
"""
import os
import re
import sys

# Floor by floor, from the ground up: what each may include. The floors
# from driver up also include engine.h, the engine's struct, for their
# state in it (the driver's table and context, the cache's connection, the
# log); that is the one way up left, until each has a handle of its own.
ENGINE = "engine.h"
ALLOWED = {
    "base": {"base"},
    "array": {"base", "array"},
    "expr": {"base", "array", "expr"},
    "codegen": {"base", "array", "expr", "codegen"},
    "driver": {"base", "array", "driver", ENGINE},
    "nvrtc": {"base", "array", "expr", "nvrtc", ENGINE},
    "cache": {"base", "array", "expr", "driver", "nvrtc", "cache", ENGINE},
    "launch": {"base", "array", "expr", "driver", "launch", ENGINE},
    "kernels": {"base", "array", "expr", "codegen", "driver", "nvrtc", "cache", "launch",
                "kernels", ENGINE},
}

# Files of a checked floor that still include from above, each with its
# reason; an entry that no longer applies is reported too, so the list
# only shrinks.
EXCEPTIONS = {
    "src/array/tensor.c": {"engine.h"},  # asks the driver where a pointer lives
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')

# The floor that owns the driver's table, and the table's own list.
DRIVER_FLOOR = "src/driver/"
DRIVER_TABLE = "src/driver/driver.h"
TABLE_MACRO = re.compile(r"#\s*define\s+JK_DRIVER_FUNCS\(X\)((?:[^\n]*\\\n)*[^\n]*)")
TABLE_ENTRY = re.compile(r"\bX\(\s*(cu\w+)\s*,")
# A member reached with . or ->: a table entry when its name is one of the
# table's; any cu name reached through something called drv is one too,
# should the table's list and a file disagree.
MEMBER = re.compile(r"(?:\.|->)\s*(cu[A-Z]\w*)\b")
THROUGH_DRV = re.compile(r"\bdrv\s*(?:\.|->)\s*(cu[A-Z]\w*)\b")


def target_of(path):
    """The floor (or top-level header) an included path belongs to."""
    return path.split("/")[0] if "/" in path else path


def driver_names(root):
    """The names of the driver table's entries, or None without a table."""
    path = os.path.join(root, DRIVER_TABLE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        m = TABLE_MACRO.search(f.read())
    names = set(TABLE_ENTRY.findall(m.group(1))) if m else set()
    return names or None


def code_only(text):
    """The text with comments and string and character literals blanked,
    newlines kept, so that a comment naming a driver call is not one and
    line numbers still match."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:end]))
            i = end
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(" " * (end - i))
            i = end
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * (j - i - 2) + c if j - i >= 2 else text[i:j])
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def check_driver_calls(root):
    """Every line outside src/driver that reaches into the driver's table."""
    names = driver_names(root)
    if names is None:
        return [f"{DRIVER_TABLE}: no JK_DRIVER_FUNCS table found, so driver calls go unchecked"]
    problems = []
    src = os.path.join(root, "src")
    for folder, dirs, files in os.walk(src):
        dirs.sort()
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            rel = os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")
            if rel.startswith(DRIVER_FLOOR):
                continue
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                code = code_only(f.read())
            for number, line in enumerate(code.split("\n"), 1):
                found = {m.group(1) for m in MEMBER.finditer(line) if m.group(1) in names}
                found |= set(THROUGH_DRV.findall(line))
                for call in sorted(found):
                    problems.append(f"{rel}:{number}: reaches the driver's {call} through its "
                                    f"table; only src/driver may (use or add a jk_cu_* "
                                    f"function in driver/driver.h)")
    return problems


def check(root):
    problems = []
    used = set()
    src = os.path.join(root, "src")
    for name in sorted(os.listdir(src)) if os.path.isdir(src) else []:
        if os.path.isdir(os.path.join(src, name)) and name not in ALLOWED:
            problems.append(f"src/{name}: a floor check_layers does not know; add it to ALLOWED")
    for floor, allowed in ALLOWED.items():
        folder = os.path.join(root, "src", floor)
        if not os.path.isdir(folder):
            problems.append(f"src/{floor}: missing")
            continue
        for name in sorted(os.listdir(folder)):
            if not name.endswith((".c", ".h")):
                continue
            rel = f"src/{floor}/{name}"
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                for number, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    inc = m.group(1)
                    if target_of(inc) in allowed:
                        continue
                    if inc in EXCEPTIONS.get(rel, set()):
                        used.add((rel, inc))
                        continue
                    problems.append(f"{rel}:{number}: includes \"{inc}\", above the {floor} floor")
    for rel, incs in EXCEPTIONS.items():
        for inc in incs:
            if (rel, inc) not in used:
                problems.append(f"{rel}: listed as including \"{inc}\", which it no longer does")
    if os.path.isdir(src):
        problems += check_driver_calls(root)
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    problems = check(root)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"check_layers: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print("check_layers: every checked floor includes only from below, and only src/driver "
          "calls the driver")
    return 0


if __name__ == "__main__":
    sys.exit(main())
