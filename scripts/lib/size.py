#!/usr/bin/env python3
"""What a recording costs, ours against perf's, on the same workload: bytes per CPU sample,
how deep the stacks are, and the recorder's own CPU time. Each round records the workload
once with every recorder, in an order that rotates from round to round; per recorder it
prints the median over rounds of bytes per cpu-clock sample and of the ratio to the first
recorder's bytes in the same round (median of the paired ratios), the median mean stack depth
(user frames per cpu-clock sample, as analyze unwinds each file), the median share of the
cpu-clock samples taken inside a BPF program (a kernel frame bpf_trace_runN or bpf_prog_*:
the workload's time spent in the recorder's programs), and the median CPU time the
recorder added to the workload's own (user + system of the whole command minus a bare run's
in the same round: its threads, its BPF programs and the sampling interrupt). For a recorder
run with -v (record), also its own threads' CPU time and each BPF program's cost per run as
the kernel measures it (BPF_STATS_RUN_TIME); a program runs for every event of its kind on
the machine, kept or not.

Usage: size.py RUNS ANALYZE WORKLOAD NAME=PREFIX...   (WORKLOAD: a bash command line; PREFIX:
the recorder's command words before `-o FILE --`, run without a shell; the first NAME is the
one the others are compared with)."""
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile


def cpu_of(cmd):
    """Runs cmd; returns (exit code, user+system seconds of it and its descendants, stderr)."""
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = p.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(p.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.stderr.write(err[-2000:])
    return code, usage.ru_utime + usage.ru_stime, err


# record -v: "record: BPF on_switch: 26074 runs, 0.38 us each, 10.0 ms in all" and
# "record: record itself used 147.0 ms of CPU while recording (12.26% of one CPU)".
PROGRAM = re.compile(r"^record: BPF (\w+): (\d+) runs, ([\d.]+) us each")
ITSELF = re.compile(r"^record: record itself used ([\d.]+) ms of CPU")


# A kernel frame that runs a tracepoint program: a sample taken there spent the workload's
# CPU time in a recorder's BPF program.
IN_BPF = re.compile(r";(bpf_trace_run\d|bpf_prog_[0-9a-f]+_\w+|__bpf_prog_run\w*)(;|$)")


def cpu_samples_depth_and_bpf(analyze, path):
    """(cpu-clock samples, mean user frames per sample, samples inside a BPF program) of a
    recording, as analyze reads it."""
    def folded(*extra):
        return subprocess.run([analyze, "report", "--folded", "--no-inline", "--event", "cpu",
                               *extra, "-i", path],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              check=True).stdout.decode(errors="replace").splitlines()
    samples = frames = 0
    for line in folded("-U"):
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        samples += n
        frames += n * (stack.count(";"))  # the comm is not a frame: one ';' per frame
    in_bpf = 0
    for line in folded():
        stack, _, count = line.rpartition(" ")
        if count.isdigit() and IN_BPF.search(stack):
            in_bpf += int(count)
    return samples, frames / max(samples, 1), in_bpf


def main():
    runs, analyze, workload = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    tools = [arg.split("=", 1) for arg in sys.argv[4:]]
    names = [name for name, _ in tools]
    prefixes = {name: shlex.split(prefix) for name, prefix in tools}
    per = {name: {"bps": [], "ratio": [], "depth": [], "cpu": [], "samples": [], "bpf": []}
           for name in names}
    programs, itself = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(runs):
            _, bare_cpu, _ = cpu_of(["bash", "-c", workload])
            order = names[r % len(names):] + names[:r % len(names)]
            got = {}
            for name in order:
                path = os.path.join(tmp, f"{name}.data")
                for old in (path, path + ".old"):
                    if os.path.exists(old):
                        os.remove(old)
                code, cpu, err = cpu_of(prefixes[name] + ["-o", path, "--", "bash", "-c", workload])
                if code != 0:
                    sys.exit(f"size: {name} exited {code}")
                for line in err.splitlines():
                    if m := PROGRAM.match(line):
                        programs.setdefault(m[1], []).append((int(m[2]), float(m[3])))
                    elif m := ITSELF.match(line):
                        itself.append(float(m[1]))
                samples, depth, in_bpf = cpu_samples_depth_and_bpf(analyze, path)
                size = os.path.getsize(path)
                got[name] = size / max(samples, 1)
                per[name]["bps"].append(got[name])
                per[name]["depth"].append(depth)
                per[name]["cpu"].append(cpu - bare_cpu)
                per[name]["samples"].append(samples)
                per[name]["bpf"].append(100.0 * in_bpf / max(samples, 1))
            for name in names:
                per[name]["ratio"].append(got[name] / got[names[0]])
    first = names[0]
    for name in names:
        p = per[name]
        ratio = "" if name == first else (
            f"  x{statistics.median(p['ratio']):.2f} of {first}'s"
            f" (rounds x{min(p['ratio']):.2f}..x{max(p['ratio']):.2f})")
        print(f"  {name:<12} {statistics.median(p['bps']):9.0f} bytes/sample"
              f"  depth {statistics.median(p['depth']):5.1f}"
              f"  samples {statistics.median(p['samples']):7.0f}"
              f"  added CPU {statistics.median(p['cpu']):6.2f} s"
              f"  in BPF {statistics.median(p['bpf']):4.2f}%{ratio}")
    if itself:
        print(f"  record's own threads: {statistics.median(itself):.0f} ms of CPU (median)")
    if programs:
        cost = ", ".join(
            f"{name} {statistics.median(r for _, r in runs):.2f} us x {statistics.median(n for n, _ in runs):.0f}"
            for name, runs in sorted(programs.items(), key=lambda kv: -statistics.median(n * r for n, r in kv[1])))
        print(f"  record's BPF programs, per run (the kernel's count; median): {cost}")


if __name__ == "__main__":
    main()
