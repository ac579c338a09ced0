//! The driver: select -> unwind -> resolve -> symbolize -> (aggregate). Rayon lives here and
//! in read/parallel.rs.
//!
//! Stacks are unwound and resolved in parallel; unique addresses are symbolized once, per
//! file in parallel (kernel symbols meanwhile); then each sample's frames become ids into one
//! table of frames, in parallel again. Every merge is keyed and sorted, and results are
//! collected in sample order, so the output does not depend on the thread count.

use std::collections::BTreeSet;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use crate::loader::{self, Loader};
use crate::read::{MapId, RawSample, Recording};
use crate::resolve::{Key, Lookup, Resolver, Source};
use crate::symbolize::{self, AddrInfo, FrameInfo};
pub use crate::symbolized::{FrameAddr, Stats, Symbolized, SymbolizedStack};
use crate::unwind::{UnwindCache, Unwinder, UnwoundStack};
use crate::Error;

/// Which samples make the profile, and what a sample weighs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventSel {
    /// The sampling event (the first on-CPU event of the file that has samples); weight 1.
    Cpu,
    /// `offcpu-time` samples; weight = nanoseconds off the CPU.
    OffCpu,
    /// bpfperf block I/O samples; weight = I/O latency in nanoseconds.
    Io,
    /// On-CPU samples weighted by their period (ns) plus off-CPU ns: where wall time went.
    Wall,
    /// `offcpu-time` samples joined with their wakers' stacks (see [`crate::wakeups`]).
    Wakeup,
    /// Samples of the event of that name (`task-clock`, `sched:sched_switch`); weight 1.
    Named(String),
}

impl EventSel {
    pub fn parse(s: &str) -> EventSel {
        match s {
            "cpu" => EventSel::Cpu,
            "offcpu" => EventSel::OffCpu,
            "io" => EventSel::Io,
            "wall" => EventSel::Wall,
            "wakeup" => EventSel::Wakeup,
            other => EventSel::Named(other.to_string()),
        }
    }

    /// What the weights count.
    pub fn unit(&self) -> &'static str {
        match self {
            EventSel::Cpu | EventSel::Named(_) => "samples",
            _ => "ns",
        }
    }
}

/// What to keep and how to show it.
#[derive(Debug, Clone)]
pub struct Options {
    pub event: EventSel,
    /// Show inlined functions as frames of their own.
    pub inline: bool,
    pub user_only: bool,
    pub kernel_only: bool,
    pub pid: Option<i32>,
    pub tid: Option<i32>,
    pub comm: Option<String>,
    /// Look up source lines (`file:line`, for `--sort srcline`); inline frames need them too.
    pub lines: bool,
    /// Keep each frame's address and symbol offset (for `script`).
    pub addresses: bool,
    /// Draw a progress bar on stderr (only when it is a terminal).
    pub progress: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            event: EventSel::Cpu,
            inline: true,
            user_only: false,
            kernel_only: false,
            pid: None,
            tid: None,
            comm: None,
            lines: true,
            addresses: false,
            progress: false,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sampling,
    OffCpu,
    Io,
    Wakeup,
}

fn kind_of(name: &str) -> Kind {
    match name {
        format::events::OFFCPU_EVENT => Kind::OffCpu,
        format::events::BLOCK_IO_EVENT => Kind::Io,
        format::events::WAKEUP_EVENT => Kind::Wakeup,
        _ => Kind::Sampling,
    }
}

/// A selected sample and its weight.
type Weighed<'a> = (&'a RawSample, u64);
/// The weight of a sample of an event (index), or `None` if it is not selected.
type Weigh<'a> = dyn Fn(usize, &RawSample) -> Option<u64> + Sync + 'a;

/// The samples `o` selects, with their weights, and the name of what was selected.
fn select<'a>(rec: &'a Recording, o: &Options) -> Result<(Vec<Weighed<'a>>, String), Error> {
    let kinds: Vec<Kind> = rec.events.iter().map(|n| kind_of(n)).collect();
    let kinds = &kinds;
    let mut counts = vec![0u64; rec.events.len()];
    for s in &rec.samples {
        if let Some(c) = counts.get_mut(s.event) {
            *c += 1;
        }
    }
    // The sampling event: the first on-CPU event that has samples. Several events are never
    // merged (as perf and stackcollapse-perf.pl keep them apart): name the others.
    let sampling = (0..rec.events.len()).find(|&i| kinds[i] == Kind::Sampling && counts[i] > 0);
    let named = |want: &str| -> Result<usize, Error> {
        let base = |n: &str| n.split(':').next().unwrap_or("").to_string();
        rec.events
            .iter()
            .position(|n| n == want)
            .or_else(|| rec.events.iter().position(|n| base(n) == want))
            .ok_or_else(|| Error::NoSuchEvent {
                name: want.to_string(),
                available: rec.events.join(", "),
            })
    };
    let (weigh, label): (Box<Weigh>, String) = match &o.event {
        EventSel::Cpu => {
            let i = sampling;
            (
                Box::new(move |e, s| (Some(e) == i).then_some(s.count)),
                i.map_or("cpu".into(), |i| rec.events[i].clone()),
            )
        }
        EventSel::Named(n) => {
            let i = named(n)?;
            let off = kinds[i] != Kind::Sampling;
            (
                Box::new(move |e, s| (e == i).then_some(if off { s.period } else { s.count })),
                rec.events[i].clone(),
            )
        }
        EventSel::OffCpu => (
            Box::new(|e, s| (kinds.get(e) == Some(&Kind::OffCpu)).then_some(s.period)),
            "off-CPU".into(),
        ),
        EventSel::Io => (
            Box::new(|e, s| (kinds.get(e) == Some(&Kind::Io)).then_some(s.period)),
            "block I/O".into(),
        ),
        EventSel::Wakeup => (
            Box::new(|e, s| {
                matches!(kinds.get(e), Some(Kind::OffCpu | Kind::Wakeup)).then_some(s.period)
            }),
            "off-CPU with wakers".into(),
        ),
        EventSel::Wall => {
            let i = sampling;
            (
                Box::new(move |e, s| {
                    (Some(e) == i || kinds.get(e) == Some(&Kind::OffCpu)).then_some(s.period)
                }),
                "wall clock".into(),
            )
        }
    };
    // Filters pick threads; a waker is whoever woke them, so its samples pass.
    let waker = |s: &RawSample| kinds.get(s.event) == Some(&Kind::Wakeup);
    let samples = rec
        .samples
        .iter()
        .filter(|s| {
            waker(s) || o.pid.is_none_or(|p| p == s.pid) && o.tid.is_none_or(|t| t == s.tid)
        })
        .filter(|s| {
            waker(s)
                || o.comm
                    .as_ref()
                    .is_none_or(|c| *c == rec.comms[s.comm as usize])
        })
        .filter_map(|s| Some((s, weigh(s.event, s)?)))
        .collect();
    Ok((samples, label))
}

/// Samples of one thread, event and command whose stacks are the same frame for frame (and
/// that carry no stack copy to unwind) become one, weighing their sum: a profile's samples
/// are mostly repeats (100k samples, a few thousand stacks), and everything after this works
/// per stack. Returns the kept samples, in order of first appearance, and how many each
/// stands for.
fn group_identical(samples: Vec<Weighed<'_>>) -> (Vec<Weighed<'_>>, Vec<u64>) {
    type Key<'a> = (
        usize,
        i32,
        i32,
        u32,
        &'a [u64],
        &'a [crate::read::UserFrame],
    );
    let mut index: FxHashMap<Key<'_>, usize> = FxHashMap::default();
    let mut kept: Vec<Weighed<'_>> = Vec::new();
    let mut counts: Vec<u64> = Vec::new();
    for (s, weight) in samples {
        if s.stack_copy.is_some() {
            kept.push((s, weight));
            counts.push(s.count);
            continue;
        }
        let key = (s.event, s.pid, s.tid, s.comm, &s.kernel[..], &s.user[..]);
        match index.entry(key) {
            std::collections::hash_map::Entry::Occupied(e) => {
                let i = *e.get();
                kept[i].1 += weight;
                counts[i] += s.count;
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(kept.len());
                kept.push((s, weight));
                counts.push(s.count);
            }
        }
    }
    (kept, counts)
}

fn progress_bar(o: &Options, len: u64) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if !o.progress || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = indicatif::ProgressBar::new(len);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg:>12} [{bar:40}] {pos}/{len} samples")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    Some(bar)
}

/// Kernel symbols, if the recording's kernel is the running one, and the shift from recorded
/// to running addresses (KASLR of another boot). The kernel is told by its build id where the
/// file gives one, else by its release (pipe-mode and older files list no build ids): names
/// from another kernel's symbol table would be wrong names, so its frames stay `[unknown]`.
fn kernel_symbols(
    rec: &Recording,
    loader: &Loader,
) -> (
    Option<std::sync::Arc<loader::Kallsyms>>,
    u64,
    Option<String>,
) {
    let other_kernel = |why: String| {
        let warning = format!(
            "the recording's kernel is not the running one ({why}); kernel frames are [unknown]"
        );
        (None, 0, Some(warning))
    };
    let recorded = rec.build_ids.get("[kernel.kallsyms]");
    if let (Some(want), Some(have)) = (recorded, loader::running_kernel_build_id()) {
        if !loader::build_ids_match(want, &have) {
            return other_kernel("build ids differ".into());
        }
    } else if let (Some(theirs), Some(ours)) = (&rec.os_release, loader::running_kernel_release()) {
        if *theirs != ours {
            return other_kernel(format!("it ran {theirs}, this machine {ours}"));
        }
    }
    let Some(k) = loader.kallsyms() else {
        return (None, 0, None);
    };
    // The kernel mapping is named after the symbol its page offset is the address of
    // ("[kernel.kallsyms]_text", older perf "[kernel.kallsyms]_stext").
    let shift = rec
        .kernel_mapping()
        .filter(|m| m.pgoff != 0)
        .and_then(|m| {
            let symbol = m.path.strip_prefix("[kernel.kallsyms]")?;
            Some(k.address_of(symbol)?.wrapping_sub(m.pgoff))
        })
        .unwrap_or(0);
    (Some(k), shift, None)
}

/// Reads nothing: turns the samples of `rec` that `o` selects into symbolized stacks.
pub fn symbolize(rec: &Recording, o: &Options, loader: &Loader) -> Result<Symbolized, Error> {
    let (samples, label) = select(rec, o)?;
    crate::timing::mark("select");
    let mut stats = Stats {
        samples: samples.iter().map(|(s, _)| s.count).sum(),
        ..Default::default()
    };
    // Per-sample output (script's times and addresses, wakeups matched by time) keeps every
    // sample; profiles only need each distinct stack once, with the weights summed.
    let (samples, counts) = if o.addresses || o.event == EventSel::Wakeup {
        let counts = samples.iter().map(|(s, _)| s.count).collect();
        (samples, counts)
    } else {
        group_identical(samples)
    };
    crate::timing::mark("group");
    let bar = progress_bar(o, samples.len() as u64);
    if let Some(b) = &bar {
        b.set_message("unwinding");
    }

    // Unwind, then resolve each user frame to (file, address there).
    let unwinder = Unwinder::new(rec, samples.iter().map(|(s, _)| *s), loader);
    stats.warnings.extend(unwinder.not_unwound.clone());
    let stacks: Vec<UnwoundStack> = if o.kernel_only {
        vec![UnwoundStack::default(); samples.len()]
    } else {
        samples
            .par_iter()
            .map_init(UnwindCache::default, |cache, (s, _)| {
                if let Some(b) = &bar {
                    b.inc(1);
                }
                unwinder.unwind(cache, s)
            })
            .collect()
    };
    crate::timing::mark("unwind");
    for st in &stacks {
        if let Some(end) = st.end {
            stats.dwarf_samples += 1;
            *stats.stack_ends.entry(format!("{end:?}")).or_insert(0) += 1;
        }
    }
    let used_maps: BTreeSet<MapId> = stacks
        .iter()
        .flat_map(|s| s.user.iter().filter_map(|l| l.map))
        .collect();
    let resolver = Resolver::new(rec, used_maps.iter().copied(), loader);
    let keys: Vec<Vec<Option<Key>>> = stacks
        .par_iter()
        .map(|s| s.user.iter().map(|l| resolver.resolve(l)).collect())
        .collect();
    crate::timing::mark("resolve");

    // Unique addresses per file, and unique kernel lookup addresses.
    let files = resolver.files();
    let mut per_file: Vec<Vec<Lookup>> = vec![Vec::new(); files.len()];
    for &(f, a) in keys.iter().flatten().flatten() {
        per_file[f as usize].push(a);
    }
    per_file.par_iter_mut().for_each(|v| {
        v.sort_unstable();
        v.dedup();
    });
    let mut kernel_addrs: Vec<u64> = if o.user_only {
        Vec::new()
    } else {
        samples
            .iter()
            .flat_map(|(s, _)| s.kernel.iter().copied())
            .collect()
    };
    kernel_addrs.par_sort_unstable();
    kernel_addrs.dedup();
    crate::timing::mark("unique addresses");

    if let Some(b) = &bar {
        b.set_message("symbolizing");
    }
    // Files in parallel, each loading its symbols and DWARF in parallel too (libc's DWARF
    // is the longest single job of the stage).
    let (file_infos, (kernel_infos, kernel_warning)) = rayon::join(
        || {
            per_file
                .par_iter()
                .enumerate()
                .map(|(f, addrs)| {
                    let file = &files[f];
                    match &file.source {
                        Some(Source::Elf { elf, debug }) => symbolize::symbolize_elf(
                            elf,
                            debug.as_deref(),
                            &file.dso,
                            addrs,
                            symbolize::dwarf_file(elf, debug.as_deref(), o.inline, o.lines),
                            o.inline,
                        ),
                        Some(Source::Jit(map)) => symbolize::symbolize_jit(map, addrs),
                        None => addrs
                            .iter()
                            .map(|_| AddrInfo {
                                frames: vec![FrameInfo::unknown(&file.dso)],
                                start: None,
                            })
                            .collect(),
                    }
                })
                .collect::<Vec<Vec<AddrInfo>>>()
        },
        || {
            if kernel_addrs.is_empty() {
                return (Vec::new(), None);
            }
            let (k, shift, warning) = kernel_symbols(rec, loader);
            let modules = rec.kernel_modules();
            let infos: Vec<AddrInfo> = kernel_addrs
                .iter()
                .map(|&a| {
                    let mut i = symbolize::symbolize_kernel(k.as_deref(), a.wrapping_add(shift));
                    i.start = i.start.map(|s| s.wrapping_sub(shift));
                    if let Some(module) = modules.name_of(a) {
                        for f in &mut i.frames {
                            module.clone_into(&mut f.dso);
                        }
                    }
                    i
                })
                .collect();
            (infos, warning)
        },
    );
    stats.warnings.extend(loader.problems());
    stats.warnings.extend(kernel_warning);
    crate::timing::mark("symbolize files + kernel");

    // One table of frames: ids given in file order, then address order (deterministic).
    let mut out = Symbolized {
        comms: rec.comms.clone(),
        events: rec.events.clone(),
        event: label,
        unit: o.event.unit(),
        ..Default::default()
    };
    let mut interned: FxHashMap<FrameInfo, u32> = FxHashMap::default();
    let mut intern = |f: &FrameInfo, frames: &mut Vec<FrameInfo>| -> u32 {
        if let Some(&id) = interned.get(f) {
            return id;
        }
        frames.push(f.clone());
        let id = (frames.len() - 1) as u32;
        interned.insert(f.clone(), id);
        id
    };
    let file_ids: Vec<Vec<Vec<u32>>> = file_infos
        .iter()
        .map(|infos| {
            infos
                .iter()
                .map(|i| {
                    i.frames
                        .iter()
                        .map(|f| intern(f, &mut out.frames))
                        .collect()
                })
                .collect()
        })
        .collect();
    let kernel_ids: Vec<u32> = kernel_infos
        .iter()
        .map(|i| intern(&i.frames[0], &mut out.frames))
        .collect();
    let mut unknown_ids: FxHashMap<&str, u32> = FxHashMap::default();
    for st in &stacks {
        for l in &st.user {
            let dso = resolver.dso_of(l);
            if !unknown_ids.contains_key(dso) {
                let id = intern(&FrameInfo::unknown(dso), &mut out.frames);
                unknown_ids.insert(dso, id);
            }
        }
    }
    let unknown: Vec<bool> = out.frames.iter().map(FrameInfo::is_unknown).collect();
    crate::timing::mark("intern frames");

    if let Some(b) = &bar {
        b.set_message("stacks");
    }
    let symbolized: Vec<(SymbolizedStack, u64, u64)> = samples
        .par_iter()
        .zip(stacks.par_iter().zip(keys.par_iter()))
        .map(|((s, weight), (st, keys))| {
            let mut frames = Vec::new();
            let mut addrs = Vec::new();
            for (loc, key) in st.user.iter().zip(keys).rev() {
                let found = key.and_then(|(f, a)| {
                    let i = per_file[f as usize].binary_search(&a).ok()?;
                    Some((&file_ids[f as usize][i], &file_infos[f as usize][i]))
                });
                match found {
                    Some((ids, info)) => {
                        frames.extend_from_slice(ids);
                        if o.addresses {
                            let (_, a) = key.expect("found means resolved");
                            let offset = info.start.map(|st| a.addr.wrapping_sub(st));
                            for (k, _) in ids.iter().enumerate() {
                                addrs.push(FrameAddr {
                                    addr: loc.addr,
                                    // Only the real (outer) function has an offset.
                                    offset: if k == 0 { offset } else { None },
                                });
                            }
                        }
                    }
                    None => {
                        frames.push(unknown_ids[resolver.dso_of(loc)]);
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
                    let i = kernel_addrs
                        .binary_search(&a)
                        .expect("every kernel address was looked up");
                    frames.push(kernel_ids[i]);
                    if o.addresses {
                        let start = kernel_infos[i].start;
                        addrs.push(FrameAddr {
                            addr: a,
                            offset: start.map(|st| a.wrapping_sub(st)),
                        });
                    }
                }
            }
            let n = frames.len() as u64;
            let unknown_n = frames.iter().filter(|&&f| unknown[f as usize]).count() as u64;
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
                    frames,
                    user_len,
                    addrs,
                },
                n,
                unknown_n,
            )
        })
        .collect();
    for ((st, n, u), count) in symbolized.into_iter().zip(&counts) {
        stats.frames += n * count;
        stats.unknown_frames += u * count;
        out.stacks.push(st);
    }
    crate::timing::mark("stacks");
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    out.stats = stats;
    if o.event == EventSel::Wakeup {
        let index = |name: &str| out.events.iter().position(|e| e == name);
        if let (Some(offcpu), Some(wakeup)) = (
            index(format::events::OFFCPU_EVENT),
            index(format::events::WAKEUP_EVENT),
        ) {
            crate::wakeups::join(&mut out, offcpu as u32, wakeup as u32);
        }
    }
    Ok(out)
}
