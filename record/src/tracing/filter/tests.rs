//! What compiled filters mean: each run by the kernel's rules (interpret.rs) over synthetic
//! payloads and checked against the same condition written in Rust.

use super::interpret::{passes, Task};
use super::*;

/// A made-up event with one field of each kind filters read.
const FORMAT: &str = "name: sample
ID: 900
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:int a;\toffset:8;\tsize:4;\tsigned:1;
\tfield:unsigned int u;\toffset:12;\tsize:4;\tsigned:0;
\tfield:long long big;\toffset:16;\tsize:8;\tsigned:1;
\tfield:unsigned char b;\toffset:24;\tsize:1;\tsigned:0;
\tfield:short s;\toffset:26;\tsize:2;\tsigned:1;
\tfield:char name[16];\toffset:28;\tsize:16;\tsigned:0;
\tfield:__data_loc char[] path;\toffset:44;\tsize:4;\tsigned:0;
\tfield:const char * ptr;\toffset:48;\tsize:8;\tsigned:0;
\tfield:int dfd;\toffset:56;\tsize:8;\tsigned:0;
\tfield:unsigned long pid;\toffset:64;\tsize:8;\tsigned:0;
\tfield:u8 bytes[4];\toffset:72;\tsize:4;\tsigned:0;
\tfield:__rel_loc char[] rel;\toffset:76;\tsize:4;\tsigned:0;

print fmt: \"a=%d\", REC->a
";

/// The payload's values, as Rust sees them.
#[derive(Debug, Clone, Default)]
struct Rec {
    common_pid: i32,
    a: i32,
    u: u32,
    big: i64,
    b: u8,
    s: i16,
    name: String,
    path: String,
    ptr: u64,
    dfd: i64,
    pid: u64,
}

impl Rec {
    fn raw(&self) -> Vec<u8> {
        let mut r = vec![0u8; 80];
        r[0..2].copy_from_slice(&900u16.to_le_bytes());
        r[4..8].copy_from_slice(&self.common_pid.to_le_bytes());
        r[8..12].copy_from_slice(&self.a.to_le_bytes());
        r[12..16].copy_from_slice(&self.u.to_le_bytes());
        r[16..24].copy_from_slice(&self.big.to_le_bytes());
        r[24] = self.b;
        r[26..28].copy_from_slice(&self.s.to_le_bytes());
        let n = self.name.len().min(16);
        r[28..28 + n].copy_from_slice(&self.name.as_bytes()[..n]);
        r[48..56].copy_from_slice(&self.ptr.to_le_bytes());
        r[56..64].copy_from_slice(&self.dfd.to_le_bytes());
        r[64..72].copy_from_slice(&self.pid.to_le_bytes());
        let loc = r.len() as u32 | ((self.path.len() as u32 + 1) << 16);
        r[44..48].copy_from_slice(&loc.to_le_bytes());
        r.extend_from_slice(self.path.as_bytes());
        r.push(0);
        r
    }
}

fn format() -> TraceFormat {
    TraceFormat::parse(FORMAT).unwrap()
}

fn compiled(text: &str) -> Filter {
    parse(text)
        .and_then(|p| p.compile("test:sample", &format()))
        .unwrap_or_else(|e| panic!("{text}: {e:#}"))
}

fn compile_error(text: &str) -> String {
    let e = parse(text)
        .and_then(|p| p.compile("test:sample", &format()))
        .unwrap_err();
    format!("{e:#}")
}

/// A small deterministic generator (no dependency for tests).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.next() as usize % xs.len()].clone()
    }
}

const NAMES: [&str; 6] = ["bash", "basher", "sh", "dash", "", "zsh-5.9"];
const LONG_PATH: &str =
    "/a/very/long/path/that/goes/on/and/on/past/the/sixty/four/bytes/compared/etc/passwd";
const PATHS: [&str; 5] = ["/etc/passwd", "/tmp/x", "", "passwd", LONG_PATH];

fn records(rng: &mut Rng, n: usize) -> Vec<Rec> {
    let ints = [
        0i64,
        1,
        -1,
        2,
        3,
        7,
        8,
        100,
        -100,
        255,
        4096,
        i32::MAX as i64,
        i32::MIN as i64,
    ];
    (0..n)
        .map(|_| Rec {
            common_pid: rng.pick(&ints) as i32,
            a: rng.pick(&ints) as i32,
            u: rng.pick(&[0u32, 1, 7, 4000000000, u32::MAX, 0xffffff9c]),
            big: rng.pick(&[0i64, -1, i64::MIN, i64::MAX, 1 << 40, 5]),
            b: rng.pick(&[0u8, 1, 0x80, 0xff, 3]),
            s: rng.pick(&[0i16, -1, i16::MIN, 300, 2]),
            name: rng.pick(&NAMES).into(),
            path: rng.pick(&PATHS).into(),
            ptr: rng.pick(&[0u64, 0x7fff0000, u64::MAX]),
            dfd: rng.pick(&[-100i64, 3, 0]),
            pid: rng.pick(&[1u64, 42]),
        })
        .collect()
}

type Cond = fn(&Rec, &Task) -> bool;

/// Conditions and what they mean.
fn atoms() -> Vec<(&'static str, Cond)> {
    vec![
        ("a < 0", |r, _| r.a < 0),
        ("a >= 8", |r, _| r.a >= 8),
        ("a == -100", |r, _| r.a == -100),
        ("a != 0x7fffffff", |r, _| r.a != i32::MAX),
        ("u > 4000000000", |r, _| r.u > 4_000_000_000),
        ("u <= 7", |r, _| r.u <= 7),
        ("u == -100", |r, _| r.u == -100i32 as u32),
        ("u > -1", |_, _| false),
        ("big < 0", |r, _| r.big < 0),
        ("big > 1099511627775", |r, _| r.big > (1 << 40) - 1),
        ("big == 0x7fffffffffffffff", |r, _| r.big == i64::MAX),
        ("b & 0x80", |r, _| r.b & 0x80 != 0),
        ("b > 127", |r, _| r.b > 127),
        ("b == 0377", |r, _| r.b == 0o377),
        ("s < 0", |r, _| r.s < 0),
        ("s == 300", |r, _| r.s == 300),
        ("common_pid < 0", |r, _| r.common_pid < 0),
        ("ptr == 0", |r, _| r.ptr == 0),
        ("ptr > 0x7fff0000", |r, _| r.ptr > 0x7fff0000),
        ("dfd == -100", |r, _| r.dfd == -100),
        ("pid == 42", |r, _| r.pid == 42),
        ("name == \"bash\"", |r, _| r.name == "bash"),
        ("name != 'sh'", |r, _| r.name != "sh"),
        ("name ~ \"ba*\"", |r, _| r.name.starts_with("ba")),
        ("name == *sh", |r, _| r.name.ends_with("sh")),
        ("name ~ '*as*'", |r, _| r.name.contains("as")),
        ("name != \"*-*\"", |r, _| !r.name.contains('-')),
        ("name == \"\"", |r, _| r.name.is_empty()),
        ("name ~ \"*\"", |_, _| true),
        ("path == \"/etc/passwd\"", |r, _| r.path == "/etc/passwd"),
        ("path ~ \"*passwd\"", |r, _| {
            // Strings compare over their first 64 bytes.
            r.path[..r.path.len().min(64)].ends_with("passwd")
        }),
        ("path ~ \"/tmp/*\"", |r, _| r.path.starts_with("/tmp/")),
        ("path != \"\"", |r, _| !r.path.is_empty()),
        ("comm == \"bash\"", |_, t| &t.comm[..5] == b"bash\0"),
        ("COMM ~ \"*sh\"", |_, t| {
            let end = t.comm.iter().position(|&c| c == 0).unwrap();
            t.comm[..end].ends_with(b"sh")
        }),
        ("tid == 101", |_, t| t.tid == 101),
        ("cpu != 2", |_, t| t.cpu != 2),
        ("CPU < 4", |_, t| t.cpu < 4),
    ]
}

fn tasks() -> Vec<Task> {
    let mut other = Task::named("zsh");
    other.cpu = 7;
    other.tid = 5;
    vec![
        Task::named("bash"),
        Task::named("dash"),
        other,
        Task::named(""),
    ]
}

#[test]
fn each_condition_means_what_it_says() {
    let mut rng = Rng(1);
    let recs = records(&mut rng, 300);
    for (text, cond) in atoms() {
        let f = compiled(text);
        let mut seen = [false; 2];
        for r in &recs {
            let raw = r.raw();
            for t in tasks() {
                let want = cond(r, &t);
                seen[want as usize] = true;
                assert_eq!(passes(&f, &raw, &t), want, "{text} over {r:?} by {t:?}");
            }
        }
        // Every condition but the constant ones is tested both ways.
        if !["u > -1", "name ~ \"*\""].contains(&text) {
            assert_eq!(seen, [true, true], "{text}: only one outcome seen");
        }
    }
}

type Meaning = Box<dyn Fn(&Rec, &Task) -> bool>;

/// A random tree over the conditions, as text and as its meaning.
fn tree(rng: &mut Rng, depth: u32, atoms: &[(&'static str, Cond)]) -> (String, Meaning) {
    let kind = if depth == 0 { 0 } else { rng.next() % 5 };
    match kind {
        0 | 1 => {
            let (text, cond) = atoms[rng.next() as usize % atoms.len()];
            (text.to_string(), Box::new(cond))
        }
        2 => {
            let (t, f) = tree(rng, depth - 1, atoms);
            let bang = if rng.next().is_multiple_of(2) {
                format!("!({t})")
            } else {
                format!("! ( {t} )")
            };
            (bang, Box::new(move |r, k| !f(r, k)))
        }
        _ => {
            let (ta, fa) = tree(rng, depth - 1, atoms);
            let (tb, fb) = tree(rng, depth - 1, atoms);
            if kind == 3 {
                (
                    format!("({ta}) && ({tb})"),
                    Box::new(move |r, k| fa(r, k) && fb(r, k)),
                )
            } else {
                (
                    format!("({ta})||({tb})"),
                    Box::new(move |r, k| fa(r, k) || fb(r, k)),
                )
            }
        }
    }
}

#[test]
fn combinations_mean_what_they_say() {
    let atoms = atoms();
    let mut rng = Rng(7);
    let recs = records(&mut rng, 60);
    let mut compiled_count = 0;
    for _ in 0..400 {
        let (text, meaning) = tree(&mut rng, 4, &atoms);
        let Ok(f) = parse(&text).and_then(|p| p.compile("test:sample", &format())) else {
            // Only the limits may refuse a well-formed tree.
            let e = format!(
                "{:#}",
                parse(&text)
                    .and_then(|p| p.compile("t", &format()))
                    .unwrap_err()
            );
            assert!(e.contains("at most"), "{text}: {e}");
            continue;
        };
        compiled_count += 1;
        for r in &recs {
            let raw = r.raw();
            for t in tasks() {
                assert_eq!(
                    passes(&f, &raw, &t),
                    meaning(r, &t),
                    "{text} over {r:?} by {t:?}"
                );
            }
        }
    }
    assert!(compiled_count > 300);
}

#[test]
fn precedence_without_parentheses() {
    // && binds tighter than ||, as in C and in the kernel.
    let f = compiled("a == 1 || a == 2 && u == 7");
    let t = Task::named("x");
    let rec = |a, u| {
        Rec {
            a,
            u,
            ..Default::default()
        }
        .raw()
    };
    assert!(passes(&f, &rec(1, 0), &t));
    assert!(!passes(&f, &rec(2, 0), &t));
    assert!(passes(&f, &rec(2, 7), &t));
}

#[test]
fn the_program_is_postfix() {
    use bpf::trace::{Cmp, FilterInsn, Operand};
    let f = compiled("!(a < 0 || u == 7) && name == bash && name ~ bash");
    let a = FilterInsn::Number {
        operand: Operand::Field {
            offset: 8,
            size: 4,
            signed: true,
        },
        cmp: Cmp::Lt,
        value: 0,
        unsigned: false,
    };
    let u = FilterInsn::Number {
        operand: Operand::Field {
            offset: 12,
            size: 4,
            signed: false,
        },
        cmp: Cmp::Eq,
        value: 7,
        unsigned: true,
    };
    assert_eq!(f.insns[..4], [a, u, FilterInsn::Or, FilterInsn::Not]);
    assert_eq!(f.insns.len(), 8);
    assert_eq!(f.insns[7], FilterInsn::And);
    // One pattern for the same string twice.
    assert_eq!(f.patterns.len(), 1);
}

#[test]
fn mistakes_are_refused_with_their_place() {
    for (text, says) in [
        ("count >> 3", "at column 8: expected a value after '>'"),
        ("nosuch == 1", "at column 1: sample has no field 'nosuch'"),
        (
            "a ~ \"x*\"",
            "at column 3: '~' matches strings, and 'a' is a number (int)",
        ),
        (
            "name < 3",
            "at column 6: '<' compares numbers, and 'name' is a string",
        ),
        ("name & 3", "'&' compares numbers"),
        ("comm > 1", "'comm' is a string"),
        (
            "ptr == \"/etc/passwd\"",
            "at column 8: 'ptr' is a pointer (const char *)",
        ),
        (
            "a == abc",
            "at column 6: 'a' is a number (int), and 'abc' is not",
        ),
        (
            "bytes == 1",
            "'bytes' (u8) is neither a number nor a string",
        ),
        ("rel == \"x\"", "__rel_loc"),
        ("name == \"b*sh\"", "only the patterns x, x*, *x and *x*"),
        ("pid ~ 1", "'~' matches strings"),
    ] {
        let e = compile_error(text);
        assert!(e.contains(says), "{text}: {e}");
        assert!(
            e.starts_with("test:sample: --filter '") || e.starts_with("--filter '"),
            "{e}"
        );
    }
    // The closest names come with an unknown one.
    assert!(compile_error("nme == x").contains("closest: name"));
    // The caret stands under the column.
    let e = compile_error("count >> 3");
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(
        lines,
        [
            "--filter 'count >> 3': at column 8: expected a value after '>'",
            "    count >> 3",
            "           ^"
        ]
    );
}

#[test]
fn limits() {
    // 33 conditions need 65 steps.
    let many = vec!["a == 1"; 33].join(" || ");
    assert!(compile_error(&many).contains("at most 64 fit"));
    let ok = vec!["a == 1"; 32].join(" || ");
    assert_eq!(compiled(&ok).insns.len(), 63);
    let strings: Vec<String> = (0..9).map(|i| format!("name == s{i}")).collect();
    assert!(compile_error(&strings.join(" || ")).contains("at most 8 different strings"));
    compiled(&strings[..8].join(" || "));
    let long = format!("name == \"{}\"", "x".repeat(65));
    assert!(compile_error(&long).contains("longer than the 64 bytes"));
}

#[test]
fn a_field_wins_over_the_task() {
    // The event's own `pid` field, not the process id.
    let f = compiled("pid == 42");
    let r = Rec {
        pid: 42,
        ..Default::default()
    };
    let mut t = Task::named("x");
    t.pid = 7;
    assert!(passes(&f, &r.raw(), &t));
}

#[test]
fn the_task_where_no_field_has_the_name() {
    let only_common = FORMAT.split("\n\n").next().unwrap().to_string() + "\n";
    let format = TraceFormat::parse(&only_common).unwrap();
    let f = |text: &str| parse(text).unwrap().compile("t:common", &format).unwrap();
    let raw = Rec::default().raw();
    let mut t = Task::named("bash");
    t.pid = 7;
    assert!(passes(&f("pid == 7 && tid == 101 && cpu == 2"), &raw, &t));
    assert!(!passes(&f("pid != 7"), &raw, &t));
    assert!(passes(&f("comm == bash"), &raw, &t));
}
