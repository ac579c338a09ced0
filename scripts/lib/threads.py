#!/usr/bin/env python3
"""How one command scales with rayon's thread count: each round runs it once at every thread
count (RAYON_NUM_THREADS), in an order that rotates from round to round so that no count always
goes first, and keeps each count's time over the same round's 1-thread time. Printed per count:
the median wall time, the median of the paired speedups (1-thread time / this time, same round),
their range, and the peak memory (the largest RSS of any run, from wait4's rusage).

Usage: threads.py RUNS COUNTS CMD   (COUNTS comma-separated, 1 among them; CMD as shell words,
run without a shell, its output discarded; a failing command stops the benchmark with its
stderr)."""
import os
import shlex
import statistics
import subprocess
import sys
import time


def run(cmd, threads):
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    start = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.stderr.write(err.decode(errors="replace"))
        sys.exit(f"threads: {shlex.join(cmd)} with {threads} threads exited {code}")
    return wall, usage.ru_maxrss  # KiB on Linux


def main():
    runs, counts, cmd = int(sys.argv[1]), sys.argv[2], shlex.split(sys.argv[3])
    counts = [int(c) for c in counts.split(",")]
    if 1 not in counts:
        sys.exit("threads: COUNTS must hold 1 (speedups are paired with the 1-thread run)")
    times = {c: [] for c in counts}
    speedups = {c: [] for c in counts}
    peak = {c: 0 for c in counts}
    run(cmd, counts[-1])  # warm the page cache and analyze's caches; not counted
    for r in range(runs):
        shift = r % len(counts)
        got = {}
        for c in counts[shift:] + counts[:shift]:
            wall, rss = run(cmd, c)
            got[c] = wall
            times[c].append(wall)
            peak[c] = max(peak[c], rss)
        for c in counts:
            speedups[c].append(got[1] / max(got[c], 1e-6))
    for c in counts:
        s = speedups[c]
        print(f"  {c:3d} threads {statistics.median(times[c]):9.4f} s  speedup "
              f"{statistics.median(s):5.2f}x (pairs {min(s):.2f}x..{max(s):.2f}x) "
              f"{peak[c] // 1024:6d} MiB")


if __name__ == "__main__":
    main()
