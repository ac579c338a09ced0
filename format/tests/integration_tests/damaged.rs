//! Damaged input gets an error naming the file, the offset and what is wrong.

use format::{Features, PerfFileReader, PerfFileWriter};

use crate::common::TempDir;
use crate::roundtrip::cpu_clock_attr;

fn open_err(path: &std::path::Path) -> String {
    match PerfFileReader::open(path) {
        Ok(_) => panic!("{} should not open", path.display()),
        Err(e) => e.to_string(),
    }
}

fn good_file(dir: &TempDir) -> Vec<u8> {
    let p = dir.path("good.data");
    let w = PerfFileWriter::create(&p, vec![cpu_clock_attr(0)]).unwrap();
    w.finish(&Features::default()).unwrap();
    std::fs::read(p).unwrap()
}

#[test]
fn empty_file_and_directory() {
    let dir = TempDir::new("damaged-empty");
    let empty = dir.path("empty.data");
    std::fs::write(&empty, b"").unwrap();
    let e = open_err(&empty);
    assert!(e.contains("empty.data") && e.contains("empty file"), "{e}");
    let e = open_err(&dir.0);
    assert!(e.contains("is a directory"), "{e}");
    let e = open_err(&dir.path("missing.data"));
    assert!(
        e.contains("missing.data") && e.contains("No such file"),
        "{e}"
    );
}

#[test]
fn wrong_magic() {
    let dir = TempDir::new("damaged-magic");
    let p = dir.path("text.data");
    std::fs::write(&p, b"this is not a perf.data file at all, just text\n").unwrap();
    let e = open_err(&p);
    assert!(
        e.contains("text.data") && e.contains("magic at offset 0") && e.contains("this is "),
        "{e}"
    );
}

#[test]
fn sizes_pointing_past_the_end() {
    let dir = TempDir::new("damaged-sizes");
    let good = good_file(&dir);
    // (offset of the field, value, words expected in the message)
    let cases: [(usize, u64, &str); 5] = [
        (8, 77, "offset 8: header size is 77"),
        (24, 1 << 40, "offset 24: attribute section"),
        (32, 145, "offset 32: attribute section size 145"),
        // As perf record leaves a file killed before it wrote its header (seen in a public
        // repository's perf.data): said as such, not as "size 0 is not a multiple".
        (32, 0, "offset 32: no events: the header lists none"),
        (40, 1 << 40, "offset 40: data section offset"),
    ];
    for (field, value, words) in cases {
        let mut bytes = good.clone();
        bytes[field..field + 8].copy_from_slice(&value.to_le_bytes());
        let p = dir.path("bad.data");
        std::fs::write(&p, &bytes).unwrap();
        let e = open_err(&p);
        assert!(
            e.contains("bad.data") && e.contains(words),
            "field {field}: {e}"
        );
    }
}

#[test]
fn header_cut_short() {
    let dir = TempDir::new("damaged-short");
    let good = good_file(&dir);
    let p = dir.path("short.data");
    std::fs::write(&p, &good[..60]).unwrap();
    let e = open_err(&p);
    assert!(e.contains("short.data") && e.contains("60 bytes"), "{e}");
}

/// A file of ten samples whose third says it has size 0; the third's offset.
fn with_a_record_of_size_zero(p: &std::path::Path) -> usize {
    let mut w = PerfFileWriter::create(p, vec![cpu_clock_attr(0)]).unwrap();
    for t in 0..10 {
        w.write_sample(
            0,
            &format::Sample {
                time: t,
                pid: 1,
                tid: 1,
                ..Default::default()
            },
        )
        .unwrap();
    }
    w.finish(&Features::default()).unwrap();
    let mut bytes = std::fs::read(p).unwrap();
    let mut first = u64::from_le_bytes(bytes[40..48].try_into().unwrap()) as usize;
    // The writer starts the data with an empty round (FINISHED_ROUND, 8 bytes).
    if u32::from_le_bytes(bytes[first..first + 4].try_into().unwrap()) == 68 {
        first += 8;
    }
    let sample_size = u16::from_le_bytes(bytes[first + 6..first + 8].try_into().unwrap()) as usize;
    let third = first + 2 * sample_size;
    bytes[third + 6..third + 8].copy_from_slice(&0u16.to_le_bytes());
    std::fs::write(p, &bytes).unwrap();
    third
}

#[test]
fn record_of_size_zero_stops_reading_with_a_note() {
    let dir = TempDir::new("damaged-zero");
    let p = dir.path("zero.data");
    let third = with_a_record_of_size_zero(&p);
    let mut r = PerfFileReader::open(&p).unwrap();
    assert!(
        r.notes()
            .iter()
            .any(|n| n.contains(&format!("offset {third}")) && n.contains("size 0")),
        "{:?}",
        r.notes()
    );
    let mut n = 0;
    while r.next_record().unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, 2);
}

/// An unwalked reader knows nothing of a damaged record until its records are walked, which
/// iterating them does first: then it reads what a walked reader reads.
#[test]
fn an_unwalked_reader_walks_its_records_before_iterating_them() {
    let dir = TempDir::new("damaged-unwalked");
    let p = dir.path("zero.data");
    let third = with_a_record_of_size_zero(&p);
    let mut r = PerfFileReader::open_unwalked(&p).unwrap();
    assert!(!r.is_walked() && r.notes().is_empty() && r.record_counts().is_empty());
    let declared = r.records_range();
    assert!(
        declared.end > third as u64,
        "the declared data section: {declared:?}"
    );
    let mut n = 0;
    while r.next_record().unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, 2);
    assert!(r.is_walked());
    assert!(
        r.notes()
            .iter()
            .any(|n| n.contains(&format!("offset {third}"))),
        "{:?}",
        r.notes()
    );
    assert_eq!(r.records_range().end, third as u64);

    // An intact file: walking later counts what walking at once counts.
    let good = dir.path("good.data");
    let mut w = PerfFileWriter::create(&good, vec![cpu_clock_attr(0)]).unwrap();
    for t in 0..10 {
        let sample = format::Sample {
            time: t,
            ..Default::default()
        };
        w.write_sample(0, &sample).unwrap();
    }
    w.finish(&Features::default()).unwrap();
    let at_once = PerfFileReader::open(&good).unwrap();
    let later = PerfFileReader::open_unwalked(&good).unwrap();
    assert_eq!(later.records_range(), at_once.records_range());
    assert!(later.record_counts().is_empty());
    let later = later.walked().unwrap();
    assert_eq!(later.record_counts(), at_once.record_counts());
    assert_eq!(later.record_counts().get(&9), Some(&10));
}
