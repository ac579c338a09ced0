//! The last stage: each resolved sample's frames as ids into one table of frames, root first
//! ([`Symbolized`], what report, script, flame graphs and wakeups consume).

use std::collections::BTreeMap;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::options::Options;
use super::resolved::{Resolved, Symbols, NO_SLOT};
use crate::read::{EventSel, Recording};
use crate::resolve::Source;
use crate::symbolize::{FrameAddr, FrameInfo, Symbolized, SymbolizedStack, TimedSample};

/// Frame ids: given in file order, then address order, so that the table does not depend on
/// the thread count.
struct FrameIds {
    /// Per file, aligned with [`Symbols::per_file`]: the ids of the frames at each address.
    files: Vec<Vec<Vec<u32>>>,
    /// Aligned with [`Symbols::kernel_addrs`].
    kernel: Vec<u32>,
    /// The `[unknown]` frame of each dso that has unresolved frames.
    unknown: FxHashMap<String, u32>,
}

fn intern_frames(r: &Resolved<'_>, symbols: &Symbols, table: &mut Vec<FrameInfo>) -> FrameIds {
    let mut interned: FxHashMap<FrameInfo, u32> = FxHashMap::default();
    let mut intern = |f: &FrameInfo, table: &mut Vec<FrameInfo>| -> u32 {
        if let Some(&id) = interned.get(f) {
            return id;
        }
        table.push(f.clone());
        let id = (table.len() - 1) as u32;
        interned.insert(f.clone(), id);
        id
    };
    let files = symbols
        .file_infos
        .iter()
        .map(|infos| {
            infos
                .iter()
                .map(|i| i.frames.iter().map(|f| intern(f, table)).collect())
                .collect()
        })
        .collect();
    let kernel = symbols
        .kernel_infos
        .iter()
        .map(|i| intern(&i.frames[0], table))
        .collect();
    let mut unknown: FxHashMap<String, u32> = FxHashMap::default();
    // Only frames that resolve to no file lookup are shown as their dso's `[unknown]` (every
    // lookup was symbolized): a deep recursion's hundreds of thousands of resolved frames
    // need no name of their dso here.
    let unresolved = symbols
        .unresolved
        .iter()
        .map(|&(s, k)| &r.stacks[s as usize].user[k as usize]);
    for l in unresolved {
        let dso = r.resolver.dso_of(l);
        if !unknown.contains_key(dso) {
            let id = intern(&FrameInfo::unknown(dso), table);
            unknown.insert(dso.to_string(), id);
        }
    }
    FrameIds {
        files,
        kernel,
        unknown,
    }
}

/// The counts of frames without a symbol name (`unnamed`, by frame id) summed by the file they
/// are in, with whether that file is stripped.
fn unnamed_by_file(
    r: &Resolved<'_>,
    frames: &[FrameInfo],
    unnamed: &[u64],
) -> BTreeMap<String, (u64, bool)> {
    let stripped: FxHashMap<&str, bool> = r
        .resolver
        .files()
        .iter()
        .filter_map(|f| match &f.source {
            Some(Source::Elf { elf, debug }) => Some((
                f.dso.as_str(),
                !elf.has_symtab && !debug.as_ref().is_some_and(|d| d.has_symtab),
            )),
            _ => None,
        })
        .collect();
    let mut by_file: BTreeMap<String, (u64, bool)> = BTreeMap::new();
    for (f, &n) in frames.iter().zip(unnamed) {
        if n == 0 || !f.dso.starts_with('/') {
            continue;
        }
        let e = by_file
            .entry(f.dso.clone())
            .or_insert((0, stripped.get(f.dso.as_str()).copied().unwrap_or(false)));
        e.0 += n;
    }
    by_file
}

/// Builds every sample's stack from the symbols of its addresses.
pub(super) fn symbolized(
    rec: &Recording,
    mut r: Resolved<'_>,
    mut symbols: Symbols,
    o: &Options,
) -> Symbolized {
    let mut out = Symbolized {
        comms: rec.comms.clone(),
        events: rec.events.clone(),
        event: r.label.clone(),
        unit: r.unit.clone(),
        ..Default::default()
    };
    let ids = intern_frames(&r, &symbols, &mut out.frames);
    let grouped_timeline = std::mem::take(&mut r.timeline);
    let unknown: Vec<bool> = out.frames.iter().map(FrameInfo::is_unknown).collect();
    let by_address: Vec<bool> = out.frames.iter().map(|f| f.by_address).collect();
    let lacks_symbol: Vec<bool> = out.frames.iter().map(FrameInfo::lacks_symbol).collect();
    crate::timing::mark("intern frames");

    if let Some(b) = &r.bar {
        b.set_message("stacks");
    }
    // Each stack's unwound frames, keys and slots are freed as it is built, by the thread
    // that built it (dropped afterwards, a deep recursion's took a millisecond on one).
    let (stacks, keys, slots) = (
        std::mem::take(&mut r.stacks),
        std::mem::take(&mut r.keys),
        std::mem::take(&mut symbols.slots),
    );
    let built: Vec<(SymbolizedStack, u64, (u64, u64))> = r
        .samples
        .par_iter()
        .zip(stacks.into_par_iter().zip(keys.into_par_iter().zip(slots)))
        .map(|((s, weight), (st, (keys, slots)))| {
            // Inline frames can add more; most stacks have as many frames as addresses.
            let mut frames = Vec::with_capacity(st.user.len() + s.kernel.len());
            let mut addrs = Vec::new();
            for ((loc, key), slot) in st.user.iter().zip(keys).zip(slots).rev() {
                let found = key.filter(|_| slot != NO_SLOT).map(|(f, _)| {
                    (
                        &ids.files[f as usize][slot as usize],
                        &symbols.file_infos[f as usize][slot as usize],
                    )
                });
                match found {
                    Some((frame_ids, info)) => {
                        frames.extend_from_slice(frame_ids);
                        if o.addresses {
                            let (_, a) = key.expect("found means resolved");
                            let offset = info.start.map(|st| a.addr.wrapping_sub(st));
                            // The functions inlined at the address get the real (outer)
                            // function's offset, as perf gives them (its inline symbols
                            // start where the symbol they were inlined into starts).
                            let at = FrameAddr {
                                addr: loc.addr,
                                offset,
                            };
                            addrs.extend(std::iter::repeat_n(at, frame_ids.len()));
                        }
                    }
                    None => {
                        frames.push(ids.unknown[r.resolver.dso_of(loc)]);
                        if o.addresses {
                            addrs.push(FrameAddr {
                                addr: loc.addr,
                                offset: None,
                            });
                        }
                    }
                }
            }
            let user_len = frames.len() as u32;
            if !o.user_only {
                for &a in s.kernel.iter().rev() {
                    let i = symbols
                        .kernel_addrs
                        .binary_search(&a)
                        .expect("every kernel address was looked up");
                    frames.push(ids.kernel[i]);
                    if o.addresses {
                        let start = symbols.kernel_infos[i].start;
                        addrs.push(FrameAddr {
                            addr: a,
                            offset: start.map(|st| a.wrapping_sub(st)),
                        });
                    }
                }
            }
            let n = frames.len() as u64;
            let unknown_n = frames.iter().filter(|&&f| unknown[f as usize]).count() as u64;
            let by_address_n = frames.iter().filter(|&&f| by_address[f as usize]).count() as u64;
            (
                SymbolizedStack {
                    comm: s.comm,
                    pid: s.pid,
                    tid: s.tid,
                    time: s.time,
                    cpu: s.cpu,
                    event: s.event as u32,
                    period: s.period,
                    weight: *weight,
                    count: 0,
                    frames,
                    user_len,
                    addrs,
                },
                n,
                (unknown_n, by_address_n),
            )
        })
        .collect();
    let mut stats = std::mem::take(&mut r.stats);
    stats.warnings.extend(symbols.warnings.iter().cloned());
    // Frames without a symbol name, by frame (then by file).
    let mut unnamed: Vec<u64> = vec![0; out.frames.len()];
    for ((mut st, n, (u, a)), &count) in built.into_iter().zip(&r.counts) {
        stats.frames += n * count;
        stats.unknown_frames += u * count;
        stats.by_address_frames += a * count;
        if u + a > 0 {
            for &f in &st.frames[..st.user_len as usize] {
                if lacks_symbol[f as usize] {
                    unnamed[f as usize] += count;
                }
            }
        }
        st.count = count;
        out.stacks.push(st);
    }
    stats.unnamed_by_file = unnamed_by_file(&r, &out.frames, &unnamed);
    crate::timing::mark("stacks");
    if let Some(b) = r.bar {
        b.finish_and_clear();
    }
    out.stats = stats;
    if o.labels_peers(&out.events) {
        if let Some(offcpu) = out
            .events
            .iter()
            .position(|e| e == format::events::OFFCPU_EVENT)
        {
            crate::aggregate::label_peers(&mut out, rec, offcpu as u32);
        }
    }
    let index = |out: &Symbolized, name: &str| out.events.iter().position(|e| e == name);
    let (offcpu, wakeup) = (
        index(&out, format::events::OFFCPU_EVENT),
        index(&out, format::events::WAKEUP_EVENT),
    );
    match (&o.event, offcpu, wakeup) {
        (EventSel::Wakeup, Some(offcpu), Some(wakeup)) => {
            crate::aggregate::join_wakers(&mut out, offcpu as u32, wakeup as u32);
        }
        (EventSel::Chain(depth), Some(offcpu), Some(wakeup)) => {
            let roots = crate::aggregate::Roots {
                pid: o.pid,
                tid: o.tid,
                comm: o.comm.as_deref(),
            };
            crate::aggregate::chain_wakers(
                &mut out,
                rec,
                offcpu as u32,
                wakeup as u32,
                *depth,
                &roots,
            );
        }
        (EventSel::Critical, Some(offcpu), wakeup) => {
            let events = crate::aggregate::CriticalEvents {
                offcpu: offcpu as u32,
                runq: index(&out, format::events::RUNQ_EVENT).map(|i| i as u32),
                wakeup: wakeup.map(|i| i as u32),
            };
            let window = o.time.as_ref().map(|t| {
                let (first, last) = rec.time_span().unwrap_or((0, 0));
                t.resolve(first, last)
            });
            out.critical =
                crate::aggregate::critical_path(&mut out, rec, &events, o.tid, window.as_deref());
        }
        (EventSel::Critical, None, _) => out.stacks.clear(),
        _ => {}
    }
    if o.timeline {
        out.timeline = if o.keeps_each_sample() {
            // Every sample kept apart: each is its own stack.
            out.stacks
                .iter()
                .enumerate()
                .map(|(i, s)| TimedSample {
                    stack: i as u32,
                    time: s.time,
                    cpu: s.cpu,
                    period: s.period,
                    weight: s.weight,
                })
                .collect()
        } else {
            grouped_timeline
        };
    }
    out
}
