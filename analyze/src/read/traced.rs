//! Traced events: the events whose samples carry a tracepoint's record (attr type
//! PERF_TYPE_TRACEPOINT, RAW payload), the format each payload is laid out by (found in
//! TRACING_DATA by the attr's config, the tracepoint id) and which of them are latencies.
//!
//! Latency events are samples whose period is a duration in nanoseconds, as bpfperf's
//! `record` writes them: a `--latency ENTRY,EXIT` pair, named `ENTRY->EXIT` (its payload and
//! format are the entry's), a return probe, named `...__return`, in a file bpfperf wrote (its
//! VERSION says `bpfperf ...`), and bpfperf's own timed events (`offcpu-time`, `runq-time`,
//! `fault-time`, `fault-wait`, `bpfperf:block_io`, `bpfperf:wakeup`). perf's own `...__return` probes are
//! plain events (period 1).

use format::linux_perf_data::linux_perf_event_reader::{PerfEventAttr, PerfEventType};
use format::linux_perf_data::PerfFile;
use format::TraceFormat;

/// Per event of a file (aligned with its attrs): whether it is a tracepoint, its format (when
/// TRACING_DATA has one for its id) and whether its period is a latency.
#[derive(Debug, Default)]
pub(super) struct TracedEvents {
    pub tracepoint: Vec<bool>,
    pub formats: Vec<Option<TraceFormat>>,
    pub latency: Vec<bool>,
}

/// The traced events of `file`, whose events are named `names`; `tracing_data` is its
/// TRACING_DATA blob.
pub(super) fn traced_events(
    file: &PerfFile,
    names: &[String],
    tracing_data: Option<&[u8]>,
) -> TracedEvents {
    let mut by_id: std::collections::HashMap<u64, TraceFormat> = Default::default();
    for (_, f) in tracing_data
        .map(format::tracing_formats)
        .unwrap_or_default()
    {
        // A damaged blob may name an id twice: the first stands.
        by_id.entry(f.id).or_insert(f);
    }
    let by_bpfperf = file
        .perf_version()
        .ok()
        .flatten()
        .is_some_and(|v| v.starts_with("bpfperf"));
    let mut out = TracedEvents::default();
    for (i, desc) in file.event_attributes().iter().enumerate() {
        let id = match desc.attr.type_ {
            PerfEventType::Tracepoint(id) if keeps_raw(&desc.attr) => Some(id),
            _ => None,
        };
        let name = names.get(i).map_or("", String::as_str);
        out.tracepoint.push(id.is_some());
        out.formats.push(id.and_then(|id| by_id.get(&id).cloned()));
        out.latency.push(is_latency_name(name, by_bpfperf));
    }
    out
}

/// Whether samples of this attr keep their RAW payload: tracepoints' (those of other events,
/// BPF output say, are not records of a format).
pub(super) fn keeps_raw(attr: &PerfEventAttr) -> bool {
    matches!(attr.type_, PerfEventType::Tracepoint(_))
}

/// Whether an event of this name holds latencies (see the module's doc).
pub(super) fn is_latency_name(name: &str, by_bpfperf: bool) -> bool {
    use format::events::{
        BLOCK_IO_EVENT, FAULT_EVENT, FAULT_WAIT_EVENT, NET_SEND_EVENT, OFFCPU_EVENT, RUNQ_EVENT,
        SOCK_WAIT_EVENT, WAKEUP_EVENT,
    };
    [
        OFFCPU_EVENT,
        RUNQ_EVENT,
        FAULT_EVENT,
        FAULT_WAIT_EVENT,
        BLOCK_IO_EVENT,
        WAKEUP_EVENT,
        SOCK_WAIT_EVENT,
        NET_SEND_EVENT,
    ]
    .contains(&name)
        || name.contains("->")
        || (by_bpfperf && name.ends_with("__return"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_names() {
        assert!(is_latency_name(
            "syscalls:sys_enter_read->sys_exit_read",
            false
        ));
        assert!(is_latency_name("probe_libc:getaddrinfo__return", true));
        // perf's own return probes count calls.
        assert!(!is_latency_name("probe_libc:getaddrinfo__return", false));
        assert!(!is_latency_name("syscalls:sys_enter_read", true));
        assert!(is_latency_name("offcpu-time", false));
        assert!(!is_latency_name("cpu-clock", true));
    }
}
