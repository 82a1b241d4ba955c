#!/usr/bin/env python3
"""PyTorch's side of bench workload S1 (issue 37): saving and loading a 100 MiB state dict of
25 Float32 tensors of 1024 x 1024 with safetensors.torch, from and to the page cache; one JSON
line like the Rust bench's. Run it interleaved with `bench --json S1`:

    ~/torch-venv/bin/python scripts/bench_torch_state_dict.py

`load_ms` is `model.load_state_dict(load_file(path))`, the same work as the Rust load (into
existing parameters); `load_file_ms` is `load_file` alone (fresh tensors, no copy into a model).
The load runs in a child process so its peak RSS is its own. safetensors.torch does not fsync a
saved file; the Rust save does (save_ms there includes it)."""
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import torch
from safetensors.torch import load_file, save_file

N, SIDE = 25, 1024


class Stack(torch.nn.Module):
    def __init__(self, fill):
        super().__init__()
        self.layers = torch.nn.ModuleList()
        for i in range(N):
            m = torch.nn.Module()
            m.weight = torch.nn.Parameter(torch.full((SIDE, SIDE), fill + i))
            self.layers.append(m)


def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024


def median_ms(f, runs=5):
    f()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def child(path):
    model = Stack(0.0)
    before = rss_mib()
    with torch.no_grad():
        load_ms = median_ms(lambda: model.load_state_dict(load_file(path)))
    load_file_ms = median_ms(lambda: load_file(path))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"load_ms": round(load_ms, 2), "load_file_ms": round(load_file_ms, 2),
                      "rss_before_load_mib": round(before, 1), "peak_rss_mib": round(peak, 1)}))


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2])
        return
    torch.set_num_threads(int(os.environ.get("RAYON_NUM_THREADS", torch.get_num_threads())))
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "state.safetensors")
        model = Stack(0.5)
        save_ms = median_ms(lambda: save_file(model.state_dict(), path))
        size = os.path.getsize(path)
        out = subprocess.run([sys.executable, __file__, "--child", path], check=True,
                             capture_output=True, text=True).stdout
        loaded = json.loads(out)
    gbps = lambda ms: size / (ms / 1e3) / 1e9
    print(json.dumps({"workload": "S1", "impl": "torch", "file_mib": round(size / 2**20, 1),
                      "save_ms": round(save_ms, 2), "save_gbps": round(gbps(save_ms), 3),
                      "load_gbps": round(gbps(loaded["load_ms"]), 3),
                      "load_file_gbps": round(gbps(loaded["load_file_ms"]), 3), **loaded}))


if __name__ == "__main__":
    main()
