//! Kernel frames inside BPF programs' JIT-ed code are named as perf names them,
//! `bpf_prog_<tag>_<name>`, from the recording's KSYMBOL records (or, for a recording of this
//! boot without them, from the running kernel's `[bpf]` symbols); no kernel frame is named
//! with an offset larger than its symbol (`_einittext+0x3c82f46f`).

use std::path::Path;
use std::process::Command;

use format::{
    attr_flag, callchain, event_type, misc, sample_type as st, sw_event, EventAttr, Features,
    PerfFileWriter, Sample, SampleId, SideBand,
};

use crate::common::{analyze, can_record, perf_ok, record_bin, Tmp};

fn kallsyms_lines() -> Vec<(u64, String, Option<String>)> {
    std::fs::read_to_string("/proc/kallsyms")
        .unwrap()
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let addr = u64::from_str_radix(f.next()?, 16).ok()?;
            let name = f.nth(1)?.to_string();
            Some((addr, name, f.next().map(str::to_string)))
        })
        .collect()
}

pub(crate) fn kallsyms(name: &str) -> u64 {
    kallsyms_lines()
        .into_iter()
        .find(|l| l.1 == name)
        .unwrap_or_else(|| panic!("{name} not in /proc/kallsyms"))
        .0
}

/// Writes a recording of kernel stacks `chains` (innermost first), with a KSYMBOL record for
/// each of `ksymbols` (address, length, name).
fn write(path: &Path, ksymbols: &[(u64, u32, &str)], chains: &[Vec<u64>]) {
    let attr = EventAttr {
        name: "cpu-clock".into(),
        type_: event_type::SOFTWARE,
        config: sw_event::CPU_CLOCK,
        sample_period_or_freq: 999,
        sample_type: st::IDENTIFIER | st::IP | st::TID | st::TIME | st::CPU | st::CALLCHAIN,
        flags: attr_flag::FREQ
            | attr_flag::SAMPLE_ID_ALL
            | attr_flag::MMAP
            | attr_flag::COMM
            | attr_flag::KSYMBOL
            | attr_flag::BPF_EVENT,
        ids: vec![1],
        ..Default::default()
    };
    let mut w = PerfFileWriter::create(path, vec![attr]).unwrap();
    let sid = SampleId::default();
    let (text, etext) = (kallsyms("_text"), kallsyms("_etext"));
    let kernel = SideBand::Mmap {
        misc: misc::KERNEL,
        pid: u32::MAX,
        tid: 0,
        start: text,
        len: etext - text,
        pgoff: text,
        filename: "[kernel.kallsyms]_text",
    };
    w.write_side_band(0, &kernel, &sid).unwrap();
    for &(addr, len, name) in ksymbols {
        let k = SideBand::Ksymbol {
            addr,
            len,
            ksym_type: format::ksymbol::TYPE_BPF,
            flags: 0,
            name,
        };
        w.write_side_band(0, &k, &sid).unwrap();
    }
    w.finish_round().unwrap();
    for (i, chain) in chains.iter().enumerate() {
        let chain: Vec<u64> = std::iter::once(callchain::KERNEL)
            .chain(chain.iter().copied())
            .collect();
        let sample = Sample {
            misc: misc::KERNEL,
            ip: chain[1],
            time: 1000 + i as u64,
            callchain: &chain,
            ..Default::default()
        };
        w.write_sample(0, &sample).unwrap();
    }
    w.finish(&Features {
        os_release: Some(
            std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap()
                .trim()
                .into(),
        ),
        ..Default::default()
    })
    .unwrap();
}

/// The frames of `script` output (perf's or analyze's): (address, `symbol+offset`, file).
fn frames(script: &str) -> Vec<(u64, String, String)> {
    frames_of(script, "")
}

/// The frames of the samples of `script` output whose event's name holds `event`.
fn frames_of(script: &str, event: &str) -> Vec<(u64, String, String)> {
    let mut chosen = false;
    script
        .lines()
        .filter_map(|l| {
            if !l.starts_with('\t') {
                chosen = l.contains(event);
                return None;
            }
            let (addr, rest) = l.trim().split_once(' ')?;
            let (sym, dso) = rest.rsplit_once(" (")?;
            chosen.then(|| {
                (
                    u64::from_str_radix(addr, 16).ok(),
                    sym.to_string(),
                    dso.trim_end_matches(')').to_string(),
                )
            })
        })
        .filter_map(|(addr, sym, dso)| Some((addr?, sym, dso)))
        .collect()
}

fn analyze_script(file: &Path) -> String {
    let out = analyze(&["script", "-i", file.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn perf_script(file: &Path) -> String {
    let out = Command::new("perf")
        .args(["script", "-i", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// No kernel frame with an offset past the end of the kernel's text: the symbols past it are
/// ends, not functions.
fn assert_no_text_end_names(script: &str) {
    for (addr, sym, _) in frames(script) {
        assert!(
            !sym.starts_with("_einittext") && !sym.starts_with("_etext"),
            "{addr:x} named {sym}"
        );
    }
}

#[test]
fn frames_in_bpf_programs_are_named_from_ksymbol_records() {
    // Reading kernel addresses needs root; perf is the oracle.
    if !perf_ok() || kallsyms("_text") == 0 {
        return;
    }
    let dir = Tmp::new("ksymbol");
    let file = dir.0.join("bpf.data");
    let prog = 0xffff_ffff_c100_0000u64;
    let sub = prog + 0x200;
    let schedule = kallsyms("schedule");
    let on_test = "bpf_prog_0123456789abcdef_on_test";
    let helper = "bpf_prog_fedcba9876543210_helper";
    write(
        &file,
        &[(prog, 0x200, on_test), (sub, 0x80, helper)],
        &[
            vec![sub + 0x8, prog + 0x10, schedule + 4],
            vec![prog, schedule + 4],
            // Past both programs: nothing names it.
            vec![prog + 0x300, schedule + 4],
        ],
    );
    let ours = analyze_script(&file);
    let theirs = perf_script(&file);
    let (ours, theirs) = (frames(&ours), frames(&theirs));
    assert_eq!(ours.len(), 7, "{ours:?}");
    assert_eq!(ours.len(), theirs.len());
    for (o, t) in ours.iter().zip(&theirs) {
        assert_eq!(o, t, "as perf names it");
    }
    assert_eq!(ours[0].1, format!("{helper}+0x8"));
    assert_eq!(
        ours[1],
        (prog + 0x10, format!("{on_test}+0x10"), on_test.into())
    );
    // In no file: outside the kernel's mapping and any program's.
    assert_eq!(
        ours[5],
        (prog + 0x300, "[unknown]".into(), "[unknown]".into())
    );
    // The folded stacks name them too.
    let out = analyze(&["report", "--folded", "-i", file.to_str().unwrap()]);
    let folded = String::from_utf8(out.stdout).unwrap();
    assert!(
        folded.contains(&format!(";schedule;{on_test};{helper} 1")),
        "{folded}"
    );
}

#[test]
fn a_recording_of_this_boot_without_ksymbols_names_bpf_frames_by_the_running_kernel() {
    if !can_record() {
        return;
    }
    // record's programs, loaded while it records `sleep`.
    let dir = Tmp::new("livebpf");
    let mut holder = Command::new(record_bin())
        .args(["-q", "-o"])
        .arg(dir.0.join("holder.data"))
        .args(["--", "sleep", "10"])
        .spawn()
        .unwrap();
    // Other tests' recordings come and go meanwhile: every on_cpu_sample listed.
    let on_cpu = || -> Vec<(u64, String)> {
        kallsyms_lines()
            .into_iter()
            .filter(|l| l.1.ends_with("_on_cpu_sample") && l.2.as_deref() == Some("[bpf]"))
            .map(|l| (l.0, l.1))
            .collect()
    };
    // record creates its output once its programs are loaded.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(8);
    while !dir.0.join("holder.data").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "record's programs never loaded"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let listed = on_cpu();
    let einittext = kallsyms("_einittext");
    let file = dir.0.join("nobpf.data");
    let mut chains: Vec<Vec<u64>> = listed.iter().map(|p| vec![p.0 + 0x10]).collect();
    chains.push(vec![einittext + 0x10]);
    write(&file, &[], &chains);
    let now = frames(&analyze_script(&file));
    // The same file as if written before this boot: the running kernel's programs are not
    // the ones it ran.
    let old = dir.0.join("old.data");
    std::fs::copy(&file, &old).unwrap();
    let st = Command::new("touch")
        .args(["-d", "2000-01-01"])
        .arg(&old)
        .status()
        .unwrap();
    assert!(st.success());
    let before = frames(&analyze_script(&old));
    let still = on_cpu();
    let st = Command::new("kill")
        .arg("-INT")
        .arg(holder.id().to_string())
        .status()
        .unwrap();
    assert!(st.success());
    let _ = holder.wait();

    assert_eq!(now.len(), chains.len(), "{now:?}");
    // The holder's programs (listed before and after analyze ran) at least.
    let mut checked = 0;
    for (program, frame) in listed.iter().zip(&now) {
        if still.contains(program) {
            assert_eq!(frame.1, format!("{}+0x10", program.1), "{now:?}");
            assert_eq!(frame.2, program.1);
            checked += 1;
        }
    }
    assert!(checked > 0, "the holder's programs stayed loaded");
    assert_eq!(
        now.last().unwrap().1,
        "[unknown]",
        "past _einittext: {now:?}"
    );
    assert!(before.iter().all(|f| f.1 == "[unknown]"), "{before:?}");
}

#[test]
fn records_own_programs_are_named_as_perf_names_them() {
    if !can_record() {
        return;
    }
    let dir = Tmp::new("recordbpf");
    let file = dir.0.join("io.data");
    // Reading and writing many small files keeps record's page-cache and block I/O programs
    // busy: some samples land in them (cachestat named: it is on only when asked for).
    let out = Command::new(record_bin())
        .args(["-q", "-F", "4000", "-e", "cpu-clock,offcpu,io,cache", "-o"])
        .arg(&file)
        .args([
            "--",
            "sh",
            "-c",
            &format!(
                "for i in 1 2 3; do tar -cf {d}/t.tar /usr/share/doc 2>/dev/null; sync; done",
                d = dir.0.display()
            ),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The file names record's own programs, loaded before it began.
    let stats = Command::new("perf")
        .args(["script", "--show-bpf-events", "-F", "event", "-i"])
        .arg(&file)
        .output()
        .unwrap();
    let stats = String::from_utf8_lossy(&stats.stdout);
    for program in [
        "on_cpu_sample",
        "on_switch",
        "on_block_issue",
        "on_cache_read",
    ] {
        assert!(
            stats
                .lines()
                .any(|l| l.contains("PERF_RECORD_KSYMBOL") && l.ends_with(&format!("_{program}"))),
            "no KSYMBOL record for {program}"
        );
    }
    // Code registered where other code was before during the recording (other recordings'
    // programs come and go meanwhile): perf names its frames by time, analyze by the last
    // registration. Those ranges are left out.
    let registered: Vec<(u64, u64, String)> = stats
        .lines()
        .filter_map(|l| {
            let rest = l.split_once("PERF_RECORD_KSYMBOL addr ")?.1;
            let f: Vec<&str> = rest.split_whitespace().collect();
            // addr ADDR len LEN type T flags F name NAME
            let addr = u64::from_str_radix(f.first()?, 16).ok()?;
            let len: u64 = f.get(2)?.parse().ok()?;
            Some((addr, addr + len, f.last()?.to_string()))
        })
        .collect();
    let ambiguous = |addr: u64| {
        let mut holding = registered.iter().filter(|r| (r.0..r.1).contains(&addr));
        let first = holding.next();
        holding.any(|r| Some(r) != first)
    };
    let ours = analyze_script(&file);
    let theirs = perf_script(&file);
    assert_no_text_end_names(&ours);
    // Frames in BPF code (the module and BPF area, above the kernel's text): the same names
    // and offsets as perf's (perf also prints callchain entries in the range of context
    // markers, -1 and the like, which analyze leaves out).
    let text_end = kallsyms("_einittext");
    let bpf = |script: &str| -> Vec<(u64, String, String)> {
        // analyze script shows the sampling event's samples.
        let mut f: Vec<_> = frames_of(script, " cpu-clock:")
            .into_iter()
            .filter(|x| x.0 > text_end && x.0 < callchain::MAX_CONTEXT && !ambiguous(x.0))
            .collect();
        f.sort();
        f
    };
    let (ours, theirs) = (bpf(&ours), bpf(&theirs));
    let differ = ours.iter().zip(&theirs).find(|(o, t)| o != t);
    assert!(
        ours.len() == theirs.len() && differ.is_none(),
        "{} frames vs perf's {}; first difference: {differ:?}",
        ours.len(),
        theirs.len()
    );
    let named = ours.iter().filter(|f| f.1.starts_with("bpf_prog_")).count();
    eprintln!(
        "{named} frames in BPF programs, {} above the kernel's text",
        ours.len()
    );
}
