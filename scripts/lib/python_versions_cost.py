#!/usr/bin/env python3
"""What a sample and a switch cost per CPython version: for each interpreter (pyenv's 3.8-3.13
and Debian's 3.11), two programs 41 Python frames deep under `record -v`, pinned to one CPU
(`taskset`: the other CPU's work stays off the programs' caches): one that computes (the
sampling program's run time, per run, as the kernel measures it: BPF_STATS_RUN_TIME) and one
that sleeps 1 ms at the bottom of each recursion (the sched_switch program's, which unwinds
and reads the Python frames where a thread blocks). Each round runs every version once, in an
order that rotates; per version the median (range) of its runs, and the median of its ratios
to the same round's pyenv 3.11 (the version whose table came first), and bytes per sample.

Usage: python_versions_cost.py ROUNDS RECORD"""
import os
import statistics
import subprocess
import sys
import tempfile

from python_cost import DEEP, MAP, SAMPLER, SAMPLES, SWITCH

COMPUTE = DEEP + """
for _ in range(60000):
    rec(40)
"""
SLEEP = r"""
import time
def rec(d):
    return time.sleep(0.001) if d == 0 else rec(d - 1)
for _ in range(1000):
    rec(40)
"""
PYENV = "/root/.pyenv/versions"
VERSIONS = [
    ("3.11 (pyenv)", f"{PYENV}/3.11.7/bin/python3.11"),
    ("3.8", f"{PYENV}/3.8.18/bin/python3.8"),
    ("3.9", f"{PYENV}/3.9.18/bin/python3.9"),
    ("3.10", f"{PYENV}/3.10.13/bin/python3.10"),
    ("3.11 (Debian)", "/usr/bin/python3.11"),
    ("3.12", f"{PYENV}/3.12.1/bin/python3.12"),
    ("3.13", f"{PYENV}/3.13.0/bin/python3.13"),
]


def record(recorder, data, python, script):
    cpu = str(os.cpu_count() - 1)
    cmd = [recorder, "-v", "-o", data, "--", "taskset", "-c", cpu, python, script]
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True)
    err = p.stderr.decode(errors="replace")
    m = MAP.search(err)
    if m and os.path.exists(m.group(1)):
        os.remove(m.group(1))
    return err


def main():
    rounds, recorder = int(sys.argv[1]), sys.argv[2]
    versions = [(n, p) for n, p in VERSIONS if os.path.exists(p)]
    missing = [n for n, p in VERSIONS if not os.path.exists(p)]
    if missing:
        print(f"missing, left out: {', '.join(missing)}", file=sys.stderr)
    work = tempfile.mkdtemp()
    scripts = {}
    for name, text in (("compute", COMPUTE), ("sleep", SLEEP)):
        scripts[name] = os.path.join(work, f"{name}.py")
        with open(scripts[name], "w") as f:
            f.write(text)
    data = os.path.join(work, "perf.data")
    sample_us = {n: [] for n, _ in versions}
    switch_us = {n: [] for n, _ in versions}
    bytes_per = {n: [] for n, _ in versions}
    for r in range(rounds):
        order = versions[r % len(versions):] + versions[:r % len(versions)]
        for name, python in order:
            err = record(recorder, data, python, scripts["compute"])
            sample_us[name].append(float(SAMPLER.search(err).group(2)))
            s = SAMPLES.search(err)
            bytes_per[name].append(int(s.group(2)) / max(int(s.group(1)), 1))
            err = record(recorder, data, python, scripts["sleep"])
            switch_us[name].append(float(SWITCH.search(err).group(2)))
        print(f"round {r + 1} of {rounds}", file=sys.stderr)
    med = statistics.median
    base = versions[0][0]

    def spread(xs):
        return f"{med(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"

    def ratio(xs, ys):
        rs = [a / b for a, b in zip(xs, ys)]
        return f"x{med(rs):.3f} ({min(rs):.2f}-{max(rs):.2f})"

    print(f"{rounds} rounds, record at its defaults, each program pinned to one CPU; "
          f"us per run (median, range), paired ratio to {base}'s")
    print(f"{'version':14} {'sampling us':20} {'vs ' + base:22} {'sched_switch us':20} "
          f"{'vs ' + base:22} bytes/sample")
    for name, _ in versions:
        print(f"{name:14} {spread(sample_us[name]):20} "
              f"{ratio(sample_us[name], sample_us[base]):22} {spread(switch_us[name]):20} "
              f"{ratio(switch_us[name], switch_us[base]):22} {med(bytes_per[name]):.0f}")


if __name__ == "__main__":
    main()
