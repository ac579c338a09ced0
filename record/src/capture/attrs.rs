//! The events a recording writes: their attrs and ids, and the tracepoint formats that
//! TRACING_DATA carries for the tracepoint-style ones.

use std::path::Path;

use format::{attr_flag, event_type, sample_type as st, sw_event, EventAttr};

use crate::config::Config;

/// Ids of the events' records.
pub const CPU_CLOCK_ID: u64 = 1;
const OFFCPU_ID: u64 = 2;
const BLOCK_IO_ID: u64 = 3;
const WAKEUP_ID: u64 = 4;
const RUNQ_ID: u64 = 5;
const FAULT_ID: u64 = 6;
const CACHESTAT_ID: u64 = 7;
/// Ids of the network events: this and the next five (NET_EVENTS' order).
const NET_ID: u64 = 8;
const FAULT_WAIT_ID: u64 = 14;
const REQUEST_ID: u64 = 15;
/// Fields of every sample (the same for all events, so that ids sit at the same place).
const SAMPLE_TYPE: u64 =
    st::IDENTIFIER | st::IP | st::TID | st::TIME | st::CPU | st::PERIOD | st::CALLCHAIN;

/// REGS_USER registers written in DWARF mode: the 20 that perf writes, so that its own
/// unwinders (libdw wants them all) read our samples.
const USER_REGS_MASK: u64 = bpf::UserRegs::PERF_MASK;

/// The cpu-clock event. With `aggregate` it is written in period mode with a period of 1
/// (as `perf record -c 1` would): a sample's period then counts the samples it stands for,
/// which is how perf weighs it, and how analyze tells such a file (each sample's period a
/// count, not nanoseconds).
fn cpu_clock_attr(frequency: u64, stack_copy_bytes: u32, aggregate: bool) -> EventAttr {
    let dwarf = stack_copy_bytes > 0;
    let freq = if aggregate { 0 } else { attr_flag::FREQ };
    EventAttr {
        sample_regs_user: if dwarf { USER_REGS_MASK } else { 0 },
        sample_stack_user: stack_copy_bytes,
        name: "cpu-clock".into(),
        type_: event_type::SOFTWARE,
        config: sw_event::CPU_CLOCK,
        sample_period_or_freq: if aggregate { 1 } else { frequency },
        sample_type: if dwarf {
            SAMPLE_TYPE | st::REGS_USER | st::STACK_USER
        } else {
            SAMPLE_TYPE
        },
        flags: if dwarf {
            attr_flag::EXCLUDE_CALLCHAIN_USER
        } else {
            0
        } | freq
            | attr_flag::SAMPLE_ID_ALL
            | attr_flag::USE_CLOCKID
            | attr_flag::MMAP
            | attr_flag::COMM
            | attr_flag::TASK
            | attr_flag::MMAP2
            | attr_flag::COMM_EXEC
            | attr_flag::KSYMBOL
            | attr_flag::BPF_EVENT,
        clockid: libc::CLOCK_MONOTONIC,
        ids: vec![CPU_CLOCK_ID],
        ..Default::default()
    }
}

/// Ids of any event's records: this plus the event's index among the traced.
const TRACED_ID_BASE: u64 = 100;

/// How one traced event is written.
#[derive(Debug, Clone, Copy)]
pub struct TracedAttr {
    /// Its attr (None: a pair's entry, kept in the kernel only).
    pub attr: Option<usize>,
    /// Its samples weigh the latency (ns), else 1.
    pub latency: bool,
    /// Its kernel stacks are kept (a syscall's tracepoint has the same one every time, the
    /// syscall path: left out, as perf leaves it out).
    pub kernel_stack: bool,
}

/// The attr of any event's samples: a tracepoint with its RAW payload.
fn traced_attr(t: &crate::tracing::Traced, id: u64, cfg: &Config) -> EventAttr {
    let mut attr = EventAttr {
        name: t.name.clone(),
        type_: event_type::TRACEPOINT,
        config: t.id,
        sample_period_or_freq: 1,
        sample_type: SAMPLE_TYPE | st::PERIOD | st::RAW,
        flags: attr_flag::SAMPLE_ID_ALL | attr_flag::USE_CLOCKID,
        clockid: libc::CLOCK_MONOTONIC,
        ids: vec![id],
        ..Default::default()
    };
    if !t.bpf.stacks {
        // --call-graph none: not even an empty callchain (8 bytes of each of millions).
        attr.sample_type &= !st::CALLCHAIN;
    } else if cfg.stack_copy_bytes > 0 {
        attr.sample_type |= st::REGS_USER | st::STACK_USER;
        attr.flags |= attr_flag::EXCLUDE_CALLCHAIN_USER;
        attr.sample_regs_user = USER_REGS_MASK;
        attr.sample_stack_user = cfg.stack_copy_bytes.min(bpf::MAX_OFFCPU_COPY);
    }
    attr
}

/// The attrs of a recording, and where each bpfperf event sits among them.
pub struct Events {
    pub attrs: Vec<EventAttr>,
    pub offcpu: Option<usize>,
    pub runq: Option<usize>,
    /// Major faults (`fault-time`).
    pub fault: Option<usize>,
    /// Waits inside page faults (`fault-wait`, from off-CPU intervals).
    pub fault_wait: Option<usize>,
    pub cache: Option<usize>,
    pub io: Option<usize>,
    pub wakeup: Option<usize>,
    /// The network events, in [`format::events::NET_EVENTS`]' order.
    pub net: Option<[usize; 6]>,
    /// Sampled requests' layers (`--follow`).
    pub request: Option<usize>,
    /// Each traced event (any event), by its index among them.
    pub traced: Vec<TracedAttr>,
    /// TRACING_DATA, when a tracepoint-style event is recorded.
    pub tracing_data: Option<Vec<u8>>,
}

/// The id of the event a LOST record names, for each kind of loss: the event whose samples
/// the lost events would have been (perf and analyze count a LOST record against the event
/// its id names); cpu-clock's where that event is not written.
#[derive(Debug, Clone, Copy)]
pub struct LostIds {
    pub on_cpu: u64,
    pub off_cpu: u64,
    pub block_io: u64,
    pub faults: u64,
    /// The first event traced: the kernel counts their losses together.
    pub traced: u64,
    /// The first network event: the kernel counts their losses together.
    pub net: u64,
    /// Sampled requests' records.
    pub request: u64,
}

impl Events {
    pub fn lost_ids(&self) -> LostIds {
        let id = |attr: Option<usize>| attr.map_or(CPU_CLOCK_ID, |i| self.attrs[i].ids[0]);
        LostIds {
            on_cpu: CPU_CLOCK_ID,
            off_cpu: id(self.offcpu),
            block_io: id(self.io),
            faults: id(self.fault),
            traced: id(self.traced.iter().find_map(|t| t.attr)),
            net: id(self.net.map(|n| n[0])),
            request: id(self.request),
        }
    }
}

/// The events `cfg` asks for. Block I/O and wakeups are tracepoint-style events whose formats
/// perf needs in TRACING_DATA: without tracefs they are left out, with a warning.
pub fn events(cfg: &Config, traced: &[crate::tracing::Traced]) -> Events {
    let mut attrs = vec![cpu_clock_attr(
        cfg.frequency,
        cfg.stack_copy_bytes,
        cfg.aggregate && cfg.sampling,
    )];
    // Off-CPU and run-queue stacks take the DWARF path too: registers and a stack copy.
    let with_copies = |mut attr: EventAttr| {
        if cfg.stack_copy_bytes > 0 {
            attr.sample_type |= st::REGS_USER | st::STACK_USER;
            attr.flags |= attr_flag::EXCLUDE_CALLCHAIN_USER;
            attr.sample_regs_user = USER_REGS_MASK;
            attr.sample_stack_user = cfg.stack_copy_bytes.min(bpf::MAX_OFFCPU_COPY);
        }
        attr
    };
    let offcpu_attr = cfg.off_cpu_min_ns.map(|_| {
        attrs.push(with_copies(format::events::offcpu_attr(
            SAMPLE_TYPE,
            vec![OFFCPU_ID],
        )));
        attrs.len() - 1
    });
    let runq_attr = cfg.off_cpu_min_ns.map(|_| {
        attrs.push(with_copies(format::events::runq_attr(
            SAMPLE_TYPE,
            vec![RUNQ_ID],
        )));
        attrs.len() - 1
    });
    // Each major fault carries its own stack copy, as large as an on-CPU sample's.
    let fault_attr = cfg.faults.then(|| {
        let mut attr = with_copies(format::events::fault_attr(SAMPLE_TYPE, vec![FAULT_ID]));
        attr.sample_stack_user = cfg.stack_copy_bytes;
        attrs.push(attr);
        attrs.len() - 1
    });
    let fault_wait_attr = (cfg.faults && cfg.off_cpu_min_ns.is_some()).then(|| {
        attrs.push(with_copies(format::events::fault_wait_attr(
            SAMPLE_TYPE,
            vec![FAULT_WAIT_ID],
        )));
        attrs.len() - 1
    });
    // Block I/O and wakeup samples are tracepoint-style events: perf needs their formats in
    // TRACING_DATA (the writer keeps them BPF_OUTPUT events until finish() writes that, so a
    // killed recording stays readable).
    let wakeups = cfg.off_cpu_min_ns.is_some() && cfg.wakeups;
    let tracing_data = if cfg.block_io
        || wakeups
        || cfg.cache
        || cfg.net
        || cfg.follows_requests()
        || !traced.is_empty()
    {
        match format::TracingData::from_tracefs(Path::new("/sys/kernel/tracing")) {
            Ok(mut td) => {
                if cfg.block_io {
                    td.events.push(format::events::block_io_format());
                }
                if wakeups {
                    td.events.push(format::events::wakeup_format());
                }
                if cfg.cache {
                    td.events.push(format::events::cachestat_format());
                }
                if cfg.follows_requests() {
                    td.events.push(format::events::request_format());
                }
                if cfg.net {
                    for (_, id) in format::events::NET_EVENTS {
                        td.events.push(format::events::net_format(id));
                    }
                    // The kernel's own formats of the events whose reasons the network
                    // events carry: their print formats name each reason (analyze net
                    // reads them there, on any machine). Without them, numbers.
                    let tracefs = Path::new("/sys/kernel/tracing");
                    for (system, name) in format::events::NET_REASON_EVENTS {
                        let _ = td.add_tracefs_event(tracefs, system, name);
                    }
                }
                // Each written event's format once (a glob's events, a pair's exit and a
                // plain -e of its entry may share one).
                let mut ids = std::collections::HashSet::new();
                for t in traced.iter().filter(|t| t.written) {
                    if ids.insert(t.id) {
                        td.events.push(format::EventFormat {
                            system: t.system.clone(),
                            text: t.format_text.clone(),
                        });
                    }
                }
                Some(td.to_bytes())
            }
            Err(e) => {
                eprintln!("record: warning: block I/O, wakeups and page-cache counts not recorded: cannot read tracefs ({e}); mount it with: mount -t tracefs nodev /sys/kernel/tracing");
                None
            }
        }
    } else {
        None
    };
    let io_attr = (tracing_data.is_some() && cfg.block_io).then(|| {
        let mut attr = format::events::block_io_attr(SAMPLE_TYPE, vec![BLOCK_IO_ID]);
        if cfg.stack_copy_bytes > 0 {
            // Writeback charged to its dirtier carries the dirtier's registers and stack
            // copy; other requests keep the issuer's frame-pointer chain (no registers).
            attr.sample_type |= st::REGS_USER | st::STACK_USER;
            attr.sample_regs_user = USER_REGS_MASK;
            attr.sample_stack_user = cfg.stack_copy_bytes.min(bpf::MAX_OFFCPU_COPY);
        }
        attrs.push(attr);
        attrs.len() - 1
    });
    let wakeup_attr = (tracing_data.is_some() && wakeups).then(|| {
        attrs.push(format::events::wakeup_attr(SAMPLE_TYPE, vec![WAKEUP_ID]));
        attrs.len() - 1
    });
    let cache_attr = (tracing_data.is_some() && cfg.cache).then(|| {
        attrs.push(format::events::cachestat_attr(
            SAMPLE_TYPE,
            vec![CACHESTAT_ID],
        ));
        attrs.len() - 1
    });
    let request_attr = (tracing_data.is_some() && cfg.follows_requests()).then(|| {
        attrs.push(format::events::request_attr(
            SAMPLE_TYPE & !st::CALLCHAIN,
            vec![REQUEST_ID],
        ));
        attrs.len() - 1
    });
    // Network events keep frame-pointer user stacks (a thread of the owner may not be the
    // one current: no registers to unwind from).
    let net_attrs = (tracing_data.is_some() && cfg.net).then(|| {
        let mut at = [0; 6];
        for (i, (_, id)) in format::events::NET_EVENTS.iter().enumerate() {
            attrs.push(format::events::net_attr(
                *id,
                SAMPLE_TYPE,
                vec![NET_ID + i as u64],
            ));
            at[i] = attrs.len() - 1;
        }
        at
    });
    // Any event's formats come from tracefs: resolving them read it already.
    let traced = traced
        .iter()
        .enumerate()
        .map(|(i, t)| TracedAttr {
            attr: t.written.then(|| {
                attrs.push(traced_attr(t, TRACED_ID_BASE + i as u64, cfg));
                attrs.len() - 1
            }),
            latency: t.latency,
            kernel_stack: t.system != "syscalls",
        })
        .collect();
    Events {
        attrs,
        traced,
        cache: cache_attr,
        offcpu: offcpu_attr,
        runq: runq_attr,
        fault: fault_attr,
        fault_wait: fault_wait_attr,
        io: io_attr,
        wakeup: wakeup_attr,
        net: net_attrs,
        request: request_attr,
        tracing_data,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// --aggregate writes cpu-clock in period mode with a period of 1 (analyze's sign that a
    /// period counts samples); otherwise at the frequency asked, as perf does.
    #[test]
    fn aggregated_cpu_clock_counts_in_its_period() {
        let each = cpu_clock_attr(999, 0, false);
        assert_ne!(each.flags & attr_flag::FREQ, 0);
        assert_eq!(each.sample_period_or_freq, 999);
        let counted = cpu_clock_attr(999, 8192, true);
        assert_eq!(counted.flags & attr_flag::FREQ, 0);
        assert_eq!(counted.sample_period_or_freq, 1);
        assert_ne!(counted.flags & attr_flag::EXCLUDE_CALLCHAIN_USER, 0);
    }
}
