//! probes.bpf.c: any event, attached once per event with its index as the cookie; what each
//! event is (payload, filter, pair) is written into the programs' maps before attaching.

use libbpf_rs::{Link, MapCore, MapFlags};

use crate::skel::{types, BpfperfSkel, OpenBpfperfSkel};
use crate::trace::{
    TraceAttach, TraceEvent, TraceHist, TracePayload, MAX_DATA_LOC, MAX_TRACE_EVENTS, SYSCALL_SLOTS,
};
use crate::{AggregatedEvents, Error, Options};

pub fn configure(open: &mut OpenBpfperfSkel<'_>, o: &Options) -> Result<(), Error> {
    if o.trace.len() > MAX_TRACE_EVENTS {
        return Err(Error::Attach {
            event: format!("{} events", o.trace.len()),
            why: format!("at most {MAX_TRACE_EVENTS} events can be attached at once"),
        });
    }
    super::rodata(open).trace_enabled = !o.trace.is_empty();
    let uses = |f: fn(&TraceAttach) -> bool| o.trace.iter().any(|e| f(&e.attach));
    let p = &mut open.progs;
    p.on_tracepoint
        .set_autoload(uses(|a| matches!(a, TraceAttach::Tracepoint { .. })));
    p.on_uprobe.set_autoload(uses(|a| {
        matches!(a, TraceAttach::Uprobe { ret: false, .. })
    }));
    p.on_uretprobe
        .set_autoload(uses(|a| matches!(a, TraceAttach::Uprobe { ret: true, .. })));
    p.on_usdt
        .set_autoload(uses(|a| matches!(a, TraceAttach::Usdt { .. })));
    p.on_kprobe.set_autoload(uses(|a| {
        matches!(a, TraceAttach::Kprobe { ret: false, .. })
    }));
    p.on_kretprobe
        .set_autoload(uses(|a| matches!(a, TraceAttach::Kprobe { ret: true, .. })));
    p.on_sys_enter.set_autoload(uses(|a| {
        matches!(a, TraceAttach::Syscall { exit: false, .. })
    }));
    p.on_sys_exit.set_autoload(uses(|a| {
        matches!(a, TraceAttach::Syscall { exit: true, .. })
    }));
    super::rodata(open).trace_aggregate = o.trace_aggregate && !o.trace.is_empty();
    let m = &mut open.maps;
    super::size_aggregation_maps(
        [
            &mut m.trace_agg_counts0,
            &mut m.trace_agg_counts1,
            &mut m.trace_agg_stacks0,
            &mut m.trace_agg_stacks1,
        ],
        o.trace_aggregate,
        o.aggregate_entries,
        "size the event aggregation maps",
    )?;
    if o.trace.is_empty() {
        // Nothing attached: no room for configs and filters (1.6 MB of filters).
        let m = &mut open.maps;
        super::unused(
            [&mut m.trace_configs, &mut m.filters],
            "size the event maps",
        )?;
    }
    Ok(())
}

/// The kernel's view of an event.
fn config(e: &TraceEvent, filter: u32) -> types::trace_config {
    let mut c = types::trace_config {
        filter,
        stacks: e.stacks as u32,
        entry: e.entry.map_or(0, |i| i as u32 + 1),
        entry_only: e.entry_only as u32,
        common_type: e.common_type as u32,
        ..Default::default()
    };
    c.source = match &e.attach {
        TraceAttach::Tracepoint { .. } => types::trace_source::TRACE_TRACEPOINT,
        TraceAttach::Uprobe { ret: false, .. } => types::trace_source::TRACE_UPROBE,
        TraceAttach::Uprobe { ret: true, .. } => types::trace_source::TRACE_URETPROBE,
        TraceAttach::Usdt { .. } => types::trace_source::TRACE_USDT,
        TraceAttach::Kprobe { ret: false, .. } => types::trace_source::TRACE_KPROBE,
        TraceAttach::Kprobe { ret: true, .. } => types::trace_source::TRACE_KRETPROBE,
        TraceAttach::Syscall { .. } => types::trace_source::TRACE_SYSCALL,
    }
    .0;
    match e.hist {
        None => {}
        Some(TraceHist::Latency) => c.hist = types::trace_hist::HIST_LATENCY.0,
        Some(TraceHist::Field {
            offset,
            size,
            signed,
        }) => {
            c.hist = types::trace_hist::HIST_FIELD.0;
            c.hist_off = offset;
            c.hist_size = size;
            c.hist_signed = signed as u32;
        }
    }
    match &e.payload {
        TracePayload::Record {
            fixed_size,
            data_loc,
        } => {
            c.fixed_size = *fixed_size;
            c.n_data_loc = data_loc.len().min(MAX_DATA_LOC) as u32;
            for (d, &off) in c.data_loc_off.iter_mut().zip(data_loc) {
                *d = off;
            }
        }
        TracePayload::Args(n) => c.n_args = *n,
        TracePayload::Return => {}
    }
    c
}

fn as_bytes<T: Copy>(v: &T) -> &[u8] {
    // SAFETY: T is one of the skeleton's plain structs (integers and arrays only); the
    // slice covers exactly its bytes and lives as long as the borrow.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>()) }
}

/// After load: each event's config and filter into the maps, then its program attached.
pub fn attach(skel: &BpfperfSkel<'_>, o: &Options, links: &mut Vec<Link>) -> Result<(), Error> {
    for (i, e) in o.trace.iter().enumerate() {
        let key = (i as u32).to_ne_bytes();
        let failed = |why: String| Error::Attach {
            event: e.name.clone(),
            why,
        };
        let filter = match &e.filter {
            Some(f) => {
                let prog = f.to_prog().map_err(failed)?;
                skel.maps
                    .filters
                    .update(&key, as_bytes(&prog), MapFlags::ANY)
                    .map_err(|err| failed(format!("writing its filter: {err}")))?;
                i as u32 + 1
            }
            None => 0,
        };
        skel.maps
            .trace_configs
            .update(&key, as_bytes(&config(e, filter)), MapFlags::ANY)
            .map_err(|err| failed(format!("writing its config: {err}")))?;
    }
    // The syscalls' fast path: each number's event in the map, then the two programs.
    let mut syscalls = [false; 2];
    for (i, e) in o.trace.iter().enumerate() {
        let TraceAttach::Syscall { nr, exit } = e.attach else {
            continue;
        };
        let failed = |why: String| Error::Attach {
            event: e.name.clone(),
            why,
        };
        if nr >= SYSCALL_SLOTS {
            return Err(failed(format!(
                "syscall number {nr} is past {SYSCALL_SLOTS}"
            )));
        }
        let key = (nr + if exit { SYSCALL_SLOTS } else { 0 }).to_ne_bytes();
        let taken = skel
            .maps
            .syscall_events
            .lookup(&key, MapFlags::ANY)
            .ok()
            .flatten()
            .is_some_and(|v| v != [0; 4]);
        if taken {
            return Err(failed("another event has this syscall already".into()));
        }
        skel.maps
            .syscall_events
            .update(&key, &(i as u32 + 1).to_ne_bytes(), MapFlags::ANY)
            .map_err(|err| failed(format!("writing its syscall: {err}")))?;
        syscalls[exit as usize] = true;
    }
    for (exit, prog, what) in [
        (false, &skel.progs.on_sys_enter, "attach sys_enter"),
        (true, &skel.progs.on_sys_exit, "attach sys_exit"),
    ] {
        if syscalls[exit as usize] {
            links.push(prog.attach().map_err(Error::bpf(what))?);
        }
    }
    for (i, e) in o.trace.iter().enumerate() {
        let p = &skel.progs;
        let cookie = i as u64;
        let link = match &e.attach {
            TraceAttach::Syscall { .. } => continue,
            TraceAttach::Tracepoint { system, name } => {
                p.on_tracepoint.attach_tracepoint_with_opts(
                    libbpf_rs::TracepointCategory::Custom(system.clone()),
                    name,
                    libbpf_rs::TracepointOpts {
                        cookie,
                        ..Default::default()
                    },
                )
            }
            TraceAttach::Uprobe { path, offset, ret } => {
                let prog = if *ret { &p.on_uretprobe } else { &p.on_uprobe };
                prog.attach_uprobe_with_opts(
                    -1,
                    path,
                    *offset as usize,
                    libbpf_rs::UprobeOpts {
                        cookie,
                        retprobe: *ret,
                        ..Default::default()
                    },
                )
            }
            TraceAttach::Usdt {
                path,
                provider,
                name,
            } => p.on_usdt.attach_usdt_with_opts(
                -1,
                path,
                provider,
                name,
                libbpf_rs::UsdtOpts {
                    cookie,
                    ..Default::default()
                },
            ),
            TraceAttach::Kprobe { function, ret } => {
                let prog = if *ret { &p.on_kretprobe } else { &p.on_kprobe };
                prog.attach_kprobe_with_opts(
                    *ret,
                    function,
                    libbpf_rs::KprobeOpts {
                        cookie,
                        ..Default::default()
                    },
                )
            }
        };
        links.push(link.map_err(|err| Error::Attach {
            event: e.name.clone(),
            why: err.to_string(),
        })?);
    }
    Ok(())
}

/// Moves the programs to the other pair of event aggregation maps, then reads and empties
/// pair `slot` (as `sampling::take_aggregated` does for on-CPU samples).
pub fn take_aggregated(skel: &BpfperfSkel<'_>, slot: u32) -> Result<Vec<AggregatedEvents>, Error> {
    let m = &skel.maps;
    let zero = 0u32.to_ne_bytes();
    m.trace_agg_slot
        .update(&zero, &(1 - slot).to_ne_bytes(), MapFlags::ANY)
        .map_err(Error::bpf("switch event aggregation maps"))?;
    std::thread::sleep(super::sampling::SLOT_GRACE);
    let (counts, stacks) = if slot == 0 {
        (&m.trace_agg_counts0, &m.trace_agg_stacks0)
    } else {
        (&m.trace_agg_counts1, &m.trace_agg_stacks1)
    };
    let stacks_read = super::sampling::Stacks::read(stacks);
    let count_keys: Vec<Vec<u8>> = counts.keys().collect();
    let mut out = Vec::with_capacity(count_keys.len());
    for key in &count_keys {
        let Ok(Some(value)) = counts.lookup(key, MapFlags::ANY) else {
            continue;
        };
        let mut k = types::trace_agg_key::default();
        let mut v = types::trace_agg_value::default();
        if plain::copy_from_bytes(&mut k, key).is_err()
            || plain::copy_from_bytes(&mut v, &value).is_err()
        {
            continue;
        }
        let stack = |id: u64| stacks_read.frames(id);
        out.push(AggregatedEvents {
            event: k.event,
            pid: k.pid,
            tid: k.tid,
            bucket: k.bucket,
            count: v.count,
            latency_ns: v.latency_ns,
            comm: v.comm.map(|c| c as u8),
            kernel_stack: stack(k.kstack),
            user_stack: stack(k.ustack),
        });
    }
    for key in &count_keys {
        let _ = counts.delete(key);
    }
    stacks_read.delete_from(stacks);
    Ok(out)
}
