#!/usr/bin/env python3
"""Checks that the lower floors of src/ include nothing from above them.

Each folder of src/ below lists the folders (and top-level headers) its
files may include with quotes; system headers and the public header
<jitk/jitk.h> are always allowed. Every folder of src/ must be listed; the
engine (src/engine.c, src/engine.h) sits above them all.

    tools/check_layers.py [ROOT]     ROOT: the repository (default: ..)

Exits 1 and names every offending line when a floor reaches up.
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


def target_of(path):
    """The floor (or top-level header) an included path belongs to."""
    return path.split("/")[0] if "/" in path else path


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
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    problems = check(root)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        print(f"check_layers: {len(problems)} problem(s)", file=sys.stderr)
        return 1
    print("check_layers: every checked floor includes only from below")
    return 0


if __name__ == "__main__":
    sys.exit(main())
