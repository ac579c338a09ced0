#!/usr/bin/env python3
"""What reading Python frames costs: a CPython program (Debian's 3.11 unless PYTHON says) 41
Python frames deep (a recursion with a hot leaf) run bare, under `record --no-python` and under `record` (Python
frames read at each sample), in an order that rotates from round to round. The program times
its own work (its CPU time, time.process_time, around a fixed amount of it: this shared
machine's run-queue waits stay out, the sampling interrupt and its BPF program, which run on
the program's time, stay in; start-up and record's finishing are left out). Per recorder,
medians (and ranges) over rounds of: the work's time over the same round's bare run (median of the paired ratios), bytes per cpu-clock sample (the file's size
over its samples), the cost of the sampling program per run as the kernel measures it
and of the sched_switch program, which reads them where a thread blocks (record -v:
BPF_STATS_RUN_TIME), and the perf map's bytes; then what the Python frames add to each
program's run (record's us less the same round's --no-python's: the rest is the native
unwinding, which grows with the interpreter's C stack).

Usage: python_cost.py RUNS RECORD"""
import os
import re
import statistics
import subprocess
import sys
import tempfile

# The recursion (41 Python frames, a hot leaf), also python_versions_cost.py's.
DEEP = r"""
def leaf(n):
    s = 0
    for i in range(n):
        s += i
    return s
def rec(d):
    return leaf(300) if d == 0 else rec(d - 1)
"""
PROGRAM = "import time\n" + DEEP + r"""
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
    version = subprocess.run([PYTHON, "-c", "import platform; print(platform.python_version())"],
                             stdout=subprocess.PIPE, check=True).stdout.decode().strip()

    def spread(xs):
        return f"{med(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})" if xs else "nan"

    print(f"{runs} rounds, a CPython {version} program ({PYTHON}) 41 Python frames deep; "
          f"bare work {med(times['bare']):.3f} s of CPU")
    for n in names[1:]:
        ratios = [a / b for a, b in zip(times[n], times["bare"])]
        print(f"  {n:20} work x{med(ratios):.3f} the bare run's, "
              f"{med(bytes_per[n]):.0f} bytes per sample, sampling program "
              f"{spread(us_each[n])} us per run, "
              f"sched_switch program {spread(switch_us[n])} us per run")
    for name, us in (("sampling", us_each), ("sched_switch", switch_us)):
        added = [a - b for a, b in zip(us["record"], us["record --no-python"])]
        print(f"  Python frames add {spread(added)} us per {name} run (paired)")
    paired = [a / b for a, b in zip(times["record"], times["record --no-python"])]
    print(f"  Python frames: work x{med(paired):.3f} the --no-python run's (paired), "
          f"perf map {med(map_bytes) if map_bytes else 0:.0f} bytes")


if __name__ == "__main__":
    main()
