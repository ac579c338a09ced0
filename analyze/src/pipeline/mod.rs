//! The driver: select -> unwind -> resolve -> symbolize -> (aggregate). Rayon lives here and
//! in read/parallel.rs.
//!
//! Stacks are unwound and resolved in parallel; unique addresses are symbolized once, per
//! file in parallel (kernel symbols meanwhile); then each sample's frames become ids into one
//! table of frames, in parallel again. Every merge is keyed and sorted, and results are
//! collected in sample order, so the output does not depend on the thread count.

mod select;
mod stacks;
pub mod time_range;
mod unwound;

use unwound::Unwound;

use std::collections::{BTreeMap, BTreeSet};

use rayon::prelude::*;

use crate::loader::{self, Loader};
use crate::read::{MapId, Recording};
use crate::resolve::{Key, Lookup, Resolver, Source};
use crate::symbolize::{self, AddrInfo, FrameInfo};
pub use crate::symbolized::{FrameAddr, Stats, Symbolized, SymbolizedStack, TimedSample};
use crate::unwind::{Unwinder, UnwoundStack};
use crate::Error;
pub use select::Weighed;

/// Which samples make the profile, and what a sample weighs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventSel {
    /// The sampling event (the first on-CPU event of the file that has samples); weight 1.
    Cpu,
    /// `offcpu-time` samples; weight = nanoseconds off the CPU.
    OffCpu,
    /// `runq-time` samples: the part of off-CPU intervals spent waiting for a CPU; weight =
    /// nanoseconds, charged to where the thread was preempted or blocked.
    Runq,
    /// `fault-time` samples: page faults that had to read; weight = nanoseconds the fault
    /// took, at the stack that faulted. (`Wall` has that time already: a thread waiting in
    /// a fault is off the CPU.)
    Fault,
    /// bpfperf block I/O samples; weight = I/O latency in nanoseconds.
    Io,
    /// On-CPU samples weighted by their period (ns) plus off-CPU ns: where wall time went.
    Wall,
    /// `offcpu-time` samples joined with their wakers' stacks (see [`crate::wakeups`]).
    Wakeup,
    /// Samples of the event of that name (`task-clock`, `sched:sched_switch`); weight 1.
    Named(String),
    /// Every sample of every event, weight 1 (what an archive must cover).
    All,
}

impl EventSel {
    pub fn parse(s: &str) -> EventSel {
        match s {
            "cpu" => EventSel::Cpu,
            "offcpu" => EventSel::OffCpu,
            "runq" => EventSel::Runq,
            "fault" => EventSel::Fault,
            "io" => EventSel::Io,
            "wall" => EventSel::Wall,
            "wakeup" => EventSel::Wakeup,
            "all" => EventSel::All,
            other => EventSel::Named(other.to_string()),
        }
    }

    /// What the weights measure, as exports name their sample types and tracks: `samples`
    /// for counted events, else the time's kind.
    pub fn measure(&self) -> &'static str {
        match self {
            EventSel::Cpu | EventSel::Named(_) | EventSel::All => "samples",
            EventSel::OffCpu | EventSel::Wakeup => "offcpu",
            EventSel::Runq => "runq",
            EventSel::Fault => "fault",
            EventSel::Io => "io",
            EventSel::Wall => "wall",
        }
    }

    /// What the weights count.
    pub fn unit(&self) -> &'static str {
        match self {
            EventSel::Cpu | EventSel::Named(_) | EventSel::All => "samples",
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
    /// Only samples in these stretches of time (`--time`).
    pub time: Option<time_range::TimeRanges>,
    /// Keep every sample apart (views per sample: script, heatmaps), never merged by stack.
    pub per_sample: bool,
    /// Views of time (the Firefox Profiler's tracks, speedscope's Time Order): every sample's
    /// time in [`Symbolized::timeline`], each distinct stack unwound and symbolized once.
    pub timeline: bool,
    /// Look up source lines (`file:line`, for `--sort srcline`); inline frames need them too.
    pub lines: bool,
    /// Keep each frame's address and symbol offset (for `script`).
    pub addresses: bool,
    /// Draw a progress bar on stderr (only when it is a terminal).
    pub progress: bool,
}

impl Options {
    /// Whether views need every sample apart from the others (script's times and
    /// addresses, wakeups matched by time, heatmaps); else identical stacks become one.
    pub fn keeps_each_sample(&self) -> bool {
        self.per_sample || (self.addresses && !self.timeline) || self.event == EventSel::Wakeup
    }

    /// Whether reading must keep every sample with its own time: identical samples merged
    /// while reading keep the first one's time only.
    pub fn reads_each_sample(&self) -> bool {
        self.keeps_each_sample() || self.time.is_some() || self.timeline
    }
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
            time: None,
            per_sample: false,
            timeline: false,
            lines: true,
            addresses: false,
            progress: false,
        }
    }
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

/// Kernel symbols, if the recording's kernel is the one they are of (the running one, or the
/// archive's), and the shift from recorded
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
    match loader.kallsyms_origin() {
        loader::KallsymsOrigin::Running => {
            if let (Some(want), Some(have)) = (recorded, loader::running_kernel_build_id()) {
                if !loader::build_ids_match(want, &have) {
                    return other_kernel("build ids differ".into());
                }
            } else if let (Some(theirs), Some(ours)) =
                (&rec.os_release, loader::running_kernel_release())
            {
                if *theirs != ours {
                    return other_kernel(format!("it ran {theirs}, this machine {ours}"));
                }
            }
        }
        loader::KallsymsOrigin::Archive(id) => {
            if recorded.is_some_and(|want| !loader::hex(want).starts_with(&id)) {
                return other_kernel("the archive's kernel symbols are another kernel's".into());
            }
        }
        // The user named the file: theirs to choose.
        loader::KallsymsOrigin::File(_) => {}
    }
    let Some(k) = loader.kallsyms() else {
        return (None, 0, None);
    };
    let shift = k.shift(rec.kernel_mapping());
    (Some(k), shift, None)
}

/// What the unwind and resolve stages hand on: the selected samples, each with its user frames
/// unwound and resolved to (file, address in the file). Kernel frames need neither stage.
pub struct Resolved<'r> {
    /// What was selected, as views name it (`cpu-clock`, `off-CPU`).
    pub label: String,
    /// The selected samples (identical stacks merged unless every sample is wanted) and their
    /// weights.
    pub samples: Vec<Weighed<'r>>,
    /// How many recorded samples each of `samples` stands for.
    pub counts: Vec<u64>,
    /// With [`Options::timeline`] (and samples grouped): every selected sample, pointing
    /// into `samples`.
    pub timeline: Vec<TimedSample>,
    /// Aligned with `samples`: the user frames, innermost first.
    pub stacks: Vec<UnwoundStack>,
    /// Aligned with `stacks`: each user frame's lookup key, `None` where no file tells.
    pub keys: Vec<Vec<Option<Key>>>,
    pub resolver: Resolver<'r>,
    pub stats: Stats,
    bar: Option<indicatif::ProgressBar>,
}

/// What the symbolize stage hands on: every unique address of the resolved stacks with what
/// it symbolizes to, per file (sorted, for binary search) and for the kernel.
pub struct Symbols {
    pub per_file: Vec<Vec<Lookup>>,
    /// Aligned with `per_file`.
    pub file_infos: Vec<Vec<AddrInfo>>,
    pub kernel_addrs: Vec<u64>,
    /// Aligned with `kernel_addrs`.
    pub kernel_infos: Vec<AddrInfo>,
    /// Files that could not be used, a kernel that is not this machine's.
    pub warnings: Vec<String>,
}

impl Symbols {
    /// What a resolved user frame symbolizes to (every key of the stacks was looked up).
    pub fn user(&self, (file, lookup): Key) -> Option<&AddrInfo> {
        let i = self.per_file[file as usize].binary_search(&lookup).ok()?;
        Some(&self.file_infos[file as usize][i])
    }

    /// What a kernel address of the stacks symbolizes to.
    pub fn kernel(&self, addr: u64) -> Option<&AddrInfo> {
        let i = self.kernel_addrs.binary_search(&addr).ok()?;
        Some(&self.kernel_infos[i])
    }
}

/// Reads nothing: turns the samples of `rec` that `o` selects into symbolized stacks
/// (select -> unwind -> resolve -> symbolize -> stacks).
pub fn symbolize(rec: &Recording, o: &Options, loader: &Loader) -> Result<Symbolized, Error> {
    let resolved = resolve(rec, o, loader)?;
    let symbols = symbolize_addresses(rec, &resolved, o, loader);
    Ok(stacks::symbolized(rec, resolved, &symbols, o))
}

/// The first stage alone, for views of when and how much rather than where (heatmaps): the
/// samples `o` selects with their weights, and what was selected.
pub fn select_samples<'r>(
    rec: &'r Recording,
    o: &Options,
) -> Result<(Vec<Weighed<'r>>, String), Error> {
    select::select(rec, o)
}

/// Selects the samples, unwinds their user stacks and resolves every user frame.
pub fn resolve<'r>(
    rec: &'r Recording,
    o: &Options,
    loader: &Loader,
) -> Result<Resolved<'r>, Error> {
    let (samples, label) = select::select(rec, o)?;
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
        let (kept, counts, members) = select::group_identical_members(&samples);
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
        select::group_identical(samples)
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
    Ok(Resolved {
        label,
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
    let mut per_file: Vec<Vec<Lookup>> = vec![Vec::new(); files.len()];
    for &(f, a) in r.keys.iter().flatten().flatten() {
        per_file[f as usize].push(a);
    }
    per_file.par_iter_mut().for_each(|v| {
        v.sort_unstable();
        v.dedup();
    });
    let mut kernel_addrs: Vec<u64> = if o.user_only {
        Vec::new()
    } else {
        r.samples
            .iter()
            .flat_map(|(s, _)| s.kernel.iter().copied())
            .collect()
    };
    kernel_addrs.par_sort_unstable();
    kernel_addrs.dedup();
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
        || symbolize_kernel(rec, &kernel_addrs, loader),
    );
    let mut warnings = loader.problems();
    warnings.extend(kernel_warning);
    crate::timing::mark("symbolize files + kernel");
    Symbols {
        per_file,
        file_infos,
        kernel_addrs,
        kernel_infos,
        warnings,
    }
}

/// The kernel's frames at `addrs` (module names for addresses in modules), and why they are
/// `[unknown]` if the recording's kernel is not this one.
fn symbolize_kernel(
    rec: &Recording,
    addrs: &[u64],
    loader: &Loader,
) -> (Vec<AddrInfo>, Option<String>) {
    if addrs.is_empty() {
        return (Vec::new(), None);
    }
    let (k, shift, warning) = kernel_symbols(rec, loader);
    let modules = rec.kernel_modules();
    let infos = addrs
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
}
