//! Large recordings: analyze keeps a window of the file mapped in, not the whole of it, and
//! groups the unwound DWARF stacks before resolving them. Smaller ones read from disk stay in
//! the page cache in 2 MiB pieces.

use std::os::unix::process::ExitStatusExt;

use crate::common::*;

/// The last `peak N MiB` that BPFPERF_TIMING printed: the process's peak resident memory.
fn peak_mib(stderr: &str) -> u64 {
    stderr
        .lines()
        .filter_map(|l| l.split("peak").nth(1))
        .filter_map(|v| v.trim().trim_end_matches("MiB").trim().parse().ok())
        .next_back()
        .unwrap_or_else(|| panic!("no peak in {stderr}"))
}

/// Records busy-nofp (DWARF stack copies, 8000 Hz, two threads) into `file` until it holds `bytes` or
/// `limit` passed, then stops `record` as Ctrl-C would: sized by what was written, not by
/// CPU time, which another job on the machine takes.
fn record_until(file: &std::path::Path, bytes: u64, limit: std::time::Duration) {
    // Stack copies, as analyze unwinds them (unwound in the kernel, the file would grow a
    // tenth as fast).
    record_program_until(
        file,
        &["--no-kernel-unwind", "-F", "8000"],
        "busy-nofp",
        bytes,
        limit,
    );
}

/// Records `program` (two threads) with `record -q ARGS` into `file`, as [`record_until`],
/// while BPF programs are loaded beside it (`record -- true` again and again): the kernel
/// tells every recording of each (KSYMBOL and BPF_EVENT records), so side-band records lie
/// all over the file, as when a suite of tests or a fleet's agents run beside a recording
/// (a fresh clone's suite: peaks of 86-91 MiB reading 127 MiB in 2 MiB folios, where each
/// record read in time order mapped its 2 MiB block). Returns how many loads there were.
fn record_program_until(
    file: &std::path::Path,
    args: &[&str],
    program: &str,
    bytes: u64,
    limit: std::time::Duration,
) -> u32 {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let beside = file.with_extension("beside");
    let loads = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut loads = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let ok = std::process::Command::new(record_bin())
                    .args(["-q", "-o"])
                    .arg(&beside)
                    .args(["--", "true"])
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .status()
                    .is_ok_and(|s| s.success());
                loads += ok as u32;
                // A load every half second or so: spread over the file, not a CPU's worth.
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            let _ = std::fs::remove_file(&beside);
            loads
        })
    };
    let mut child = std::process::Command::new(record_bin())
        .arg("-q")
        .args(args)
        .arg("-o")
        .arg(file)
        .arg("--")
        .arg(fixture(program))
        .args(["600", "2"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while start.elapsed() < limit
        && std::fs::metadata(file).map_or(0, |m| m.len()) < bytes
        && child.try_wait().unwrap().is_none()
    {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    // The workload dies of the forwarded SIGINT: record exits with its status.
    assert!(
        status.code().is_some() || status.signal().is_some(),
        "record: {status}"
    );
    let loads = loads.join().unwrap();
    assert!(loads >= 3, "{loads} recordings beside: too few to tell");
    loads
}

/// `file` written again into `copy` in 8 MiB writes: the copy's page cache holds 2 MiB
/// folios (as that of a file analyze read from disk does), and every touch maps 2 MiB.
fn copy_in_2_mib_folios(file: &std::path::Path, copy: &std::path::Path) {
    copy_in_writes_of(file, copy, 8 << 20);
}

/// `file` written again into `copy` in writes of `size` bytes (4 KiB ones leave the copy's
/// page cache in small folios, as perf's own files are).
fn copy_in_writes_of(file: &std::path::Path, copy: &std::path::Path, size: usize) {
    use std::io::{Read, Write};
    let (mut from, mut to) = (
        std::fs::File::open(file).unwrap(),
        std::fs::File::create(copy).unwrap(),
    );
    let mut buf = vec![0u8; size];
    loop {
        let n = from.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        to.write_all(&buf[..n]).unwrap();
    }
}

#[test]
fn a_recording_larger_than_analyzes_memory_is_read_whole() {
    if !can_record() {
        return;
    }
    let dir = Tmp::new("scale");
    let file = dir.0.join("big.data");
    // DWARF stack copies at 8000 Hz on two threads, ~35 MB a second on an idle machine,
    // until the file passes 260 MiB (a busy machine takes longer; two minutes at most).
    record_until(&file, 260 << 20, std::time::Duration::from_secs(120));
    let size_mib = std::fs::metadata(&file).unwrap().len() >> 20;
    assert!(
        size_mib >= 250,
        "recording of {size_mib} MiB: too small to tell"
    );

    let out = analyze_env(
        &["report", "--folded", "-i", file.to_str().unwrap()],
        &[("BPFPERF_TIMING", "1")],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let folded = String::from_utf8_lossy(&out.stdout);
    // Every sample is there, under its stack (the unwound stacks were grouped: a few lines).
    let samples: u64 = folded
        .lines()
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum();
    // The cpu-clock samples (other events, off-CPU and I/O of whatever else ran, grow with
    // the machine's load and are not in a CPU profile).
    let info = analyze(&["info", "-i", file.to_str().unwrap()]);
    let recorded: u64 = String::from_utf8_lossy(&info.stdout)
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("cpu-clock")?
                .trim()
                .strip_prefix("samples")
        })
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("info gives the cpu-clock sample count");
    assert!(
        samples * 100 >= recorded * 95,
        "folded holds {samples} of {recorded} samples"
    );
    assert!(folded.contains("worker;spin_outer;spin_inner "), "{folded}");
    assert!(
        folded.lines().count() < 2000,
        "{} stacks",
        folded.lines().count()
    );
    // Without the page budget the whole file was resident at once (plus what analyze
    // allocates): a peak above the file's size. Giving the whole mapping back every 64 MB
    // kept about half of this one (record's file is mapped 2 MiB at a time: its page cache
    // holds huge folios), and with 16 threads, whose faults went on while the mapping was
    // given back, more (a 400 MB perf recording: 265 MiB). Each pass giving back what it has
    // left behind keeps under 40% (26-32% here; perf's recordings, mapped 64 KB at a time,
    // 10-25%); with 16 threads on these 2 CPUs, under 80% (36-62% here).
    let peak = peak_mib(&stderr);
    eprintln!("peak {peak} MiB reading a {size_mib} MiB recording");
    assert!(
        peak * 5 < size_mib * 2,
        "peak {peak} MiB reading a {size_mib} MiB recording\n{stderr}"
    );

    // The same recording in 2 MiB folios, every touch mapping 2 MiB. The walk's
    // search for its parts' starts touched the input every 4 MB and gave it back only when
    // all were found: half of the input mapped at once (51% of a 287 MB recording; 24-26%
    // now, as for the original).
    let copy = dir.0.join("copy.data");
    copy_in_2_mib_folios(&file, &copy);
    let out = analyze_env(
        &["report", "--folded", "-i", copy.to_str().unwrap()],
        &[("BPFPERF_TIMING", "1")],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), folded, "copy");
    let peak = peak_mib(&stderr);
    eprintln!("peak {peak} MiB reading its copy in 2 MiB folios");
    assert!(
        peak * 3 < size_mib,
        "peak {peak} MiB reading a {size_mib} MiB recording held in 2 MiB folios\n{stderr}"
    );
    std::fs::remove_file(&copy).unwrap();

    let out = analyze_env(
        &["report", "--folded", "-i", file.to_str().unwrap()],
        &[("BPFPERF_TIMING", "1"), ("RAYON_NUM_THREADS", "16")],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), folded, "16 threads");
    let peak = peak_mib(&stderr);
    eprintln!("16 threads: peak {peak} MiB");
    assert!(
        peak * 5 < size_mib * 4,
        "16 threads: peak {peak} MiB reading a {size_mib} MiB recording\n{stderr}"
    );
}

/// KiB of the mapping at `bytes` that /proc/self/smaps says is mapped 2 MiB at a time.
fn file_pmd_mapped_kib(bytes: &[u8]) -> u64 {
    let start = format!("{:x}-", bytes.as_ptr() as usize);
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let mut lines = smaps.lines().skip_while(|l| !l.starts_with(&start));
    let kib = lines
        .find_map(|l| l.strip_prefix("FilePmdMapped:"))
        .unwrap();
    kib.trim().trim_end_matches("kB").trim().parse().unwrap()
}

/// How a process mapping `file` now maps it: the KiB mapped 2 MiB at a time once every page
/// was read.
fn mapped_in_huge_pieces(file: &std::path::Path) -> u64 {
    let f = std::fs::File::open(file).unwrap();
    // SAFETY: the test's own file, unchanged while mapped.
    let map = unsafe { memmap2::Mmap::map(&f).unwrap() };
    let sum: u64 = map.iter().step_by(4096).map(|&b| b as u64).sum();
    std::hint::black_box(sum);
    file_pmd_mapped_kib(&map)
}

/// Drops `file`'s pages from the page cache (written back first).
fn evict(file: &std::path::Path) {
    let f = std::fs::File::open(file).unwrap();
    f.sync_all().unwrap();
    use std::os::fd::AsRawFd;
    // SAFETY: fadvise on an open descriptor; no memory is passed.
    let r = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(r, 0, "posix_fadvise");
}

/// Whether the kernel reads a file into 2 MiB folios where a map asks for huge pages: not
/// where transparent huge pages are off (said, and the test passed over).
fn huge_pages_on() -> bool {
    let thp =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    let on = !thp.contains("[never]");
    if !on {
        eprintln!(
            "skipping: transparent huge pages are off here ({})",
            thp.trim()
        );
    }
    on
}

/// A recording read from disk by analyze is read in 2 MiB pieces (it asks for huge pages
/// where it maps the file whole), so that this run and every later one map it 2 MiB a fault
/// rather than 64 KiB (a 48 MB DWARF recording: 27 faults instead of 762, 0.1 ms instead of
/// 2-4 of a 10-14 ms report). perf's recording as perf wrote it (small pages) and read back
/// from disk without the advice is mapped in small pieces: printed, for comparison.
#[test]
fn a_recording_read_from_disk_stays_in_the_page_cache_in_2_mib_pieces() {
    if !perf_ok() || !huge_pages_on() {
        return;
    }
    let dir = Tmp::new("huge-pieces");
    let file = dir.0.join("perf.data");
    // ~24 MB a CPU second at 2999 Hz on an idle machine; a busy one has the kernel lower
    // perf's rate (a fresh clone's suite beside a build: 5 MB). Longer until it holds 6 MiB.
    let mut size = 0;
    for seconds in ["1", "3", "9"] {
        perf_record(
            &file,
            &["-F", "2999", "--call-graph", "dwarf"],
            &fixture("busy-nofp"),
            &[seconds, "1"],
        );
        size = std::fs::metadata(&file).unwrap().len();
        if size >= 6 << 20 {
            break;
        }
    }
    assert!(
        size >= 6 << 20,
        "a recording of {size} bytes holds no whole 2 MiB piece"
    );
    let as_written = mapped_in_huge_pieces(&file);
    evict(&file);
    let read_back = mapped_in_huge_pieces(&file);
    eprintln!("{size} bytes: 2 MiB mappings as perf wrote it {as_written} KiB, read back without the advice {read_back} KiB");

    evict(&file);
    let out = analyze(&["report", "--folded", "-i", file.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = mapped_in_huge_pieces(&file);
    eprintln!("after analyze read it from disk: {after} KiB");
    // Every whole 2 MiB piece but the last (the file's last pages may be a smaller one).
    let whole = (size / (2 << 20)).saturating_sub(1) * 2048;
    assert!(
        after >= whole,
        "{size} bytes read from disk by analyze: {after} KiB mapped 2 MiB at a time, not {whole}"
    );
}

/// A frame-pointer recording larger than the page budget, in 2 MiB folios: the pass over the
/// samples a merge kept (a few thousand, megabytes apart, in time order) gave back what its
/// chunks of 256 left behind, and a chunk spanned most of the file, each sample mapping 2
/// MiB (a million samples, 79 MB: peak 87 MiB where the file as written peaks at 53). Each
/// chunk now ends 8 MiB past where it began. The tasks of each pass give back their last
/// window as they end (a task's last 2 MiB block stayed until its pass ended: CI saw 90 MiB
/// in 2 MiB folios, 62 for record's file, a 127 MiB recording). Compared with the same file
/// in small folios (written 4 KiB at a time, as perf's are; record's own file mixes both),
/// the lower of two runs each. And read from disk, the file is left in 2 MiB pieces (huge
/// pages asked for whatever the input's size).
#[test]
fn a_sparse_pass_over_a_large_file_in_2_mib_pieces_keeps_a_window() {
    if !can_record() || !huge_pages_on() {
        return;
    }
    let dir = Tmp::new("sparse");
    let file = dir.0.join("fp.data");
    record_program_until(
        &file,
        &["--call-graph", "fp", "-F", "40000"],
        "busy-fp",
        // record reserves the file in doubling steps ahead of what it wrote (134 MiB once
        // it passes 64): this stops at 134 MiB written, ~7 MB a second on an idle machine.
        // The limit is only a bound: tests and a build beside it take CPU from the program
        // (a fresh clone's suite beside a release build wrote 60 MiB in 40 s), and what is
        // tested needs the size, however long the machine takes to make it.
        150 << 20,
        std::time::Duration::from_secs(150),
    );
    let size_mib = std::fs::metadata(&file).unwrap().len() >> 20;
    assert!(
        size_mib >= 70,
        "recording of {size_mib} MiB: too small to tell"
    );
    let peak_of = |f: &std::path::Path| {
        let out = analyze_env(
            &["report", "--folded", "-i", f.to_str().unwrap()],
            &[("BPFPERF_TIMING", "1")],
        );
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        (
            peak_mib(&stderr),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (small_copy, copy) = (dir.0.join("small.data"), dir.0.join("copy.data"));
    copy_in_writes_of(&file, &small_copy, 4096);
    copy_in_2_mib_folios(&file, &copy);
    let (_, folded) = peak_of(&file);
    let (mut small, mut huge) = (u64::MAX, u64::MAX);
    for _ in 0..2 {
        let (peak, small_folded) = peak_of(&small_copy);
        assert_eq!(small_folded, folded);
        small = small.min(peak);
        let (peak, huge_folded) = peak_of(&copy);
        assert_eq!(huge_folded, folded);
        huge = huge.min(peak);
    }
    eprintln!("{size_mib} MiB: peak {small} MiB in small folios, {huge} MiB in 2 MiB folios");
    assert!(
        huge <= small + small / 4,
        "{size_mib} MiB recording: peak {huge} MiB in 2 MiB folios, {small} MiB in small ones"
    );

    evict(&copy);
    let (_, cold_folded) = peak_of(&copy);
    assert_eq!(cold_folded, folded);
    let pieces = mapped_in_huge_pieces(&copy) >> 10;
    eprintln!("read from disk by analyze: {pieces} MiB in 2 MiB pieces");
    assert!(
        pieces + 4 >= size_mib,
        "{size_mib} MiB read from disk by analyze: {pieces} MiB in 2 MiB pieces"
    );
}
