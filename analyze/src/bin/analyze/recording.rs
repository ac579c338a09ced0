//! Reading a recording for a subcommand: its loader, the files it lists loaded meanwhile,
//! the pipeline's warnings and summary line on stderr.

use std::path::{Path, PathBuf};

use analyze::aggregate::{self, Profile};
use analyze::files::Loader;
use analyze::pipeline;
use analyze::read::{EventSel, Recording, Weighed};
use analyze::symbolize::Symbolized;

use analyze::cli::Select;

/// A loader for the files of a recording opened from `input`: its archive's first, if it
/// came from one, then `symfs` and the sources the environment names.
pub fn loader_for(input: &analyze::files::input::Input, symfs: Option<PathBuf>) -> Loader {
    Loader::with_sources(analyze::files::Sources {
        archive: input.archive.clone(),
        symfs,
        ..analyze::files::Sources::from_env()
    })
}

/// Whether a recording whose header lists `ids` as the files its samples hit may have
/// kernel frames: it lists none (no BUILD_ID feature: nothing known), or the kernel or a
/// module among them.
fn kernel_may_be_hit(ids: &analyze::read::BuildIds) -> bool {
    ids.is_empty()
        || ids
            .keys()
            .any(|p| (p.starts_with('[') && p != "[vdso]") || p.contains(".ko"))
}

/// Reads the recording `select` names (the files it lists loading meanwhile) and runs
/// `stages` on it; the recording's notes on stderr.
pub fn with_recording<T>(
    select: &Select,
    options: &pipeline::Options,
    stages: impl FnOnce(&Recording, &Loader) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let symfs = select.filter.stacks.symfs.as_deref();
    with_recording_files(&select.input, symfs, options, true, stages)
}

/// [`with_recording`] of the recording at `input` (files under `symfs` first), loading the
/// files the recording lists only if `load_files` (views without stacks need none).
pub fn with_recording_files<T>(
    input: &Path,
    symfs: Option<&Path>,
    options: &pipeline::Options,
    load_files: bool,
    stages: impl FnOnce(&Recording, &Loader) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    analyze::timing::mark("start");
    let input = analyze::files::input::open(input)?;
    let loader = loader_for(&input, symfs.map(Path::to_path_buf));
    // The files the recording lists start loading while it is read (symbol tables, and
    // DWARF where inline frames or lines of user frames are wanted: libc's takes the longest
    // of anything): jobs of the thread pool, which fill the cores that reading leaves idle.
    let wants_dwarf = options.inline || options.lines;
    let (rec, out) = rayon::in_place_scope(|jobs| -> anyhow::Result<_> {
        let loader = &loader;
        let rec = std::thread::scope(|scope| {
            let mut files_known = |ids: &analyze::read::BuildIds| {
                // Kernel symbols take milliseconds to read even from the cache, and reading
                // the file keeps one CPU busy: read them meanwhile, unless the files the
                // recording lists as hit leave the kernel out (perf's, when no sample was in
                // it: perf report reads none then). A kernel frame met anyway reads them when
                // it is named.
                if !options.user_only && load_files && kernel_may_be_hit(ids) {
                    scope.spawn(|| {
                        let t = std::time::Instant::now();
                        loader.kallsyms();
                        if analyze::timing::enabled() {
                            eprintln!(
                                "analyze: kernel symbols {:.1} ms (beside reading)",
                                t.elapsed().as_secs_f64() * 1e3
                            );
                        }
                    });
                }
                if options.kernel_only || !load_files {
                    return;
                }
                // Files no local source has, from debuginfod (when the user named servers),
                // before anything asks for them.
                loader.fetch_missing(ids);
                let mut files: Vec<(String, Vec<u8>)> =
                    ids.iter().map(|(p, id)| (p.clone(), id.clone())).collect();
                files.sort();
                for (path, id) in files {
                    jobs.spawn(move |_| pipeline::prepare_file(loader, &path, &id, wants_dwarf));
                }
            };
            // Off-CPU samples matched to socket waits by time are read one by one.
            let names: Vec<String> = (0..input.reader.perf_file().event_attributes().len())
                .map(|i| input.reader.event_name(i))
                .collect();
            let merge = !options.reads_each_sample() && !options.labels_peers(&names);
            analyze::read::read_with(input.reader, merge, &mut files_known)
        })?;
        for n in &rec.notes {
            eprintln!("analyze: warning: {n}");
        }
        let out = stages(&rec, loader)?;
        Ok((rec, out))
    })?;
    // The recording and the loaded files are not needed any more: the process exit frees
    // them at once, instead of a walk over every sample and mapping (a tenth of a run).
    std::mem::forget(rec);
    std::mem::forget(loader);
    Ok(out)
}

/// Reads, unwinds and symbolizes what `select` asks for; warnings and the summary on stderr.
pub fn symbolized(select: &Select, addresses: bool, lines: bool) -> anyhow::Result<Symbolized> {
    symbolized_with(select, &select.options(addresses, lines))
}

pub fn symbolized_with(select: &Select, options: &pipeline::Options) -> anyhow::Result<Symbolized> {
    if select.filter.depth.is_some() && !matches!(options.event, EventSel::Chain(_)) {
        anyhow::bail!("--depth is for --event chain (how many wakers deep its chains go)");
    }
    let options = options.clone();
    with_recording(select, &options, |rec, loader| {
        let s = symbolize_noting(rec, &options, loader)?;
        summary(&s, rec, loader);
        Ok(s)
    })
}

/// The pipeline's symbolized samples of `rec` as `options` asks, its warnings on stderr.
pub fn symbolize_noting(
    rec: &Recording,
    options: &pipeline::Options,
    loader: &Loader,
) -> anyhow::Result<Symbolized> {
    let s = pipeline::symbolize(rec, options, loader)?;
    for w in &s.stats.warnings {
        eprintln!("analyze: warning: {w}");
    }
    Ok(s)
}

/// [`symbolize_noting`] for views that print each of `samples` (those `options` selects)
/// with its stack: the timeline's entry at the sample's index (`options.timeline`). An
/// error where the two do not line up.
pub fn stacks_of_each(
    rec: &Recording,
    options: &pipeline::Options,
    loader: &Loader,
    samples: &[Weighed<'_>],
) -> anyhow::Result<Symbolized> {
    let s = symbolize_noting(rec, options, loader)?;
    anyhow::ensure!(
        s.timeline.len() == samples.len(),
        "the stacks ({}) are not the samples' ({})",
        s.timeline.len(),
        samples.len()
    );
    Ok(s)
}

/// The summary line: samples, frames, how many unknown, how DWARF stacks ended, lost events;
/// then the hint about stripped binaries, if it is due.
pub fn summary(s: &Symbolized, rec: &Recording, loader: &Loader) {
    let st = &s.stats;
    let pct = if st.frames == 0 {
        0.0
    } else {
        100.0 * st.unknown_frames as f64 / st.frames as f64
    };
    let samples = if s.event == analyze::read::select::EVERY_EVENT {
        format!("samples of {}", s.event)
    } else {
        format!("{} samples", s.event)
    };
    let mut line = format!(
        "analyze: {} {samples}, {} frames, {} [unknown] ({pct:.1}%)",
        st.samples, st.frames, st.unknown_frames
    );
    if st.by_address_frames > 0 {
        line.push_str(&format!(
            ", {} named by address ({:.1}%)",
            st.by_address_frames,
            100.0 * st.by_address_frames as f64 / st.frames as f64
        ));
    }
    if st.dwarf_samples > 0 {
        let ends: Vec<String> = st
            .stack_ends
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        line.push_str(&format!(
            "; DWARF-unwound {} (stack ends: {})",
            st.dwarf_samples,
            ends.join(", ")
        ));
    }
    if rec.lost > 0 {
        line.push_str(&format!("; {} events lost while recording", rec.lost));
        // The selected events' own, where the file says which were whose.
        let selected: std::collections::BTreeSet<usize> =
            s.stacks.iter().map(|st| st.event as usize).collect();
        let own: u64 = selected
            .iter()
            .filter_map(|&e| rec.lost_by_event.get(e))
            .sum();
        if own > 0 && own < rec.lost {
            line.push_str(&format!(" ({own} of them {})", s.event));
        }
    }
    eprintln!("{line}");
    stripped_hint(s, loader);
}

/// The hint about stripped binaries (once per run, when many frames have no symbol name).
fn stripped_hint(s: &Symbolized, loader: &Loader) {
    static GIVEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if GIVEN.load(std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let codename = analyze::files::packages::debian_codename();
    let lines = analyze::views::stripped::hint(
        &s.stats,
        codename.as_deref(),
        loader.sources.debuginfod.is_some(),
    );
    if !lines.is_empty() {
        GIVEN.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    for l in lines {
        eprintln!("analyze: hint: {l}");
    }
}

pub fn profile(select: &Select, lines: bool) -> anyhow::Result<Profile> {
    Ok(aggregate::aggregate(symbolized(select, false, lines)?))
}

#[cfg(test)]
mod tests {
    use super::kernel_may_be_hit;

    #[test]
    fn kernel_symbols_are_read_ahead_unless_the_files_hit_leave_the_kernel_out() {
        let ids = |paths: &[&str]| paths.iter().map(|p| (p.to_string(), vec![1])).collect();
        assert!(kernel_may_be_hit(&ids(&[])));
        assert!(kernel_may_be_hit(&ids(&[
            "/usr/bin/x",
            "[kernel.kallsyms]"
        ])));
        assert!(kernel_may_be_hit(&ids(&[
            "/lib/modules/6.1.0/kernel/net/netfilter/nf_tables.ko.xz"
        ])));
        assert!(!kernel_may_be_hit(&ids(&["/usr/bin/x", "[vdso]"])));
    }
}
