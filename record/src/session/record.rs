//! One recording from start to end: start the probes, run the workload, merge BPF events and
//! side-band facts by time into rounds of the perf.data file, finish with features and build
//! ids.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use format::Features;
use std::collections::HashMap;

use super::dumps::DumpCounts;
use super::phases::Phases;
use super::runtimes::{ask_jvm_maps, flag_jvms, watch_python, workload_env};
use super::settings::{
    aggregate_entries, io_unseen_every, net_unseen_every, offcpu_unseen_every, test_setting,
};
use super::summary::Summary;
use super::workload;
use crate::capture::item::Item;
use crate::capture::recorder::Recorder;
use crate::capture::take::{on_chosen_cpu, take_aggregated, take_cache_counts, GlueStripper};
use crate::config::{Config, Target};
use crate::host::{self, monotonic_ns};
use crate::output::files::Files;
use crate::output::rotation::Rotation;
use crate::sideband::{kernel, procfs, TimedFact};

/// How far behind "now" a round ends, so that events still being written on other CPUs
/// land in the next round instead of arriving older than a finished round.
const ROUND_SLACK_NS: u64 = 20_000_000;
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Page-cache counts are taken this often (cachestat's interval).
const CACHE_INTERVAL_NS: u64 = 1_000_000_000;

pub fn record(cfg: &Config) -> anyhow::Result<Summary> {
    let mut phases = Phases::new(cfg.verbose);
    // Reading /proc/kallsyms takes tens of milliseconds: meanwhile, load the probes.
    let kernel_symbols = std::thread::spawn(crate::sideband::kallsyms::symbols);
    host::install_signal_handlers();
    host::mount_tracefs();
    // Any event is resolved before anything runs: a typo is an error, not a recording.
    let mut traced = crate::tracing::resolve(&cfg.trace)?;
    // --aggregate: traced events counted in the kernel; their formats gain the count.
    let counted = if cfg.aggregate && !traced.is_empty() {
        crate::tracing::aggregate::prepare(&mut traced, cfg.hist.as_deref())?
    } else {
        Vec::new()
    };
    let started = Instant::now();
    let started_ns = monotonic_ns();
    let child = if cfg.command.is_empty() {
        None
    } else {
        Some(
            workload::spawn_held(&cfg.command, &workload_env(cfg))
                .with_context(|| format!("cannot start {}", cfg.command[0]))?,
        )
    };
    phases.mark("workload spawned (held)");
    let system_wide = cfg.target == Target::SystemWide;
    // On an early return below, dropping the held child kills it.
    let options = bpf::Options {
        sampling: cfg.sampling,
        frequency: cfg.frequency,
        cpus: cfg.cpus.clone(),
        system_wide,
        off_cpu_min_ns: cfg.off_cpu_min_ns,
        wakeups: cfg.wakeups,
        faults: cfg.faults,
        block_io: cfg.block_io,
        cache: cfg.cache,
        net: cfg.net,
        net_send_rate: cfg.net_send_rate,
        net_send_cap: cfg.net_send_cap,
        net_send_calls: cfg.net_send_calls,
        stack_copy_bytes: cfg.stack_copy_bytes,
        unwind_in_kernel: cfg.unwind_in_kernel,
        aggregate: cfg.aggregate && cfg.sampling,
        trace_aggregate: !counted.is_empty(),
        aggregate_entries: aggregate_entries()?,
        io_prealloc: test_setting("BPFPERF_IO_PREALLOC", "requests")?,
        net_unseen_every: net_unseen_every()?,
        offcpu_unseen_every: offcpu_unseen_every()?,
        io_unseen_every: io_unseen_every()?,
        ring_bytes: cfg.ring_pages.map(|pages| pages.saturating_mul(4096)),
        follow_write: cfg.follow_write,
        follow_send: cfg.follow_send,
        trace: traced.iter().map(|t| t.bpf.clone()).collect(),
    };
    let mut profiler = bpf::Profiler::start(&options)?;
    if cfg.verbose {
        if let Err(e) = profiler.count_run_time() {
            eprintln!("record: BPF run time not measured: {e}");
        }
    }
    phases.mark("BPF programs loaded and attached");
    let cpus = bpf::perf_event::online_cpus()?;
    let mut sideband = crate::sideband::SideBand::open(&cpus, cfg.stack_copy_bytes > 0)?;
    let mut tracked = HashSet::new();
    let mut initial: Vec<u32> = match &cfg.target {
        Target::Pids(p) => p.clone(),
        Target::SystemWide => procfs::all_pids(),
        Target::Workload => vec![],
    };
    if let Some(c) = &child {
        initial.push(c.pid as u32);
    }
    for &pid in &initial {
        if !system_wide {
            profiler.track(pid)?;
        }
        tracked.insert(pid);
    }
    // DWARF mode: the kernel unwinds the followed processes' stacks once their files'
    // tables are built (not system-wide: every process's files would be).
    let mut unwinding = if cfg.stack_copy_bytes > 0 && cfg.unwind_in_kernel && !system_wide {
        Some(crate::unwinding::Unwinding::start(
            profiler.unwind_tables()?,
            &initial,
        ))
    } else {
        None
    };

    phases.mark("side-band events opened, processes tracked");
    // After the side-band events opened: a program loaded from now on is in both.
    let bpf_programs = kernel::bpf_programs();
    phases.mark("BPF programs listed");
    host::rotate_old(&cfg.output)?;
    let events = crate::capture::attrs::events(cfg, &traced);
    phases.mark("tracefs formats read");
    let (hostname, release) = host::uname();
    let mut files = Files {
        attrs: events.attrs.clone(),
        compression_level: cfg.compression_level,
        features: Features {
            hostname: Some(hostname),
            os_release: Some(release),
            version: Some(format!("bpfperf {}", env!("CARGO_PKG_VERSION"))),
            arch: Some(std::env::consts::ARCH.into()),
            nr_cpus: Some((cpus.len() as u32, cpus.len() as u32)),
            cmdline: Some(cfg.cmdline.clone()),
            clockid_res_ns: Some(1),
            tracing_data: events.tracing_data.clone(),
            ..Default::default()
        },
        kernel_build_id: kernel::build_id(),
        build_ids: HashMap::new(),
    };
    let writer = files.create(&cfg.output)?;
    let mut rec = Recorder::new(writer, system_wide, tracked, &events);
    rec.late.on = unwinding.is_some();
    rec.python.enabled = cfg.python;
    if !system_wide {
        rec.python.follow(&initial);
    }
    rec.aggregate = cfg.aggregate;
    rec.counted = counted;
    if system_wide && cfg.aggregate {
        rec.thin = true;
        rec.known = Some(crate::sideband::known::Known::keeping_exited());
    }
    let mut rotation = cfg.switch_output.map(|o| Rotation::new(o, &cfg.output));
    if rotation.is_some() && rec.known.is_none() {
        rec.known = Some(Default::default());
    }
    // Bytes of the files finished, and the counts they hold.
    let mut written = 0;
    let mut dumped = DumpCounts::default();
    phases.mark("output created");

    // The probes are on: let the workload go. What is written below is older than anything
    // it does (its events wait in the buffers until the loop).
    let child_pid = child.as_ref().map(|c| c.pid);
    if let Some(c) = child {
        let name = cfg.command[0].clone();
        c.release().with_context(|| format!("cannot run {name}"))?;
    }
    phases.mark("workload released");
    // --duration counts from here, as perf's does from its workload's start: the seconds
    // asked for are all recorded, however long the BPF programs took to load.
    let recording = crate::session::phases::Recording::start();

    let symbols = kernel_symbols.join().unwrap_or_default();
    phases.mark("kernel symbols read");
    if cfg.faults {
        if let Some((start, end)) = symbols.fault_fn {
            profiler.look_for_faults(start, end);
        }
    }
    if cfg.net && cfg.off_cpu_min_ns.is_some() {
        profiler.look_for_socket_waits(&symbols.sock_wait_fns);
    }
    rec.write_kernel_map(symbols.text)?;
    // Synthesized facts carry the start time: older than every event the probes saw.
    let now = started_ns;
    for fact in bpf_programs {
        rec.write_fact(&TimedFact {
            time: now,
            cpu: 0,
            fact,
        })?;
    }
    for &pid in &initial {
        if child_pid.is_some_and(|c| c as u32 == pid) {
            continue;
        }
        for fact in procfs::synthesize(pid, cfg.stack_copy_bytes > 0) {
            if let Some(u) = &mut unwinding {
                u.observe([&fact]);
            }
            let fact = TimedFact {
                time: now,
                cpu: 0,
                fact,
            };
            watch_python(&profiler, &mut rec.python, &fact);
            rec.write_fact(&fact)?;
        }
    }
    rec.writer.finish_round()?;
    phases.mark("existing processes described");
    let mut flagger = crate::runtimes::jvm::Flagger::default();
    flag_jvms(cfg, &mut flagger, &rec.jvms, true);

    let mut exit_status = None;
    let mut forwarded = false;
    let mut facts = Vec::new();
    let mut cache_taken = monotonic_ns();
    let mut aggregated_taken = monotonic_ns();
    let mut status = crate::session::status::StatusLine::new(cfg.status_line);
    let mut glue = GlueStripper::default();
    loop {
        let cut = monotonic_ns().saturating_sub(ROUND_SLACK_NS);
        let pending = &mut rec.pending;
        let python = &mut rec.python;
        let mut child_exited = false;
        let mut newest = 0;
        let taken = profiler.poll(POLL_INTERVAL, |mut e| {
            if let bpf::Event::Exit { pid, .. } = e {
                child_exited |= child_pid.is_some_and(|c| c as u32 == pid);
            }
            python.observe_event(&e);
            if on_chosen_cpu(cfg, &e) {
                glue.strip(&mut e, &symbols);
                if let Some(item) = Item::from_event(e) {
                    newest = newest.max(item.time());
                    pending.push(item);
                }
            }
        })?;
        // A full batch may have left events older than the cut in the ring (written after
        // this round, they would come out of order: perf warned of 8,694 in a recording of
        // 16,384 major faults beside a build). The ring is filled in time order but for the
        // CPUs' few microseconds of skew: what it still holds is no older than the newest
        // event taken, less the slack.
        let cut = if taken < bpf::POLL_BATCH {
            cut
        } else {
            cut.min(newest.saturating_sub(ROUND_SLACK_NS))
        };
        sideband.drain(&mut facts);
        // Each CPU's facts were read in turn: one process's exec and mappings, in order.
        facts.sort_by_key(|f| f.time);
        if let Some(u) = &mut unwinding {
            u.observe(facts.iter().map(|f| &f.fact));
        }
        for f in &facts {
            watch_python(&profiler, &mut rec.python, f);
        }
        rec.pending.extend(facts.drain(..).map(Item::Fact));
        if cfg.cache && monotonic_ns() >= cache_taken + CACHE_INTERVAL_NS {
            cache_taken = take_cache_counts(&profiler, &mut rec.pending, cache_taken);
        }
        if let Some(every) = cfg.interval.filter(|_| cfg.aggregate) {
            let now = monotonic_ns();
            if now >= aggregated_taken + every.as_nanos() as u64 {
                take_aggregated(
                    &profiler,
                    cfg,
                    !rec.counted.is_empty(),
                    &mut rec.pending,
                    now,
                )?;
                aggregated_taken = now;
            }
        }
        rec.write_drops(profiler.drops_by_event(), cut)?;
        status.update(|| crate::session::status::Counts {
            samples: rec.samples,
            other_events: rec.off_cpu
                + rec.runq
                + rec.faults
                + rec.io
                + rec.wakeups
                + rec.traced
                + rec.net,
            lost: rec.lost,
            bytes: written + rec.writer.bytes_written(),
        });
        rec.flush_until(cut)?;
        flag_jvms(cfg, &mut flagger, &rec.jvms, false);
        if let Some(r) = &mut rotation {
            if r.due(rec.writer.bytes_written()) && !rec.writer.is_full() {
                // Finished, then moved to its name; the next file starts with what its
                // reader needs, timed before anything still to be written.
                let time = rec.oldest_pending().map_or(cut, |t| t.min(cut));
                let done = rec.writer;
                written += match files.finish(done, &rec.output_files, &rec.mapped_files) {
                    Ok(bytes) => bytes,
                    // The filesystem filled: the file holds its rounds without the
                    // features, and the next one is full from the start.
                    Err(format::Error::NoSpace { .. }) => {
                        std::fs::metadata(&cfg.output).map_or(0, |m| m.len())
                    }
                    Err(e) => return Err(e.into()),
                };
                host::chown_to_invoking_user(&cfg.output);
                let path = r.dump()?;
                rec.writer = files.create(&cfg.output)?;
                rec.begin_file(time)?;
                r.begun(rec.writer.bytes_written());
                dumped.print(cfg, DumpCounts::of(&rec, written), &path);
            }
        }

        if let Some(pid) = child_pid {
            if exit_status.is_none() {
                // Its exit was seen: reap it now rather than at the next poll.
                exit_status = if child_exited {
                    workload::wait_exiting(pid)
                } else {
                    workload::try_wait(pid)
                };
            }
        }
        let sig = host::signal_received();
        if sig != 0 && !forwarded {
            forwarded = true;
            match child_pid {
                // SAFETY: forwarding the signal to our workload.
                Some(pid) if exit_status.is_none() => unsafe {
                    libc::kill(pid, sig);
                },
                _ => break,
            }
        }
        let done = match (&cfg.target, child_pid) {
            (_, Some(_)) => exit_status.is_some(),
            (Target::Pids(pids), None) => pids.iter().all(|&p| procfs::has_exited(p)),
            _ => false,
        };
        let timed_out = cfg.duration.is_some_and(|d| recording.elapsed() >= d);
        if done || timed_out || rec.writer.is_full() {
            break;
        }
    }
    let no_space = |bytes: u64, exit_status: Option<i32>| {
        format!(
            "no space left on {} after {:.1} MB: recording stopped there, {} holds every \
             record that fit (those that did not: counted lost){}",
            host::device_of(&cfg.output),
            bytes as f64 / 1e6,
            cfg.output.display(),
            match (child_pid, exit_status) {
                (Some(pid), None) => format!("; the workload (pid {pid}) keeps running"),
                _ => String::new(),
            }
        )
    };
    let mut stopped = rec
        .writer
        .is_full()
        .then(|| no_space(rec.writer.bytes_written(), exit_status));
    status.clear();
    phases.mark("recording");
    // Last events: the workload's own are published before it can be reaped (the kernel
    // writes them in do_exit); a BPF program still running on another CPU needs microseconds.
    std::thread::sleep(Duration::from_millis(5));
    if cfg.net {
        // The skbs the sockets still open had skipped since their last followed one.
        if let Err(e) = profiler.send_tails() {
            eprintln!("record: warning: the sends of open sockets since their last one followed are not counted: {e}");
        }
    }
    // What is left in the ring, a batch at a time (each batch written before the next).
    loop {
        let pending = &mut rec.pending;
        let python = &mut rec.python;
        let taken = profiler.poll(Duration::ZERO, |mut e| {
            python.observe_event(&e);
            if on_chosen_cpu(cfg, &e) {
                glue.strip(&mut e, &symbols);
                pending.extend(Item::from_event(e))
            }
        })?;
        if taken < bpf::POLL_BATCH {
            break;
        }
        rec.flush_until(monotonic_ns().saturating_sub(ROUND_SLACK_NS))?;
    }
    sideband.drain(&mut facts);
    rec.pending.extend(facts.drain(..).map(Item::Fact));
    if cfg.cache {
        take_cache_counts(&profiler, &mut rec.pending, cache_taken);
    }
    if cfg.aggregate {
        let events = !rec.counted.is_empty();
        take_aggregated(&profiler, cfg, events, &mut rec.pending, monotonic_ns())?;
    }
    rec.write_drops(profiler.drops_by_event(), monotonic_ns())?;
    rec.flush_until(u64::MAX)?;
    // Runs the kernel skipped: what they would have written is missing, said even without -v.
    let programs = profiler.run_time();
    for p in programs.iter().filter(|p| p.missed > 0) {
        eprintln!(
            "record: warning: the kernel skipped {} runs of {} (it was already running on \
             that CPU): the events they would have written are missing",
            p.missed, p.name
        );
    }
    let missed_wakers = profiler.missed_wakers();
    let unseen_off_cpu_ends = profiler.unseen_off_cpu_ends();
    let unseen_io = profiler.unseen_io_completions();
    let unseen_followed = profiler.unseen_followed_completions();
    let missed_aggregations = profiler.missed_aggregations();
    let missed_event_aggregations = profiler.missed_event_aggregations();
    let traced_records = rec.traced_records;
    let events_counted = !rec.counted.is_empty();
    // The unwind-table thread writes into the profiler's memory: it stops first.
    let unwound = unwinding.take().map(|u| u.finish());
    if cfg.verbose {
        if let Some(u) = &unwound {
            eprintln!(
                "record: unwind tables: {} files, {} rows, {} processes, built in {:.1} ms",
                u.files, u.rows, u.processes, u.build_ms
            );
            eprintln!(
                "record: user stacks of {} of {} samples unwound in the kernel, {} copied ({} of \
                 the {} taken once their process's tables were in)",
                rec.samples - rec.copied_stacks,
                rec.samples,
                rec.copied_stacks,
                rec.late.copied,
                rec.late.samples
            );
            for why in &u.failed {
                eprintln!("record: no unwind table: {why}");
            }
        }
        crate::runtimes::python::report(&rec.python);
        crate::session::phases::report_costs(&programs, &recording);
        for (what, n) in profiler.drops_by_kind() {
            if n > 0 {
                eprintln!("record: lost {n} {what}");
            }
        }
    }
    crate::runtimes::python::report_not_read(&rec.python);
    drop(profiler);
    phases.mark("last events written, probes detached");
    ask_jvm_maps(cfg, &rec.jvms);
    for why in flagger.restore() {
        eprintln!("record: {why}: DumpPerfMapAtExit left on");
    }
    phases.mark("JVMs' perf maps asked for");

    let unwritten = rec.count_unwritten();
    let net = rec.net;
    let drops = rec.drops_written;
    let (samples, aggregated, off_cpu, runq, io, faults, wakeups, traced, lost) = (
        rec.samples,
        rec.aggregated,
        rec.off_cpu,
        rec.runq,
        rec.io,
        rec.faults,
        rec.wakeups,
        rec.traced,
        rec.lost,
    );
    let totals = DumpCounts::of(&rec, written);
    let bytes = match files.finish(rec.writer, &rec.output_files, &rec.mapped_files) {
        Ok(bytes) => bytes,
        // Not even the features fit: the file holds its rounds without them.
        Err(format::Error::NoSpace { .. }) => {
            let bytes = std::fs::metadata(&cfg.output).map_or(0, |m| m.len());
            stopped.get_or_insert_with(|| no_space(bytes, exit_status));
            bytes
        }
        Err(e) => return Err(e.into()),
    };
    phases.mark("build ids read, features written");
    host::chown_to_invoking_user(&cfg.output);
    // A rotated recording's last file goes to its timestamped name too, as perf's does.
    let mut path = cfg.output.clone();
    if let Some(r) = &mut rotation {
        path = r.dump()?;
        let bytes = totals.bytes + bytes;
        dumped.print(cfg, DumpCounts { bytes, ..totals }, &path);
        // "no space left ...: recording stopped there, FILE holds every record that fit".
        let (before, after) = (cfg.output.display().to_string(), path.display().to_string());
        stopped = stopped.map(|why| why.replace(&before, &after));
    }
    if samples == 0
        && traced == 0
        && child_pid.is_none()
        && cfg.target != Target::SystemWide
        && initial.is_empty()
    {
        bail!("nothing was recorded");
    }
    Ok(Summary {
        samples,
        aggregated,
        missed_aggregations,
        traced_records: events_counted.then_some(traced_records),
        missed_event_aggregations,
        off_cpu,
        runq,
        io,
        net,
        faults,
        wakeups,
        traced,
        missed_wakers,
        unseen_off_cpu_ends,
        unseen_io,
        unseen_followed,
        lost,
        drops,
        unwritten,
        duration: started.elapsed(),
        bytes: written + bytes,
        path,
        files: rotation.as_ref().map_or(0, |r| r.files),
        kept: rotation.as_ref().map_or(0, |r| r.kept()),
        exit_status,
        stopped,
    })
}
