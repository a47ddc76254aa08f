"""PyTorch beside `jitk-bench small`: torch.add(x, y, out=z) and
torch.sum(x, dim=0, out=s) on 2^10 to 2^18 float32 elements, each measured the
three ways jitk-bench small measures jitk:

    host                   rounds of 100 calls timed on the host, the queue
                           drained between rounds, the median per call;
    GPU, one launch        CUDA events around one call, the median of 200;
    GPU, 100 back to back  CUDA events around 100 calls, per call, the
                           median of 50.

Inputs are fresh random values; outputs are poisoned (NaN) first and checked
against a float64 reference. The row names are jitk-bench small's, with
"torch" in front.

    python3 tools/bench/peers/small.py
"""
import sys


def main():
    import torch

    from _timing import per_launch, timed

    if not torch.cuda.is_available():
        print("PyTorch not measured: no CUDA device")
        return 0

    gen = torch.Generator(device="cuda")
    gen.manual_seed(20261201)
    wrong = 0
    for lg in range(10, 19, 2):
        n = 1 << lg
        x = torch.rand(n, device="cuda", generator=gen) - 0.5
        y = torch.rand(n, device="cuda", generator=gen) - 0.5
        z = torch.full((n,), float("nan"), device="cuda")
        s = torch.full((), float("nan"), device="cuda")
        cases = [("z = x + y", lambda: torch.add(x, y, out=z), z,
                  (x.double() + y.double())),
                 ("sum(x)", lambda: torch.sum(x, dim=0, out=s), s, x.double().sum())]
        for what, fn, out, ref in cases:
            fn()
            torch.cuda.synchronize()
            tol = 2.4e-7 * ref.abs() if out is z else 1.2e-7 * lg * x.double().abs().sum()
            if not bool(((out.double() - ref).abs() <= tol + 1e-30).all()):
                wrong += 1
            rows = [("host", per_launch(fn, torch.cuda.synchronize, rounds=400)),
                    ("GPU, one launch", timed(fn, reps=200, warm=20) * 1e3),
                    ("GPU, 100 back to back", timed(fn, reps=50, warm=2, batch=100) * 1e3)]
            for kind, us in rows:
                name = "torch %s, 2^%d float32: %s" % (what, lg, kind)
                print("%-56s %10.3f  us/launch" % (name, us))
    if wrong:
        print("peer small: %d WRONG RESULTS" % wrong)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
