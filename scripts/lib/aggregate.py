#!/usr/bin/env python3
"""Parts (b) and (c) of scripts/bench-aggregate: recordings of the same load one by one and
counted in the kernel, alternating (each round runs both, the order swapped every other
round), with the paired ratios' medians.

  system RUNS SECONDS RECORD WORK BUSY   record -a -F 49 -e cpu-clock --call-graph fp --duration
        SECONDS, per sample and with --aggregate, while BUSY (busy-fp) runs a thread per CPU: file bytes (ratio per round), and
        record's own CPU time (user + sys of the record process, from wait4) as a share of
        one CPU over the recording.
  floor RUNS N RECORD WORK   dd count=N bare and while a program sits on sys_enter_write:
        bpftrace's hist(args->count), bpftrace's empty program, ours (--hist count -a).
  unwind RUNS RECORD ANALYZE PROGRAM WORK   PROGRAM (no frame pointers) recorded in DWARF
        mode with stack copies (--no-kernel-unwind), unwound in the kernel, and unwound in the
        kernel and counted (--aggregate): bytes per sample (file bytes / samples the file
        stands for), and the share of samples whose folded stack (analyze report --folded)
        is one the copies' recording has too (equal stacks)."""
import os
import statistics
import subprocess
import sys
import time


def run(cmd):
    """Runs cmd; returns (user + sys seconds of it and its children, wall seconds, stderr)."""
    start = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = p.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.stderr.write(err)
        sys.exit(f"aggregate: {' '.join(cmd)} failed")
    return usage.ru_utime + usage.ru_stime, wall, err


def samples_of(stderr):
    """The summary's sample count: '[ record: N samples, ...'."""
    for line in stderr.splitlines():
        if line.startswith("[ record: "):
            return int(line.split()[2])
    sys.exit(f"aggregate: no summary in:\n{stderr}")


def system(runs, seconds, record, work, busy_program):
    # The load: busy-fp (frame pointers) with a thread per CPU, longer than every round.
    length = str(runs * 2 * (float(seconds) + 5) + 30)
    busy = [subprocess.Popen([busy_program, length, str(os.cpu_count())])]
    try:
        files = {"each": f"{work}/each.data", "counted": f"{work}/counted.data"}
        cpu = {k: [] for k in files}
        size = {k: [] for k in files}
        ratios = []
        for r in range(runs):
            order = ["each", "counted"] if r % 2 == 0 else ["counted", "each"]
            for k in order:
                # cpu-clock alone, frame pointers: what is counted in the kernel (the other
                # default events are written one by one either way, and system-wide DWARF
                # mode copies every stack: nothing to count).
                cmd = [record, "-a", "-F", "49", "-e", "cpu-clock", "--call-graph", "fp",
                       "--duration", seconds, "-o", files[k]]
                if k == "counted":
                    cmd.append("--aggregate")
                used, wall, _ = run(cmd)
                cpu[k].append(100 * used / wall)
                size[k].append(os.path.getsize(files[k]))
            ratios.append(size["each"][-1] / size["counted"][-1])
    finally:
        for b in busy:
            b.kill()
            b.wait()
    for k in files:
        print(f"  {k:<8} file {statistics.median(size[k]):>12,.0f} bytes, record's CPU "
              f"{statistics.median(cpu[k]):5.2f}% of one CPU (median of {runs}; "
              f"range {min(cpu[k]):.2f}..{max(cpu[k]):.2f})")
    print(f"  per-sample file / counted file: median of {runs} paired ratios "
          f"{statistics.median(ratios):.1f}x (range {min(ratios):.1f}..{max(ratios):.1f})")


def folded(analyze, path):
    out = subprocess.run([analyze, "report", "--folded", "--no-inline", "-i", path],
                         capture_output=True, text=True, check=True).stdout
    stacks = {}
    for line in out.splitlines():
        stack, _, n = line.rpartition(" ")
        stacks[stack] = stacks.get(stack, 0) + int(n)
    return stacks


def unwind(runs, record, analyze, program, work):
    modes = {
        "copies": ["--no-kernel-unwind"],
        "in-kernel": [],
        "in-kernel+aggregate": ["--aggregate"],
    }
    per_sample = {m: [] for m in modes}
    equal = {m: [] for m in modes}
    for r in range(runs):
        names = list(modes) if r % 2 == 0 else list(reversed(modes))
        files = {}
        for m in names:
            files[m] = f"{work}/{m}.data"
            cmd = [record, "--call-graph", "dwarf", "--no-off-cpu", "--no-io", *modes[m],
                   "-o", files[m], "--", *program.split()]
            _, _, err = run(cmd)
            per_sample[m].append(os.path.getsize(files[m]) / max(samples_of(err), 1))
        base = folded(analyze, files["copies"])
        for m in modes:
            mine = folded(analyze, files[m])
            total = sum(mine.values())
            equal[m].append(100 * sum(n for s, n in mine.items() if s in base) / max(total, 1))
    for m in modes:
        print(f"  {m:<20} {statistics.median(per_sample[m]):10.1f} bytes per sample, "
              f"{statistics.median(equal[m]):5.1f}% of samples on a stack the copies have "
              f"(median of {runs})")
    b = statistics.median(per_sample["copies"])
    for m in ("in-kernel", "in-kernel+aggregate"):
        print(f"  copies / {m}: {b / statistics.median(per_sample[m]):.1f}x")


def dd_seconds(n):
    start = time.perf_counter()
    subprocess.run(["dd", "if=/dev/zero", "of=/dev/null", f"count={n}"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def floor(runs, n, record, work):
    """What any program on the tracepoint costs dd on this kernel: dd bare and while bpftrace
    0.17 (the peer) holds hist(args->count) on it, or an empty program; and ours (--hist
    count) in the same rounds, each started and attached before dd runs."""
    tp = "tracepoint:syscalls:sys_enter_write"
    tools = {
        "bpftrace-hist": ["bpftrace", "-e", tp + " { @ = hist(args->count); }"],
        "bpftrace-empty": ["bpftrace", "-e", tp + " { }"],
        "ours-hist": [record, "-q", "-o", f"{work}/floor.data", "-e",
                      "syscalls:sys_enter_write", "--hist", "count", "-a"],
    }
    ratios = {k: [] for k in tools}
    for r in range(runs):
        names = list(tools) if r % 2 == 0 else list(reversed(tools))
        for k in names:
            bare = dd_seconds(n)
            p = subprocess.Popen(tools[k], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            # Time to load and attach (bpftrace: ~1 s here; ours ~0.5 s).
            time.sleep(3 if k.startswith("bpftrace") else 2)
            traced = dd_seconds(n)
            p.send_signal(2)
            p.wait()
            ratios[k].append(traced / bare)
    for k, v in ratios.items():
        print(f"  {k:<15} dd x{statistics.median(v):.3f} (median of {runs} paired ratios; "
              f"range x{min(v):.2f}..x{max(v):.2f})")


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "system":
        system(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6])
    elif what == "floor":
        floor(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5])
    elif what == "unwind":
        unwind(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6])
    else:
        sys.exit(__doc__)
