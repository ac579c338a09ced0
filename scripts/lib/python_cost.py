#!/usr/bin/env python3
"""What reading Python frames costs: a CPython 3.11 program 41 Python frames deep (a
recursion with a hot leaf) run bare, under `record --no-python` and under `record` (Python
frames read at each sample), in an order that rotates from round to round. The program times
its own work (its CPU time, time.process_time, around a fixed amount of it: this shared
machine's run-queue waits stay out, the sampling interrupt and its BPF program, which run on
the program's time, stay in; start-up and record's finishing are left out). Per recorder, medians over rounds of: the work's time over the same
round's bare run (median of the paired ratios), bytes per cpu-clock sample (the file's size
over its samples), the cost of the sampling program per run as the kernel measures it
and of the sched_switch program, which reads them where a thread blocks (record -v:
BPF_STATS_RUN_TIME), and the perf map's bytes.

Usage: python_cost.py RUNS RECORD"""
import os
import re
import statistics
import subprocess
import sys
import tempfile

PROGRAM = r"""
import time
def leaf(n):
    s = 0
    for i in range(n):
        s += i
    return s
def rec(d):
    return leaf(300) if d == 0 else rec(d - 1)
t = time.process_time()
for _ in range(ITERATIONS):
    rec(40)
print(f"work {time.process_time() - t:.6f}")
"""
ITERATIONS = 150000
# Another interpreter (pyenv's 3.8-3.13): PYTHON=/root/.pyenv/versions/3.12.1/bin/python3.12.
PYTHON = os.environ.get("PYTHON", "/usr/bin/python3.11")
SAMPLES = re.compile(r"\[ record: (\d+) samples.* ([\d]+) bytes written")
SAMPLER = re.compile(r"^record: BPF on_cpu_sample: (\d+) runs, ([\d.]+) us each", re.M)
SWITCH = re.compile(r"^record: BPF on_switch: (\d+) runs, ([\d.]+) us each", re.M)
MAP = re.compile(r"names in (\S+)")


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True)
    out, err = p.stdout.decode(), p.stderr.decode(errors="replace")
    return float(re.search(r"work ([\d.]+)", out).group(1)), err


def main():
    runs, record = int(sys.argv[1]), sys.argv[2]
    work = tempfile.mkdtemp()
    script = os.path.join(work, "deep.py")
    with open(script, "w") as f:
        f.write(PROGRAM.replace("ITERATIONS", str(ITERATIONS)))
    data = os.path.join(work, "perf.data")
    modes = {
        "bare": None,
        "record --no-python": [record, "-v", "--no-python", "-o", data, "--"],
        "record": [record, "-v", "-o", data, "--"],
    }
    names = list(modes)
    times = {n: [] for n in names}
    bytes_per = {n: [] for n in names[1:]}
    us_each = {n: [] for n in names[1:]}
    switch_us = {n: [] for n in names[1:]}
    map_bytes = []
    for r in range(runs):
        order = names[r % 3:] + names[:r % 3]
        for n in order:
            prefix = modes[n]
            t, err = run((prefix or []) + [PYTHON, script])
            times[n].append(t)
            if prefix:
                s = SAMPLES.search(err)
                bytes_per[n].append(int(s.group(2)) / max(int(s.group(1)), 1))
                p = SAMPLER.search(err)
                if p:
                    us_each[n].append(float(p.group(2)))
                w = SWITCH.search(err)
                if w:
                    switch_us[n].append(float(w.group(2)))
                m = MAP.search(err)
                if m and os.path.exists(m.group(1)):
                    map_bytes.append(os.path.getsize(m.group(1)))
                    os.remove(m.group(1))
        print(f"round {r + 1}: " + ", ".join(f"{n} {times[n][-1]:.3f} s" for n in names),
              file=sys.stderr)
    med = statistics.median
    print(f"{runs} rounds, a CPython 3.11 program 41 Python frames deep; bare work "
          f"{med(times['bare']):.3f} s of CPU")
    for n in names[1:]:
        ratios = [a / b for a, b in zip(times[n], times["bare"])]
        print(f"  {n:20} work x{med(ratios):.3f} the bare run's, "
              f"{med(bytes_per[n]):.0f} bytes per sample, sampling program "
              f"{med(us_each[n]) if us_each[n] else float('nan'):.2f} us per run, "
              f"sched_switch program "
              f"{med(switch_us[n]) if switch_us[n] else float('nan'):.2f} us per run")
    paired = [a / b for a, b in zip(times["record"], times["record --no-python"])]
    print(f"  Python frames: work x{med(paired):.3f} the --no-python run's (paired), "
          f"perf map {med(map_bytes) if map_bytes else 0:.0f} bytes")


main()
