//! The driver: runs the stages over a recording, in parallel, for the views above it.
//!
//! select (read) -> unwind -> resolve -> symbolize -> stacks ([`Symbolized`]); views then
//! aggregate or walk the stacks. Stacks are unwound and resolved in parallel; unique
//! addresses are symbolized once, per file in parallel (kernel symbols meanwhile); then each
//! sample's frames become ids into one table of frames, in parallel again. Every merge is
//! keyed and sorted, and results are collected in sample order, so the output does not
//! depend on the thread count. Rayon lives here and in reading (the parallel path, and
//! grouping identical samples).

mod kernel;
mod options;
mod resolved;
mod stacks;
mod unwound;

use std::collections::BTreeMap;

use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::files::Loader;
pub use crate::read::Selected;
use crate::read::{self, MapId, Recording};
use crate::resolve::{Key, Lookup, Resolver, Source};
use crate::symbolize::{self, AddrInfo, FrameInfo, Stats, Symbolized, TimedSample};
use crate::unwind::{Unwinder, UnwoundStack};
use crate::Error;
pub use kernel::kernel_namer;
pub use options::Options;
use resolved::NO_SLOT;
pub use resolved::{Resolved, Symbols};
use unwound::Unwound;

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

/// Reads nothing: turns the samples of `rec` that `o` selects into symbolized stacks
/// (select -> unwind -> resolve -> symbolize -> stacks).
pub fn symbolize(rec: &Recording, o: &Options, loader: &Loader) -> Result<Symbolized, Error> {
    // Off-CPU stacks labelled by peer are matched to their socket waits by time: kept apart.
    let each;
    let o = if o.labels_peers(&rec.events) && !o.keeps_each_sample() {
        each = Options {
            per_sample: true,
            ..o.clone()
        };
        &each
    } else {
        o
    };
    let resolved = resolve(rec, o, loader)?;
    let symbols = symbolize_addresses(rec, &resolved, o, loader);
    Ok(stacks::symbolized(rec, resolved, symbols, o))
}

/// The first stage alone, for views of when and how much rather than where (heatmaps): the
/// samples `o` selects with their weights, what was selected and what the weights count.
pub fn select_samples<'r>(rec: &'r Recording, o: &Options) -> Result<Selected<'r>, Error> {
    read::select(rec, &o.selection())
}

/// Selects the samples, unwinds their user stacks and resolves every user frame.
pub fn resolve<'r>(
    rec: &'r Recording,
    o: &Options,
    loader: &Loader,
) -> Result<Resolved<'r>, Error> {
    let Selected {
        samples,
        label,
        unit,
    } = read::select(rec, &o.selection())?;
    crate::timing::mark("select");
    let mut stats = Stats {
        samples: samples.iter().map(|(s, _)| s.count).sum(),
        ..Default::default()
    };
    // Per-sample output (script's times and addresses, wakeups matched by time) keeps every
    // sample; profiles only need each distinct stack once, with the weights summed.
    let keep_each = o.keeps_each_sample();
    let mut timeline = Vec::new();
    let (samples, counts) = if keep_each {
        let counts = samples.iter().map(|(s, _)| s.count).collect();
        (samples, counts)
    } else if o.timeline {
        // Each sample's time, pointing at its group (unwinding must not merge groups
        // further: their indices are the timeline's).
        let (kept, counts, members) = read::select::group_identical_members(&samples);
        timeline = samples
            .iter()
            .zip(members)
            .map(|((s, weight), stack)| TimedSample {
                stack,
                time: s.time,
                cpu: s.cpu,
                period: s.period,
                weight: *weight,
            })
            .collect();
        (kept, counts)
    } else {
        read::select::group_identical(samples)
    };
    crate::timing::mark("group");
    let bar = progress_bar(o, samples.len() as u64);
    if let Some(b) = &bar {
        b.set_message("unwinding");
    }

    let unwinder = Unwinder::new(rec, samples.iter().map(|(s, _)| *s), loader);
    stats.warnings.extend(unwinder.not_unwound.clone());
    let progress = |n: u64| {
        if let Some(b) = &bar {
            b.inc(n);
        }
    };
    let unwound = if o.kernel_only {
        Unwound {
            stacks: vec![UnwoundStack::default(); samples.len()],
            samples,
            counts,
            ends: BTreeMap::new(),
        }
    } else if keep_each || o.timeline {
        unwound::unwind_each(&unwinder, samples, counts, &progress)
    } else {
        unwound::unwind_grouped(&unwinder, samples, counts, &progress)
    };
    for (end, n) in &unwound.ends {
        stats.dwarf_samples += n;
        *stats.stack_ends.entry(format!("{end:?}")).or_insert(0) += n;
    }
    let Unwound {
        samples,
        counts,
        stacks,
        ..
    } = unwound;
    crate::timing::mark("unwind");
    // Marked, not collected and sorted: a deep recursion's hundreds of thousands of frames
    // lie in a handful of mappings.
    let mut used = vec![false; rec.mappings.len()];
    for l in stacks.iter().flat_map(|s| &s.user) {
        if let Some(m) = l.map() {
            used[m as usize] = true;
        }
    }
    let used_maps = (0..rec.mappings.len() as MapId).filter(|&m| used[m as usize]);
    let resolver = Resolver::new(rec, used_maps, loader);
    let keys: Vec<Vec<Option<Key>>> = stacks
        .par_iter()
        .map(|s| resolver.resolve_all(&s.user))
        .collect();
    crate::timing::mark("resolve");
    Ok(Resolved {
        label,
        unit,
        samples,
        counts,
        timeline,
        stacks,
        keys,
        resolver,
        stats,
        bar,
    })
}

/// Symbolizes the unique addresses of `r`: files in parallel, each loading its symbols and
/// DWARF in parallel too (libc's DWARF is the longest single job of the stage), the kernel's
/// meanwhile.
pub fn symbolize_addresses(
    rec: &Recording,
    r: &Resolved<'_>,
    o: &Options,
    loader: &Loader,
) -> Symbols {
    let files = r.resolver.files();
    // Frames repeat (a deep recursion's: 281k frames, 10k addresses): each is numbered once
    // as it is met, and only the unique ones sorted; every frame then gets its address's
    // place in its file's sorted list (`slots`), so that the stacks stage searches nothing.
    let mut first: FxHashMap<Key, u32> = FxHashMap::default();
    let mut met: Vec<Key> = Vec::new();
    let mut unresolved: Vec<(u32, u32)> = Vec::new();
    let mut slots: Vec<Vec<u32>> = r
        .keys
        .iter()
        .enumerate()
        .map(|(i, keys)| {
            keys.iter()
                .enumerate()
                .map(|(k, key)| match key {
                    Some(key) => *first.entry(*key).or_insert_with(|| {
                        met.push(*key);
                        (met.len() - 1) as u32
                    }),
                    None => {
                        unresolved.push((i as u32, k as u32));
                        NO_SLOT
                    }
                })
                .collect()
        })
        .collect();
    drop(first);
    let mut sorted: Vec<Vec<(Lookup, u32)>> = vec![Vec::new(); files.len()];
    for (i, &(f, a)) in met.iter().enumerate() {
        sorted[f as usize].push((a, i as u32));
    }
    sorted.par_iter_mut().for_each(|v| v.sort_unstable());
    let mut place = vec![0u32; met.len()];
    for v in &sorted {
        for (pos, &(_, i)) in v.iter().enumerate() {
            place[i as usize] = pos as u32;
        }
    }
    slots.par_iter_mut().for_each(|s| {
        for slot in s.iter_mut().filter(|s| **s != NO_SLOT) {
            *slot = place[*slot as usize];
        }
    });
    let per_file: Vec<Vec<Lookup>> = sorted
        .into_iter()
        .map(|v| v.into_iter().map(|(a, _)| a).collect())
        .collect();
    let mut kernel_addrs: Vec<u64> = Vec::new();
    if !o.user_only {
        let mut seen: FxHashSet<u64> = FxHashSet::default();
        for (s, _) in &r.samples {
            kernel_addrs.extend(s.kernel.iter().filter(|&&a| seen.insert(a)));
        }
    }
    kernel_addrs.par_sort_unstable();
    crate::timing::mark("unique addresses");

    if let Some(b) = &r.bar {
        b.set_message("symbolizing");
    }
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
                            symbolize::Naming {
                                inline: o.inline,
                                by_address: o.address_names,
                                lines: o.lines,
                            },
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
        || kernel::symbolize_kernel(rec, &kernel_addrs, loader),
    );
    let mut warnings = loader.problems();
    warnings.extend(kernel_warning);
    crate::timing::mark("symbolize files + kernel");
    Symbols {
        per_file,
        slots,
        unresolved,
        file_infos,
        kernel_addrs,
        kernel_infos,
        warnings,
    }
}

/// Opens the file at `path` (if it is there and has build id `build_id`) and its debug file,
/// and prepares what symbolizing it needs (symbol tables; `with_dwarf`, its DWARF inflated):
/// what the driver starts while the recording is read, for the files the recording lists.
pub fn prepare_file(loader: &Loader, path: &str, build_id: &[u8], with_dwarf: bool) {
    if !path.starts_with('/') {
        return;
    }
    let Some(elf) = loader.elf_ahead(path, Some(build_id)) else {
        return;
    };
    let debug = loader.debug_file_ahead(&elf);
    symbolize::prepare(&elf, debug.as_deref(), with_dwarf);
}
