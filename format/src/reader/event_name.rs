//! Names for events whose file has no EVENT_DESC, made the way perf prints them.

use linux_perf_data::linux_perf_event_reader::{PerfEventAttr, PerfEventType};

const HARDWARE: &[&str] = &[
    "cycles",
    "instructions",
    "cache-references",
    "cache-misses",
    "branch-instructions",
    "branch-misses",
    "bus-cycles",
    "stalled-cycles-frontend",
    "stalled-cycles-backend",
    "ref-cycles",
];

const SOFTWARE: &[&str] = &[
    "cpu-clock",
    "task-clock",
    "page-faults",
    "context-switches",
    "cpu-migrations",
    "minor-faults",
    "major-faults",
    "alignment-faults",
    "emulation-faults",
    "dummy",
    "bpf-output",
    "cgroup-switches",
];

pub(super) fn derive(attr: &PerfEventAttr, tracing_data: Option<&[u8]>) -> String {
    match attr.type_ {
        PerfEventType::Hardware(id, _) => HARDWARE
            .get(id as usize)
            .map_or_else(|| format!("hardware:{}", id as u64), |s| s.to_string()),
        PerfEventType::Software(id) => SOFTWARE
            .get(id as usize)
            .map_or_else(|| format!("software:{}", id as u64), |s| s.to_string()),
        PerfEventType::Tracepoint(id) => tracing_data
            .and_then(|blob| crate::tracing_data::tracepoint_names(blob).remove(&id))
            .unwrap_or_else(|| format!("tracepoint:{id}")),
        other => format!("{other:?}"),
    }
}
