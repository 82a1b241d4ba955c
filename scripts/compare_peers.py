#!/usr/bin/env python3
"""Runs the bench command and PyTorch's side of each workload in turns (ours, theirs, ours,
theirs, ...) and reports each round's ratio and, at the end, their spread, median and the rounds
that miss the issue's target. The machines are shared and noisy: one round says little, the
median of many interleaved rounds is what to quote.

    cargo build --release -p autograd-examples --example bench
    scripts/compare_peers.py --rounds 10 --threads 1 2 W11 W6 W2g W2
    scripts/compare_peers.py --bench old=/tmp/bench-old --bench new=target/release/examples/bench W1 W5 W8

Pairs (ours -> PyTorch's, target on ours / theirs): W2 -> W2x (<= 1), W2g -> W2 (<= 0.75),
W6 -> W6 sdpa (<= 0.75), W11 -> W11 (<= 0.75), W12 -> W12 (<= 1). Any other workload runs on our
side only, which compares builds (give several `--bench`). W10 needs a bench built with
`--features mpi` and OpenMPI's `mpirun`: its rounds are 1 process, 2 processes and PyTorch's
DDP over gloo, with the speed-up (target >= 1.8) and the two-process step against DDP's (<= 1).

One thread pins both sides to core 0 (`taskset`); PyTorch's side comes from `--peers`
(default: `shared/peers` beside the repository) run by `--python` (default `~/torch-venv`).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def step_median(o):
    return o["step_ms"]["median"]


def median_ms(o):
    return o["median_ms"]


# ours -> (peer script, its arguments for t threads, its figure, target, peer's name)
PAIRS = {
    "W2": ("bench_torch.py", lambda t: ["w2x", "--threads", str(t)], step_median, 1.0, "W2x"),
    "W2g": ("bench_torch.py", lambda t: ["w2", "--threads", str(t)], step_median, 0.75, "W2"),
    "W6": ("bench_torch_w6.py", lambda t: [str(t)], median_ms, 0.75, "W6 sdpa"),
    "W11": ("bench_torch_gpt.py", lambda t: ["w11", "--threads", str(t)], median_ms, 0.75, "W11"),
    "W12": ("bench_torch_gpt.py", lambda t: ["w12", "--threads", str(t)], median_ms, 1.0, "W12"),
}
SPEEDUP_TARGET = 1.8


def run(cmd, threads, extra_env=None, pin=True, tries=1):
    """The JSON objects `cmd` prints, run on `threads` threads (one: pinned to core 0 when `pin`),
    trying `tries` times (PyTorch's gloo start-up fails now and then)."""
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    env.update(extra_env or {})
    if pin and threads == 1 and shutil.which("taskset"):
        cmd = ["taskset", "-c", "0"] + cmd
    for attempt in range(tries):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if done.returncode == 0:
            break
        if attempt + 1 == tries:
            sys.exit(f"{' '.join(cmd)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
        print(f"  ({' '.join(cmd)} failed ({done.returncode}); once more)", file=sys.stderr)
    out = []
    for line in done.stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def ours(bench, workload, threads, launcher=None):
    """Our `workload` line; under `launcher` (mpirun's words) unpinned, with MPI's settings."""
    cmd = (launcher or []) + [bench, "--json", workload]
    extra = mpi_env() if launcher else None
    for o in run(cmd, threads, extra, pin=launcher is None):
        if o.get("workload") == workload:
            return o
    sys.exit(f"{bench} printed no {workload} line")


def mpi_env():
    env = {"OMPI_MCA_btl_vader_single_copy_mechanism": "none"}
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return env


def w10_round(builds, args, record):
    """One W10 round: each build on 1 and 2 processes, then PyTorch's single and DDP."""
    rows = {}
    for label, bench in builds:
        one = ours(bench, "W10", 1, ["mpirun", "-np", "1", "--bind-to", "core"])
        two = ours(bench, "W10", 1, ["mpirun", "-np", "2", "--bind-to", "core"])
        rows[label] = (one["median_ms"], two)
    # PyTorch's script starts its own two processes: not pinned
    lines = peer(args, "bench_torch_w10.py", ["all"], 1, pin=False)
    theirs = {o.get("variant"): o["median_ms"] for o in lines}
    nan = float("nan")
    for label, (one, two) in rows.items():
        speedup = one / two["median_ms"]
        ddp = theirs.get("ddp-gloo")
        if ddp is None:
            sys.exit("bench_torch_w10.py printed no ddp-gloo line")
        # each rank's compute: the step waits for the slowest (older builds do not print it)
        ranks = "/".join(f"{c:.3f}" for c in two.get("compute_median_ms_by_rank", [])) or "?"
        print(f"  W10 [{label}] 1 process {one:.3f} ms, 2 processes {two['median_ms']:.3f} ms "
              f"(compute by rank {ranks}, averaging {two.get('sync_in_step_median_ms', nan):.3f} in the step), "
              f"speed-up {speedup:.3f} (>= {SPEEDUP_TARGET}); DDP {ddp:.3f} ms, ratio {two['median_ms'] / ddp:.3f} (<= 1); "
              f"averaging alone {two.get('sync_gb_per_s', nan):.1f} GB/s, MPI_Allreduce {two.get('mpi_allreduce_gb_per_s', nan):.1f} GB/s")
        record(("W10 speed-up", 2, label), speedup, None, SPEEDUP_TARGET, at_least=True)
        record(("W10 vs DDP", 2, label), two["median_ms"], ddp, 1.0)


def peer(args, script, peer_args, threads, pin=True):
    """The JSON objects PyTorch's `script` prints (tried twice)."""
    path = Path(args.peers) / script
    if not path.exists():
        sys.exit(f"PyTorch's side {path} is missing (set --peers)")
    lines = run([args.python, str(path)] + peer_args, threads, pin=pin, tries=2)
    if not lines:
        sys.exit(f"{path} {' '.join(peer_args)} printed no result")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workloads", nargs="+")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, nargs="+", default=[1])
    ap.add_argument("--bench", action="append", help="[label=]path of a bench binary (repeatable)")
    ap.add_argument("--peers", default=str(ROOT.parent / "shared" / "peers"))
    ap.add_argument("--python", default=str(Path.home() / "torch-venv" / "bin" / "python"))
    ap.add_argument("--no-peer", action="store_true", help="our side only")
    args = ap.parse_args()
    builds = []
    for b in args.bench or [str(ROOT / "target" / "release" / "examples" / "bench")]:
        label, _, path = b.rpartition("=")
        builds.append((label or Path(path).name, path))
    for _, path in builds:
        if not os.access(path, os.X_OK):
            sys.exit(f"no bench binary at {path} (cargo build --release -p autograd-examples --example bench)")

    results = {}

    def record(key, value, theirs, target, at_least=False):
        results.setdefault(key, []).append((value, theirs, target, at_least))

    for r in range(1, args.rounds + 1):
        print(f"round {r}", flush=True)
        for workload in args.workloads:
            if workload == "W10":
                w10_round(builds, args, record)
                continue
            for t in args.threads:
                mine = {label: ours(bench, workload, t)["median_ms"] for label, bench in builds}
                pair = None if args.no_peer else PAIRS.get(workload)
                theirs = None
                if pair:
                    script, peer_args, figure, target, name = pair
                    theirs = figure(peer(args, script, peer_args(t), t)[0])
                for label, value in mine.items():
                    line = f"  {workload} {t}t [{label}] {value:.4g} ms"
                    if theirs is not None:
                        line += f"  PyTorch {name} {theirs:.4g} ms  ratio {value / theirs:.3f} (<= {target})"
                        record((workload, t, label), value, theirs, target)
                    else:
                        record((workload, t, label), value, None, None)
                    print(line, flush=True)

    print("\nsummary (median of the rounds; 'miss' counts rounds past the target)")
    for (workload, t, label), rows in results.items():
        values = [v for v, _, _, _ in rows]
        theirs = [p for _, p, _, _ in rows if p is not None]
        target, at_least = rows[0][2], rows[0][3]
        line = f"  {workload} {t}t [{label}] ours {min(values):.4g}-{max(values):.4g}, median {statistics.median(values):.4g}"
        if theirs:
            ratios = [v / p for v, p, _, _ in rows]
            miss = sum(x > target for x in ratios)
            line += (f"; PyTorch {min(theirs):.4g}-{max(theirs):.4g}; ratio {min(ratios):.3f}-{max(ratios):.3f}, "
                     f"median {statistics.median(ratios):.3f} (<= {target}), miss {miss} of {len(ratios)}")
        elif target is not None:
            miss = sum((v < target) if at_least else (v > target) for v in values)
            line += f" ({'>=' if at_least else '<='} {target}), miss {miss} of {len(values)}"
        print(line)


if __name__ == "__main__":
    main()
