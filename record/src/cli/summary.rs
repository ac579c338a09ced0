//! The summary line at the end of a recording, as perf prints it, and what was lost.

use crate::session;

/// The line perf prints at the end of a recording, and what was lost.
pub fn print_summary(s: &session::Summary) {
    let mut traced = if s.traced > 0 {
        format!("{} traced events, ", s.traced)
    } else {
        String::new()
    };
    if s.net > 0 {
        traced += &format!("{} network events, ", s.net);
    }
    let files = match (s.files, s.kept) {
        (0, _) => String::new(),
        (n, kept) if kept < n => format!("{n} files ({kept} kept), the last "),
        (n, _) => format!("{n} files, the last "),
    };
    eprintln!(
        "[ record: {} samples, {} off-CPU events, {} run-queue waits, {} wakeups, {} I/O events, {} major faults, {traced}{} lost, {:.2} s, {} bytes written to {files}{} ]",
        s.samples,
        s.off_cpu,
        s.runq,
        s.wakeups,
        s.io,
        s.faults,
        s.lost,
        s.duration.as_secs_f64(),
        s.bytes,
        s.path.display()
    );
    if s.lost > 0 {
        eprintln!("record: lost {}", lost_words(s));
    }
    if s.aggregated > 0 {
        eprintln!(
            "record: samples counted in the kernel, written as {} records (period: the count)",
            s.aggregated
        );
    }
    if let Some(records) = s.traced_records {
        eprintln!(
            "record: traced events counted in the kernel: {}, written as {records} records (bpfperf_count: the count)",
            s.traced
        );
    }
    if s.missed_event_aggregations > 0 {
        eprintln!(
            "record: traced events that did not fit in the kernel's aggregation maps, written one by one: {}",
            s.missed_event_aggregations
        );
    }
    if s.missed_aggregations > 0 {
        eprintln!(
            "record: samples that did not fit in the kernel's aggregation maps, written one by one: {}",
            s.missed_aggregations
        );
    }
    if s.unseen_off_cpu_ends > 0 {
        eprintln!(
            "record: {} off-CPU intervals are not recorded: the kernel ran no sched_switch \
             program when their threads came back on a CPU, and showed no wakeup to end them at",
            s.unseen_off_cpu_ends
        );
    }
    let (unseen_requests, unseen_bytes) = s.unseen_io;
    if unseen_requests > 0 {
        eprintln!(
            "record: {unseen_requests} block requests ({unseen_bytes} bytes) are not recorded: \
             issued, and not seen completing (still in flight when the recording stopped, or \
             completed in an interrupt where the kernel ran no BPF program)"
        );
    }
    if s.unseen_followed > 0 {
        eprintln!(
            "record: {} followed calls have no block_complete step: their request was issued \
             and not seen completing",
            s.unseen_followed
        );
    }
    if s.missed_wakers > 0 {
        eprintln!(
            "record: {} off-CPU intervals are recorded without their waker (it could not be kept)",
            s.missed_wakers
        );
    }
}

/// What was lost, by kind: "26 block I/O events, 6 off-CPU intervals".
fn lost_words(s: &session::Summary) -> String {
    let d = &s.drops;
    let side_band = s.lost.saturating_sub(d.total() + s.unwritten);
    [
        (d.on_cpu, "on-CPU samples"),
        (d.off_cpu, "off-CPU intervals"),
        (d.block_io, "block I/O events"),
        (d.traced, "traced events"),
        (d.net, "network events"),
        (d.faults, "major faults"),
        (d.exits, "process exits"),
        (s.unwritten, "samples that did not fit in the file"),
        (side_band, "side-band records (mappings, names)"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect::<Vec<_>>()
    .join(", ")
}
