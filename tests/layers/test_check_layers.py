"""tools/check_layers.py: the tree as it is passes, and a checked floor
that reaches up, or a stale exception, fails with the offending line."""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
TOOL = os.path.join(ROOT, "tools", "check_layers.py")


def run(root):
    return subprocess.run([sys.executable, TOOL, root], capture_output=True, text=True)


def copy_floors(dest):
    shutil.copytree(os.path.join(ROOT, "src"), os.path.join(dest, "src"))


def main():
    failures = []
    r = run(ROOT)
    if r.returncode != 0:
        failures.append(f"the tree fails:\n{r.stderr}")
    with tempfile.TemporaryDirectory() as tmp:
        copy_floors(tmp)
        # The ground floor reaching the cache, and codegen the driver.
        with open(os.path.join(tmp, "src", "base", "log.c"), "a", encoding="utf-8") as f:
            f.write('#include "cache/cache.h"\n')
        with open(os.path.join(tmp, "src", "codegen", "common.c"), "a", encoding="utf-8") as f:
            f.write('#include "driver/driver.h"\n')
        # The launch floor reaching the kernels it serves, and a new folder.
        with open(os.path.join(tmp, "src", "launch", "launch.c"), "a", encoding="utf-8") as f:
            f.write('#include "kernels/kernels.h"\n')
        os.mkdir(os.path.join(tmp, "src", "graph"))
        r = run(tmp)
        if r.returncode != 1:
            failures.append(f"reaching up passed: {r.returncode}")
        for want in ('src/base/log.c:', '"cache/cache.h", above the base floor',
                     'src/codegen/common.c:', '"driver/driver.h", above the codegen floor',
                     'src/launch/launch.c:', '"kernels/kernels.h", above the launch floor',
                     'src/graph: a floor check_layers does not know'):
            if want not in r.stderr:
                failures.append(f"missing {want!r} in:\n{r.stderr}")
    with tempfile.TemporaryDirectory() as tmp:
        copy_floors(tmp)
        # tensor.c no longer reaching the engine: its exception is stale.
        path = os.path.join(tmp, "src", "array", "tensor.c")
        with open(path, encoding="utf-8") as f:
            text = f.read().replace('#include "engine.h"\n', "")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        r = run(tmp)
        if r.returncode != 1 or "no longer does" not in r.stderr:
            failures.append(f"a stale exception passed: {r.returncode} {r.stderr}")
    for f in failures:
        print(f, file=sys.stderr)
    print("test_check_layers:", "FAILED" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
