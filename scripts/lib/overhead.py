#!/usr/bin/env python3
"""Times one workload bare and under each recorder, in rounds: every round runs each once, in an
order that rotates from round to round, and keeps each recorder's ratio to that round's bare
run. Prints, per recorder, the median of those paired ratios twice: for the whole command
(start-up and finishing included) and for the workload alone (measured inside the recorded
command, from just before the workload starts to just after it ends), with the medians of the
wall times.

Usage: overhead.py RUNS WORKLOAD NAME=PREFIX...   (WORKLOAD: a bash command line; PREFIX: the
recorder's command words before `--`, run without a shell; NAME `bare` with an empty PREFIX is
the baseline and must come first)."""
import shlex
import statistics
import subprocess
import sys
import time


def run(prefix, workload):
    timed = f's=$(date +%s%N); {workload}; e=$(date +%s%N); echo "overhead-ns $((e - s))" >&2'
    cmd = (prefix + ["--"] if prefix else []) + ["bash", "-c", timed]
    start = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - start
    inner = [line for line in p.stderr.decode(errors="replace").splitlines() if line.startswith("overhead-ns ")]
    if p.returncode != 0 or not inner:
        sys.stderr.write(p.stderr.decode(errors="replace"))
        sys.exit(f"overhead: {shlex.join(cmd)} exited {p.returncode}")
    return wall, int(inner[0].split()[1]) / 1e9


def main():
    runs, workload = int(sys.argv[1]), sys.argv[2]
    tools = [arg.split("=", 1) for arg in sys.argv[3:]]
    names = [name for name, _ in tools]
    assert names[0] == "bare", "the first tool is the bare baseline"
    prefixes = {name: shlex.split(prefix) for name, prefix in tools}
    walls = {name: [] for name in names}
    inners = {name: [] for name in names}
    for r in range(runs):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            wall, inner = run(prefixes[name], workload)
            walls[name].append(wall)
            inners[name].append(inner)
    bare = names[0]
    print(f"  {bare:<10} whole {statistics.median(walls[bare]):7.3f} s  workload {statistics.median(inners[bare]):7.3f} s")
    for name in names[1:]:
        whole = [w / b for w, b in zip(walls[name], walls[bare])]
        alone = [w / b for w, b in zip(inners[name], inners[bare])]
        print(f"  {name:<10} whole {statistics.median(walls[name]):7.3f} s x{statistics.median(whole):.3f}"
              f"  workload {statistics.median(inners[name]):7.3f} s x{statistics.median(alone):.3f}"
              f"  (pairs x{min(alone):.2f}..x{max(alone):.2f})")


if __name__ == "__main__":
    main()
