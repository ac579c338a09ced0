//! `--verbose`: how long each phase of start-up and finish took, on stderr.

use std::time::Instant;

/// Prints the time since the previous mark, when verbose.
pub struct Phases {
    verbose: bool,
    start: Instant,
    last: Instant,
}

impl Phases {
    pub fn new(verbose: bool) -> Self {
        let now = Instant::now();
        Phases {
            verbose,
            start: now,
            last: now,
        }
    }

    /// Ends the phase `what`.
    pub fn mark(&mut self, what: &str) {
        let now = Instant::now();
        if self.verbose {
            eprintln!(
                "record: {what}: {:.1} ms (at {:.1} ms)",
                (now - self.last).as_secs_f64() * 1e3,
                (now - self.start).as_secs_f64() * 1e3
            );
        }
        self.last = now;
    }
}

/// record's own CPU time so far (user and system, all its threads), in seconds.
fn own_cpu() -> f64 {
    // SAFETY: zeroed rusage is a valid out buffer.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// When recording began (the workload released) and record's CPU time then: the costs
/// [`report_costs`] prints are over the recording only, not start-up (loading the BPF
/// programs, the verifier's time among it, is most of record's CPU in a short run).
pub struct Recording {
    wall: Instant,
    cpu: f64,
}

impl Recording {
    pub fn start() -> Self {
        Recording {
            wall: Instant::now(),
            cpu: own_cpu(),
        }
    }

    /// Wall time since recording began.
    pub fn elapsed(&self) -> std::time::Duration {
        self.wall.elapsed()
    }
}

/// `--verbose`: what recording cost, measured where it is paid: in the kernel, the BPF
/// programs' run time (they run in the context of whatever they observe, mostly the workload),
/// and record's own CPU time (on another CPU, when one is free).
pub fn report_costs(programs: &[bpf::ProgramRunTime], recording: &Recording) {
    let wall_ns = recording.wall.elapsed().as_nanos().max(1) as f64;
    let mut total = 0;
    for p in programs.iter().filter(|p| p.runs > 0) {
        total += p.run_time_ns;
        eprintln!(
            "record: BPF {}: {} runs, {:.2} us each, {:.1} ms in all",
            p.name,
            p.runs,
            p.run_time_ns as f64 / p.runs as f64 / 1e3,
            p.run_time_ns as f64 / 1e6
        );
    }
    // bpf_stats times each run between two clock reads: a program that returns at once shows
    // 0.07 us a run on a 2-CPU VM (retpolines, SRSO), which is the measuring, not the program.
    eprintln!(
        "record: BPF programs ran {:.1} ms in {:.2} s of recording ({:.2}% of one CPU; \
         each run's time includes the kernel's timing of it, tens of ns)",
        total as f64 / 1e6,
        wall_ns / 1e9,
        total as f64 / wall_ns * 100.0
    );
    let own = own_cpu() - recording.cpu;
    eprintln!(
        "record: record itself used {:.1} ms of CPU while recording ({:.2}% of one CPU)",
        own * 1e3,
        own * 1e9 / wall_ns * 100.0
    );
}
