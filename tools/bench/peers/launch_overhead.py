"""Host time per launch of an empty kernel through CuPy's RawKernel and a
PyTorch no-op-sized op, measured the way jitk-bench measures its own: rounds
of 100 launches, the stream drained between rounds (untimed), median per
launch. Printed beside jitk-bench's figures by tools/gpu-run.sh."""
import statistics
import time

ROUNDS, PER_ROUND = 1000, 100


def per_launch(launch, sync):
    for _ in range(2000):
        launch()
    sync()
    times = []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        for _ in range(PER_ROUND):
            launch()
        t1 = time.perf_counter()
        sync()
        times.append((t1 - t0) / PER_ROUND * 1e6)
    return statistics.median(times)


def main():
    rows = []
    try:
        import cupy

        empty = cupy.RawKernel('extern "C" __global__ void empty() {}', "empty")
        four = cupy.RawKernel(
            'extern "C" __global__ void four(float a, const float *x, float *y, long long n)'
            " { if (n < 0) y[0] = a * x[0]; }", "four")
        x = cupy.ones(64, dtype=cupy.float32)
        y = cupy.ones(64, dtype=cupy.float32)
        sync = cupy.cuda.Device().synchronize
        rows.append(("CuPy RawKernel, empty kernel",
                     per_launch(lambda: empty((1,), (1,), ()), sync)))
        rows.append(("CuPy RawKernel, 4 arguments",
                     per_launch(lambda: four((1,), (1,), (cupy.float32(2.0), x, y, cupy.int64(1))), sync)))
    except Exception as ex:  # the peer is optional; say why it is missing
        print("CuPy not measured:", ex)
    try:
        import torch

        t = torch.ones(1, device="cuda")
        rows.append(("PyTorch add_ on 1 element", per_launch(lambda: t.add_(1.0), torch.cuda.synchronize)))
    except Exception as ex:
        print("PyTorch not measured:", ex)
    for name, us in rows:
        print("%-44s %12.3f  us/launch" % (name, us))


if __name__ == "__main__":
    main()
