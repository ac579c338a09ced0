#!/usr/bin/env python3
"""Times two commands on the same input, alternating, as the benchmarks must: each round runs
A then B (B then A on odd rounds, so that neither always goes first), the ratio B/A of each
round is kept, and the median of those ratios is printed, with each side's median wall time
and peak memory (the largest RSS of any run, from wait4's rusage: the command itself, no
wrapper in between).

Usage: pairs.py RUNS NAME_A CMD_A NAME_B CMD_B   (commands as shell words, run without a shell;
their output is discarded; a failing command stops the benchmark with its stderr).
With EVICT=FILE in the environment, FILE's pages are dropped from the page cache before every
run (written back, then POSIX_FADV_DONTNEED): each side reads it from disk.
With MEASURE=REGEX, each run's time is the number REGEX's first group finds in its stderr
(a workload's own clock, such as its CPU time) in place of the wall time."""
import os
import re
import shlex
import statistics
import subprocess
import sys
import time


def evict(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def run(cmd):
    if os.environ.get("EVICT"):
        evict(os.environ["EVICT"])
    start = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - start
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.stderr.write(err.decode(errors="replace"))
        sys.exit(f"pairs: {shlex.join(cmd)} exited {p.returncode}")
    measure = os.environ.get("MEASURE")
    if measure:
        found = re.search(measure, err.decode(errors="replace"))
        if not found:
            sys.exit(f"pairs: {shlex.join(cmd)}: MEASURE {measure!r} not found in its stderr")
        wall = float(found.group(1))
    return wall, usage.ru_maxrss  # KiB on Linux


def main():
    runs, name_a, cmd_a, name_b, cmd_b = sys.argv[1:6]
    runs = int(runs)
    a, b = shlex.split(cmd_a), shlex.split(cmd_b)
    times = {0: [], 1: []}
    peak = {0: 0, 1: 0}
    ratios = []
    for r in range(runs):
        order = (0, 1) if r % 2 == 0 else (1, 0)
        got = {}
        for side in order:
            wall, rss = run(a if side == 0 else b)
            got[side] = wall
            times[side].append(wall)
            peak[side] = max(peak[side], rss)
        ratios.append(got[1] / max(got[0], 1e-6))
    for side, name in ((0, name_a), (1, name_b)):
        print(f"  {name:<58} {statistics.median(times[side]):8.4f} s {peak[side] // 1024:6d} MiB")
    print(f"  median of {runs} paired ratios: {statistics.median(ratios):.3f}x "
          f"({name_a} faster when > 1; range {min(ratios):.3f}x..{max(ratios):.3f}x)")


if __name__ == "__main__":
    main()
