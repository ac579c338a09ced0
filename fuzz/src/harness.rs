//! What the fuzz targets do with each input. The regression test
//! (`analyze/tests/integration_tests/fuzz_inputs.rs`) runs the inputs kept in `fixtures/fuzz/`
//! through the same functions, so a fixed crash stays fixed.

use std::path::Path;

use analyze::resolve::Lookup;
use analyze::unwind::dwarf::UserRegs;
use analyze::unwind::dwarf::{ElfUnwindCache, ExecMapping, ProcessUnwinder, UnwindCache};

/// Records at most this many, so that a loop of tiny records ends.
const MAX_RECORDS: usize = 1 << 16;

/// perf.data bytes: the reader (repair scan and linux-perf-data), `analyze info`'s counting,
/// analyze's reading into a recording (the in-place parallel path and the record iterator),
/// merged and not, and the views over what was read ([`views`]). `scratch` is a directory of
/// this process's own.
pub fn perf_data(data: &[u8], scratch: &Path) {
    let name = Path::new("fuzz.data");
    if let Ok(mut r) = format::PerfFileReader::from_bytes(name, data.to_vec()) {
        let mut n = 0;
        while let Ok(Some(_)) = r.next_record() {
            n += 1;
            if n > MAX_RECORDS {
                break;
            }
        }
    }
    let path = scratch.join("fuzz.data");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let _ = analyze::views::info::summarize(&path);
    for merge in [true, false] {
        if let Ok(r) = format::PerfFileReader::from_bytes(name, data.to_vec()) {
            if let Ok(rec) = analyze::read::read_with(r, merge, &mut |_| {}) {
                if !merge {
                    views(&rec, &path);
                }
            }
        }
    }
}

/// The views whose work depends on the numbers a file holds (times, periods, counts):
/// script's lines (traced events' print formats too), heatmaps of every kind of event, the
/// pprof, Firefox and speedscope exports, a diff of the profile with itself, and `analyze
/// cache` and `sched`. Frames are named from the files the
/// recording names that are on this machine (functions only: no DWARF).
fn views(rec: &analyze::read::Recording, path: &Path) {
    use analyze::pipeline::{self, Options};
    use analyze::read::EventSel;
    use analyze::views::{self, export, heatmap::Heatmap};
    let sink = std::io::sink;
    let loader = analyze::files::Loader::with_sources(Default::default());
    let (span, _) = rec.stray_times();
    let span = span.unwrap_or((0, 0));
    for event in ["cpu", "offcpu", "runq", "io", "wall"] {
        let event = EventSel::parse(event);
        let options = Options {
            per_sample: true,
            ..Default::default()
        };
        let options = Options { event, ..options };
        if let Ok(pipeline::Selected { samples, unit, .. }) =
            pipeline::select_samples(rec, &options)
        {
            let map = if unit == "ns" {
                Heatmap::latency(&samples, span)
            } else {
                Heatmap::offsets(&samples, span, 50)
            };
            let _ = views::heatmap::write_svg(&map, "fuzz", "samples", sink());
        }
    }
    // script's lines: every event's, each traced event's payload by the print format the
    // file holds.
    let every = Options {
        event: EventSel::All,
        timeline: true,
        inline: false,
        lines: false,
        ..Default::default()
    };
    if let Ok(s) = pipeline::symbolize(rec, &every, &loader) {
        if let Ok(pipeline::Selected { samples, .. }) = pipeline::select_samples(rec, &every) {
            if samples.len() == s.timeline.len() {
                let payloads = views::trace::Payloads::new(rec, Box::new(|_| None));
                let payload = |i: usize, out: &mut std::io::Sink| payloads.write(samples[i].0, out);
                let _ = views::script::write_script(&s, payload, &mut sink());
            }
        }
    }
    let options = Options {
        timeline: true,
        inline: false,
        lines: false,
        ..Default::default()
    };
    if let Ok(s) = pipeline::symbolize(rec, &options, &loader) {
        let cx = export::Context {
            measure: "samples".into(),
            span,
            ..Default::default()
        };
        let reasons = analyze::views::net::Reasons::default();
        let spans = export::firefox::spans(rec, &[], (&[], &reasons), &options);
        let _ = export::firefox::write(&s, &spans, &cx, sink());
        let _ = export::speedscope::write(&s, &cx, sink());
        let profile = analyze::aggregate::aggregate(s);
        let _ = export::pprof::write(&profile, &cx, sink());
        let folded = views::folded::folded(&profile, false);
        if let Ok(lines) = views::diff::folded(&folded, &folded, true) {
            let _ = views::diff::write_svg(&lines, "fuzz", &profile.unit, sink());
        }
        let _ = views::diff::table(&views::diff::changes(&profile, &profile), 10);
    }
    if let Ok(intervals) = views::cache::read_intervals(path) {
        let _ = views::cache::report(&intervals);
    }
    let _ = views::sched::report(&views::sched::waits(rec), 10);
}

/// ELF bytes as a recorded binary: loaded, its symbols, lines and inline frames looked up at
/// addresses across its segments, its code disassembled there, and stacks unwound through it
/// with its CFI (the stack words taken from the input's end).
pub fn elf(data: &[u8], scratch: &Path) {
    let path = scratch.join("prog");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let name = path.to_string_lossy().into_owned();
    // No sources beyond the file itself: nothing else on the machine is read.
    let loader = analyze::files::Loader::with_sources(Default::default());
    let Some(elf) = loader.elf(&name, None) else {
        return;
    };
    let mut addrs: Vec<u64> = elf
        .segments
        .iter()
        .take(16)
        .flat_map(|s| (0..8u64).map(move |i| s.svma.wrapping_add(i * (s.file_size / 8))))
        .collect();
    addrs.sort_unstable();
    addrs.dedup();
    let lookups: Vec<Lookup> = addrs
        .iter()
        .map(|&addr| Lookup {
            addr,
            is_return: addr & 1 == 1,
        })
        .collect();
    let dwarf = analyze::symbolize::dwarf_file(&elf, None, true, true);
    // Names by address too: the unwind tables of a damaged file are parsed for them. With
    // lines (addr2line) and without (inline frames by a walk of the units' entries).
    for lines in [true, false] {
        let naming = analyze::symbolize::Naming {
            inline: true,
            by_address: true,
            lines,
        };
        let _ = analyze::symbolize::symbolize_elf(&elf, None, "fuzz", &lookups, dwarf, naming);
    }
    let _ = analyze::symbolize::source_locations(&elf, None, &addrs);
    for &a in addrs.iter().take(8) {
        if let Some((_, start, end)) = analyze::symbolize::function_at(&elf, None, a) {
            if let Some(code) = elf.bytes_at(start, end.min(start.saturating_add(4096))) {
                let none = |_: u64| None;
                let _ = analyze::views::annotate::disasm::disassemble(
                    code,
                    start,
                    64,
                    analyze::views::annotate::disasm::Syntax::Att,
                    &none,
                );
            }
        }
    }

    // The file mapped whole at 0x400000; stacks from every address looked up.
    let base = 0x40_0000u64;
    let maps = [ExecMapping {
        start: base,
        end: base + (data.len() as u64).max(4096).div_ceil(4096) * 4096,
        pgoff: 0,
        path: path.clone(),
        build_id: None,
        py_trampolines: false,
    }];
    let mut elves = ElfUnwindCache::new(&loader);
    let unwinder = ProcessUnwinder::new(&maps, &mut elves);
    let stack = &data[data.len().saturating_sub(1024)..];
    let mut cache = UnwindCache::default();
    let mut out = Vec::new();
    for &a in addrs.iter().take(16) {
        out.clear();
        let sp = 0x7ff0_0000u64;
        let regs = UserRegs {
            ip: base.wrapping_add(a),
            sp,
            bp: sp.wrapping_add(64),
        };
        let _ = unwinder.unwind(&mut cache, regs, stack, &mut out);
    }
}
