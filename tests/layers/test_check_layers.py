"""tools/check_layers.py: the tree as it is passes, and a checked floor
that reaches up, a stale exception, or a driver call through the table
outside src/driver, fails with the offending line."""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
TOOL = os.path.join(ROOT, "tools", "check_layers.py")
FLOORS = ("base", "array", "expr", "codegen", "driver", "nvrtc", "cache", "launch", "kernels")


def run(root):
    return subprocess.run([sys.executable, TOOL, root], capture_output=True, text=True)


def copy_floors(dest):
    shutil.copytree(os.path.join(ROOT, "src"), os.path.join(dest, "src"))


def append(path, text):
    """Appends text to a file and returns the number of its first line."""
    with open(path, encoding="utf-8") as f:
        first = f.read().count("\n") + 1
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)
    return first


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def driver_calls(failures):
    """Calls through the driver's table: caught, with their lines, outside
    src/driver (the engine and a header included), accepted inside it and
    in comments and strings."""
    with tempfile.TemporaryDirectory() as tmp:
        copy_floors(tmp)
        src = os.path.join(tmp, "src")
        kernel = append(os.path.join(src, "kernels", "kernel.c"),
                        "static CUresult sync(jitk_engine *e) {\n"
                        "  return e->drv.cuCtxSynchronize();\n}\n")
        launch = append(os.path.join(src, "launch", "launch.c"),
                        "static void go(const jk_driver *d, CUfunction f) {\n"
                        "  d->cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);\n}\n")
        engine = append(os.path.join(src, "engine.c"),
                        "static bool ex(jitk_engine *e) { return e->drv.cuLaunchKernelEx; }\n")
        header = append(os.path.join(src, "launch", "launch.h"),
                        "#define JK_SYNC(e) ((e)->drv.cuCtxSynchronize())\n")
        # A name the table lacks, reached through drv, is caught too.
        unlisted = append(os.path.join(src, "cache", "cache.c"),
                          "static void f(jk_driver *drv) { drv->cuFutureCall(); }\n")
        # Comments and strings may name calls; src/driver may make them.
        append(os.path.join(src, "kernels", "elementwise.c"),
               "/* e->drv.cuModuleGetGlobal(&p, &n, m, name) is what it wraps. */\n"
               "// d->cuLinkCreate(0, NULL, NULL, &state)\n"
               'static const char *what = "e->drv.cuModuleUnload(m)";\n')
        append(os.path.join(src, "driver", "context.c"),
               "static CUresult sync(jitk_engine *e) { return e->drv.cuCtxSynchronize(); }\n")
        r = run(tmp)
        if r.returncode != 1:
            failures.append(f"driver calls outside src/driver passed: {r.returncode}")
        for want in (f"src/kernels/kernel.c:{kernel + 1}: reaches the driver's cuCtxSynchronize",
                     f"src/launch/launch.c:{launch + 1}: reaches the driver's cuLaunchKernel",
                     f"src/engine.c:{engine}: reaches the driver's cuLaunchKernelEx",
                     f"src/launch/launch.h:{header}: reaches the driver's cuCtxSynchronize",
                     f"src/cache/cache.c:{unlisted}: reaches the driver's cuFutureCall"):
            if want not in r.stderr:
                failures.append(f"missing {want!r} in:\n{r.stderr}")
        for unwanted in ("src/driver/", "src/kernels/elementwise.c"):
            if unwanted in r.stderr:
                failures.append(f"{unwanted!r} reported in:\n{r.stderr}")
    # A tree of empty floors whose only driver calls are in src/driver
    # passes, whatever the real tree holds at the moment. tensor.c is there
    # with the include its exception lists.
    with tempfile.TemporaryDirectory() as tmp:
        for floor in FLOORS:
            os.makedirs(os.path.join(tmp, "src", floor))
        write(os.path.join(tmp, "src", "array", "tensor.c"), '#include "engine.h"\n')
        write(os.path.join(tmp, "src", "driver", "driver.h"),
              "#define JK_DRIVER_FUNCS(X)           \\\n"
              "  X(cuCtxSynchronize, 12000, true) \\\n"
              "  X(cuLaunchKernel, 12000, true)\n"
              "static inline CUresult jk_cu_sync(const jk_driver *d) {\n"
              "  return d->cuCtxSynchronize();\n}\n")
        write(os.path.join(tmp, "src", "driver", "launch.c"),
              "CUresult go(jitk_engine *e) { return e->drv.cuLaunchKernel(0); }\n")
        write(os.path.join(tmp, "src", "launch", "launch.c"),
              '#include "driver/driver.h"\n'
              "CUresult sync(jitk_engine *e) { return jk_cu_sync(&e->drv); }\n")
        r = run(tmp)
        if r.returncode != 0:
            failures.append(f"calls inside src/driver failed: {r.returncode} {r.stderr}")
        # Without the table there is nothing to check against: a failure.
        os.remove(os.path.join(tmp, "src", "driver", "driver.h"))
        r = run(tmp)
        if r.returncode != 1 or "no JK_DRIVER_FUNCS table" not in r.stderr:
            failures.append(f"a missing driver table passed: {r.returncode} {r.stderr}")


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
    driver_calls(failures)
    for f in failures:
        print(f, file=sys.stderr)
    print("test_check_layers:", "FAILED" if failures else "passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
