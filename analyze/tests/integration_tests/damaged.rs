//! Damaged binaries: a recorded program's file with bytes flipped after its ELF header (its
//! build id intact, so that the loader takes it for the recorded one), found through --symfs.
//! analyze must not panic or hang on any of them: a bad file is a warning and `[unknown]`
//! frames.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{can_record, fixture, record_ours, Tmp};

/// A small deterministic generator (xorshift64*), so that a failure can be replayed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// The file range of the build-id note, which the damage leaves alone.
fn build_id_note(bytes: &[u8]) -> std::ops::Range<usize> {
    use object::{Object, ObjectSection};
    let obj = object::File::parse(bytes).unwrap();
    let (off, size) = obj
        .section_by_name(".note.gnu.build-id")
        .and_then(|s| s.file_range())
        .unwrap();
    off as usize..(off + size) as usize
}

/// Runs analyze with `args`; fails the test on a panic, a signal or a run over `limit`.
fn run_bounded(args: &[&str], limit: Duration, what: &str) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_analyze"))
        .args(args)
        .env_remove("DEBUGINFOD_URLS")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read standard error meanwhile: a long message must not block the child on a full pipe.
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut err = String::new();
        use std::io::Read;
        let _ = stderr.read_to_string(&mut err);
        err
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!(
                "{what}: analyze {args:?} ran over {limit:?}; {}",
                keep(args)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let err = reader.join().unwrap();
    assert!(
        status.code().is_some_and(|c| c == 0 || c == 1) && !err.contains("panicked"),
        "{what}: analyze {args:?} exited {status}; {}:\n{err}",
        keep(args)
    );
}

/// Keeps the test's directory (the recording and the damaged copy under symfs/) for replay.
fn keep(args: &[&str]) -> String {
    let input = args
        .iter()
        .skip_while(|a| **a != "-i")
        .nth(1)
        .unwrap_or(&"");
    let dir = Path::new(input).parent().unwrap();
    let kept = dir.with_extension("kept");
    let _ = std::fs::remove_dir_all(&kept);
    let _ = Command::new("cp").arg("-a").arg(dir).arg(&kept).status();
    format!("replay with the files in {}", kept.display())
}

#[test]
fn eighty_damaged_copies_of_a_recorded_binary_neither_panic_nor_hang() {
    if !can_record() {
        return;
    }
    let dir = Tmp::new("damaged");
    let program = dir.0.join("prog");
    std::fs::copy(fixture("rsprog-nofp"), &program).unwrap();
    let file = dir.0.join("rec.data");
    record_ours(&file, &["--no-io", "--no-wakeups"], &program, &["0.3", "1"]);
    let original = std::fs::read(&program).unwrap();
    let note = build_id_note(&original);
    let symfs = dir.0.join("symfs");
    let damaged = symfs.join(program.strip_prefix("/").unwrap());
    std::fs::create_dir_all(damaged.parent().unwrap()).unwrap();
    std::fs::remove_file(&program).unwrap();
    let f = file.to_str().unwrap();
    let s = symfs.to_str().unwrap();
    // BPFPERF_DAMAGE_SEED tries other damage (the default is what CI runs).
    let seed = std::env::var("BPFPERF_DAMAGE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x9e37_79b9_7f4a_7c15u64);
    let mut rng = Rng(seed | 1);
    for copy in 0..80 {
        let mut bytes = original.clone();
        // A few bytes to a few hundred, anywhere after the ELF header but the build id; in
        // every other copy only in the section headers (offsets and sizes of everything).
        let flips = 1 + (rng.next() % 300) as usize;
        let region = if copy % 2 == 0 {
            64..bytes.len()
        } else {
            let shoff = u64::from_le_bytes(original[40..48].try_into().unwrap()) as usize;
            let shnum = u16::from_le_bytes(original[60..62].try_into().unwrap()) as usize;
            shoff..shoff + shnum * 64
        };
        for _ in 0..flips / (1 + 9 * (copy % 2)) + 1 {
            let at = region.start + (rng.next() as usize) % region.len();
            if !note.contains(&at) {
                bytes[at] ^= (rng.next() % 255 + 1) as u8;
            }
        }
        std::fs::write(&damaged, &bytes).unwrap();
        let what = format!("copy {copy} ({flips} bytes flipped)");
        let limit = Duration::from_secs(30);
        run_bounded(&["report", "--folded", "--symfs", s, "-i", f], limit, &what);
        run_bounded(
            &["report", "--sort", "srcline", "--symfs", s, "-i", f],
            limit,
            &what,
        );
        run_bounded(
            &["annotate", "rsprog::count_words", "--symfs", s, "-i", f],
            limit,
            &what,
        );
        if Path::new(&damaged).exists() && copy % 20 == 0 {
            run_bounded(
                &[
                    "archive",
                    "--symfs",
                    s,
                    "-i",
                    f,
                    "-o",
                    &format!("{f}.tar.zst"),
                ],
                limit,
                &what,
            );
        }
    }
}
