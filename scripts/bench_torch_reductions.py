#!/usr/bin/env python3
"""PyTorch's side of bench workload R1 (issue 38): `logsumexp`, `cumsum` and `topk` (k = 10)
along the last axis of a [1024, 1024] Float32 tensor, forward alone and forward plus
`torch.autograd.grad` with a cotangent of ones, median milliseconds of 50 runs after a warm-up;
one JSON line like the Rust bench's. Run it interleaved with `bench --json R1`:

    ~/torch-venv/bin/python scripts/bench_torch_reductions.py [--quick]
"""
import json
import statistics
import sys
import time

import torch


def median_ms(f, runs):
    f()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def both(x, op, runs):
    forward = median_ms(lambda: op(x), runs)
    ones = torch.ones_like(op(x))

    def step():
        torch.autograd.grad(op(x), x, ones)

    return forward, median_ms(step, runs)


def main():
    quick = "--quick" in sys.argv
    n, runs = (128, 5) if quick else (1024, 50)
    torch.manual_seed(0)
    x = (torch.rand(n, n) * 8 - 4).requires_grad_(True)
    out = {"workload": "R1", "threads": torch.get_num_threads(), "runs": runs, "n": n}
    ops = {
        "logsumexp": lambda t: torch.logsumexp(t, -1),
        "cumsum": lambda t: torch.cumsum(t, -1),
        "topk": lambda t: torch.topk(t, 10, -1).values,
    }
    for name, op in ops.items():
        f, b = both(x, op, runs)
        out[f"{name}_fwd_ms"] = round(f, 4)
        out[f"{name}_fwd_bwd_ms"] = round(b, 4)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
