"""Timing helpers the peer scripts share (not a peer itself: the run script
skips files whose names start with an underscore)."""
import statistics
import time

import torch


def timed(fn, reps=20, warm=3, batch=1):
    """Median of `reps` CUDA-event timings of `batch` calls of fn() back to
    back, in ms per call, after `warm` runs."""
    for _ in range(warm):
        for _ in range(batch):
            fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(batch):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / batch)
    return statistics.median(times)


def per_launch(fn, sync, rounds=1000):
    """Host time per call of fn(), in us: the median over `rounds` rounds of
    100 calls, the queue drained between rounds."""
    for _ in range(2000):
        fn()
    sync()
    ts = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(100):
            fn()
        ts.append((time.perf_counter() - t0) / 100 * 1e6)
        sync()
    return statistics.median(ts)
