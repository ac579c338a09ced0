//! Major page faults: a program that maps a file dropped from the page cache and touches
//! every page (readahead off) must show one fault-time sample per major fault the kernel
//! counted for it (getrusage), whether the fault slept or not: on zram, where each read is
//! done within its submission, before the thread could wait (no fault sleeps), and on a loop
//! device, whose reads a kernel worker does while the faulting thread waits (nearly all do),
//! in both call-graph modes; perf reads the event; the waits inside faults are their own
//! event (fault-wait); analyze cache counts the pages read in as misses.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

/// What reads the faulted file's pages.
#[derive(Clone, Copy, Debug)]
enum Device {
    /// zram: a read completes within its submission, before the faulting thread could wait
    /// for it (no off-CPU interval, no fault-wait sample: only fault-time counts the fault).
    Zram,
    /// A loop device over a file in memory: its worker thread reads while the faulting
    /// thread waits (an off-CPU interval inside the fault: a fault-wait sample).
    Loop,
}

/// An ext4 file system on a block device of its own (`Device`), mounted; all undone on drop.
struct ScratchFs {
    device: String,
    mount: PathBuf,
    /// The loop device's backing file.
    image: Option<PathBuf>,
    /// The zram device's index.
    zram: Option<String>,
}

fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

impl ScratchFs {
    fn new(dir: &TempDir, device: Device, mib: u64) -> ScratchFs {
        let mut fs = ScratchFs {
            device: String::new(),
            mount: dir.path("mnt"),
            image: None,
            zram: None,
        };
        match device {
            Device::Zram => {
                let control = Path::new("/sys/class/zram-control/hot_add");
                let index = std::fs::read_to_string(control)
                    .unwrap_or_else(|e| panic!("zram is needed ({}: {e})", control.display()));
                let index = index.trim().to_string();
                fs.device = format!("/dev/zram{index}");
                let size = format!("/sys/block/zram{index}/disksize");
                fs.zram = Some(index);
                std::fs::write(size, format!("{}", mib << 20)).unwrap();
            }
            Device::Loop => {
                let image = format!("/dev/shm/bpfperf-faults-{}.img", std::process::id());
                let image = PathBuf::from(image);
                let file = std::fs::File::create(&image).unwrap();
                file.set_len(mib << 20).unwrap();
                fs.image = Some(image.clone());
                fs.device = run("losetup", &["-f", "--show", image.to_str().unwrap()]);
            }
        }
        run("mkfs.ext4", &["-q", "-F", &fs.device]);
        std::fs::create_dir_all(&fs.mount).unwrap();
        run("mount", &[&fs.device, fs.mount.to_str().unwrap()]);
        fs
    }
}

impl Drop for ScratchFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mount).status();
        if let Some(index) = &self.zram {
            let _ = std::fs::write("/sys/class/zram-control/hot_remove", index);
        }
        if let Some(image) = &self.image {
            let _ = Command::new("losetup").args(["-d", &self.device]).status();
            let _ = std::fs::remove_file(image);
        }
    }
}

fn check_faults(name: &str, mode: &str, device: Device) {
    if !can_record() {
        return;
    }
    let _guard = exclusive();
    let dir = TempDir::new("faults");
    let file = dir.path(&format!("{name}.data"));
    let fs = ScratchFs::new(&dir, device, 96);
    let scratch = fs.mount.join("faulted");
    let mib = "64";
    let program = fixture(name);
    let command = [program.to_str().unwrap(), scratch.to_str().unwrap(), mib];
    // Every default event, and cachestat (named: it is not among them). On the loop device
    // each fault also makes an off-CPU interval, a run-queue wait, a wakeup and a block
    // request: there, the faults (with their off-CPU waits) and cachestat alone, in a ring
    // of 16 MiB, so that a busy machine's reader keeps up.
    let (events, ring) = match device {
        Device::Zram => ("cpu-clock,offcpu,wakeup,runq,fault,io,cache", &[][..]),
        Device::Loop => ("cpu-clock,fault,cache", &["-m", "4096"][..]),
    };
    let args = [
        "-o",
        file.to_str().unwrap(),
        "--call-graph",
        mode,
        "-e",
        events,
    ];
    let out = record(&[&args[..], ring].concat(), &command);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let stderr = stderr_of(&out);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let majflt: u64 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("majflt "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no majflt line: {stdout}"));
    let pages: u64 = mib.parse::<u64>().unwrap() << 8;
    assert!(
        majflt >= pages * 9 / 10,
        "{mib} MiB with readahead off: a major fault per page, got {majflt}"
    );

    // Every major fault of the touching, under the touching function.
    let stacks = analyze_folded(&file, &["--event", "fault"]);
    let touching_ns: u64 = stacks
        .iter()
        .filter(|(k, _)| k.contains("touch_pages"))
        .map(|(_, ns)| ns)
        .sum();
    let total_ns: u64 = stacks.values().sum();
    // One sample per fault: count them in perf's view of the file.
    let script = perf_script_clean(&file);
    let samples = parse_script(&script);
    let faults: Vec<_> = samples.iter().filter(|s| s.event == "fault-time").collect();
    let touching = faults
        .iter()
        .filter(|s| s.frames.iter().any(|(f, _)| f == "touch_pages"))
        .count() as u64;
    let waits = samples.iter().filter(|s| s.event == "fault-wait").count();
    eprintln!(
        "{name} ({mode}, {device:?}): {} fault-time samples, {touching} under touch_pages, getrusage {majflt} major faults; {:.1} ms in faults, {:.1}% under touch_pages; {waits} fault-wait samples\n{}",
        faults.len(),
        total_ns as f64 / 1e6,
        100.0 * touching_ns as f64 / total_ns.max(1) as f64,
        summary_line(&stderr),
    );
    assert!(
        touching.abs_diff(majflt) * 100 <= majflt,
        "{touching} fault-time samples under touch_pages vs {majflt} major faults (1%)\n{stderr}"
    );
    assert!(
        touching_ns as f64 >= 0.9 * total_ns as f64,
        "{touching_ns} of {total_ns} ns under touch_pages"
    );
    match device {
        // The reads never made the thread wait: what the faults cost is all in fault-time.
        Device::Zram => assert!(
            waits as u64 * 10 < majflt,
            "{waits} fault-wait samples for {majflt} major faults on zram"
        ),
        // The worker reads while the thread waits: most faults have a wait of their own.
        Device::Loop => assert!(
            waits as u64 * 2 >= majflt,
            "{waits} fault-wait samples for {majflt} major faults on a loop device"
        ),
    }
    // analyze cache: the pages read in are its misses (cachestat's count, in the kernel).
    let out = analyze(&["cache"], &file);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let misses: u64 = text
        .lines()
        .next()
        .and_then(|l| l.split(", ").find_map(|part| part.strip_suffix(" misses")))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no misses in analyze cache:\n{text}"));
    eprintln!("{name} ({mode}, {device:?}): analyze cache: {misses} misses");
    assert!(
        (0.9..=1.1).contains(&(misses as f64 / majflt as f64)),
        "{misses} page-cache misses vs {majflt} major faults:\n{text}"
    );
    assert!(text.contains(name), "the process is named: {text}");
}

#[test]
fn major_faults_that_never_slept_frame_pointers() {
    check_faults("faulter-fp", "fp", Device::Zram);
}

#[test]
fn major_faults_that_never_slept_dwarf() {
    check_faults("faulter-nofp", "dwarf", Device::Zram);
}

#[test]
fn major_faults_that_waited_frame_pointers() {
    check_faults("faulter-fp", "fp", Device::Loop);
}

#[test]
fn major_faults_that_waited_dwarf() {
    check_faults("faulter-nofp", "dwarf", Device::Loop);
}
