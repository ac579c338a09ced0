//! Names for events whose file has no EVENT_DESC, made the way perf prints them.

use linux_perf_data::linux_perf_event_reader::{AttrFlags, PerfEventAttr, PerfEventType};

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
    let mut name = base_name(attr, tracing_data);
    name.push_str(&modifiers(attr.flags));
    name
}

/// perf's modifiers (`evsel__add_modifiers`): `:u`, `:k`, ... where a context is excluded,
/// `p` for each level of precise_ip, `H`/`G` where host or guest is excluded against the
/// default.
fn modifiers(flags: AttrFlags) -> String {
    let has = |f: AttrFlags| flags.contains(f);
    let mut m = String::new();
    let mut excluded_default_guest = false;
    if has(AttrFlags::EXCLUDE_KERNEL) || has(AttrFlags::EXCLUDE_USER) || has(AttrFlags::EXCLUDE_HV)
    {
        for (f, c) in [
            (AttrFlags::EXCLUDE_KERNEL, 'k'),
            (AttrFlags::EXCLUDE_USER, 'u'),
            (AttrFlags::EXCLUDE_HV, 'h'),
        ] {
            if !has(f) {
                m.push(c);
            }
        }
        excluded_default_guest = true;
    }
    let precise = (flags.bits() & AttrFlags::PRECISE_IP_BITMASK.bits()) >> 15;
    if precise > 0 {
        m.push_str(&"ppp"[..precise.min(3) as usize]);
        excluded_default_guest = true;
    }
    if has(AttrFlags::EXCLUDE_HOST) || has(AttrFlags::EXCLUDE_GUEST) == excluded_default_guest {
        for (f, c) in [
            (AttrFlags::EXCLUDE_HOST, 'H'),
            (AttrFlags::EXCLUDE_GUEST, 'G'),
        ] {
            if !has(f) {
                m.push(c);
            }
        }
    }
    if m.is_empty() {
        m
    } else {
        format!(":{m}")
    }
}

fn base_name(attr: &PerfEventAttr, tracing_data: Option<&[u8]>) -> String {
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
