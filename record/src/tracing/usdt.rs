//! USDT probes: the `.note.stapsdt` notes of a binary (owner `stapsdt`, type 3): the probe's
//! address, the `.stapsdt.base` address and its semaphore's (8 bytes each on x86-64), then
//! NUL-terminated provider, name and argument specs (`-4@%eax 8@%rdx 8@-16(%rbp)`: a size,
//! negative when signed, and where the value is). libbpf reads the notes again when it
//! attaches; here they name the probes and count and type their arguments. The BPF side
//! reads at most six (PROBE_ARGS): a probe with more (libbpf takes up to 12) keeps its first
//! six, as arg1..arg6.

use object::{Object, ObjectSection};

use super::formats::Arg;

/// One probe of a binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub provider: String,
    pub name: String,
    pub address: u64,
    pub semaphore: u64,
    /// The argument specs, as the note spells them.
    pub args: Vec<String>,
}

impl Probe {
    /// The arguments' types as the BPF side reads them (8 bytes each, sign-extended when
    /// the spec's size is negative), at most `max`.
    pub fn arg_types(&self, max: usize) -> Vec<Arg> {
        self.args
            .iter()
            .take(max)
            .map(|spec| {
                if spec.starts_with('-') || !spec.contains('@') {
                    Arg::Signed
                } else {
                    Arg::Unsigned
                }
            })
            .collect()
    }
}

const NT_STAPSDT: u32 = 3;

/// The USDT probes of an ELF file's bytes (none if it has no `.note.stapsdt`).
pub fn probes(data: &[u8]) -> anyhow::Result<Vec<Probe>> {
    let obj = object::File::parse(data).map_err(|e| anyhow::anyhow!("not an ELF file ({e})"))?;
    let Some(section) = obj.section_by_name(".note.stapsdt") else {
        return Ok(Vec::new());
    };
    let notes = section.data()?;
    Ok(parse_notes(notes))
}

/// Notes are 4-byte aligned: namesz, descsz, type, name, desc.
fn parse_notes(mut b: &[u8]) -> Vec<Probe> {
    let align4 = |n: usize| n.div_ceil(4) * 4;
    let mut out = Vec::new();
    while b.len() >= 12 {
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        let (namesz, descsz, kind) = (u32_at(0) as usize, u32_at(4) as usize, u32_at(8));
        let name_end = 12 + align4(namesz);
        let Some(desc_end) = name_end.checked_add(align4(descsz)) else {
            break;
        };
        if desc_end > b.len() || name_end + descsz > b.len() {
            break;
        }
        let owner = &b[12..12 + namesz];
        let desc = &b[name_end..name_end + descsz];
        if kind == NT_STAPSDT && owner.strip_suffix(b"\0").unwrap_or(owner) == b"stapsdt" {
            if let Some(p) = parse_desc(desc) {
                out.push(p);
            }
        }
        b = &b[desc_end..];
    }
    out
}

fn parse_desc(d: &[u8]) -> Option<Probe> {
    let u64_at = |o: usize| Some(u64::from_le_bytes(d.get(o..o + 8)?.try_into().ok()?));
    let (address, semaphore) = (u64_at(0)?, u64_at(16)?);
    let mut strings = d
        .get(24..)?
        .split(|&c| c == 0)
        .map(|s| String::from_utf8_lossy(s).into_owned());
    let provider = strings.next()?;
    let name = strings.next()?;
    let args = strings
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .map(String::from)
        .collect();
    Some(Probe {
        provider,
        name,
        address,
        semaphore,
        args,
    })
}

/// The probe `provider:name` (or `name` alone, when one provider has it) among `probes`, or
/// an error that lists the closest ones.
pub fn find<'a>(
    probes: &'a [Probe],
    provider: Option<&str>,
    name: &str,
    file: &str,
) -> anyhow::Result<&'a Probe> {
    anyhow::ensure!(
        !probes.is_empty(),
        "{file} has no USDT probes (no .note.stapsdt notes)"
    );
    let found: Vec<&Probe> = probes
        .iter()
        .filter(|p| p.name == name && provider.is_none_or(|v| p.provider == v))
        .collect();
    match found.as_slice() {
        [p, rest @ ..] if rest.iter().all(|r| r.provider == p.provider) => Ok(p),
        [_, ..] => anyhow::bail!(
            "several providers of {file} have a probe '{name}': {}; name one (PROVIDER:NAME)",
            found
                .iter()
                .map(|p| p.provider.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        [] => {
            let all: Vec<String> = probes
                .iter()
                .map(|p| format!("{}:{}", p.provider, p.name))
                .collect();
            let query = match provider {
                Some(v) => format!("{v}:{name}"),
                None => name.to_string(),
            };
            let near = super::closest::list(&query, all.iter().map(String::as_str), 5);
            anyhow::bail!("{file} has no USDT probe {query}; the closest: {near}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tracing::testing::skip_or_fail;

    fn note(provider: &str, name: &str, args: &str, pc: u64) -> Vec<u8> {
        let mut desc = Vec::new();
        desc.extend_from_slice(&pc.to_le_bytes());
        desc.extend_from_slice(&0x9000u64.to_le_bytes());
        desc.extend_from_slice(&0x7000u64.to_le_bytes());
        for s in [provider, name, args] {
            desc.extend_from_slice(s.as_bytes());
            desc.push(0);
        }
        let mut n = Vec::new();
        n.extend_from_slice(&8u32.to_le_bytes());
        n.extend_from_slice(&(desc.len() as u32).to_le_bytes());
        n.extend_from_slice(&NT_STAPSDT.to_le_bytes());
        n.extend_from_slice(b"stapsdt\0");
        n.extend_from_slice(&desc);
        n.resize(n.len().div_ceil(4) * 4, 0);
        n
    }

    #[test]
    fn notes_and_arguments() {
        let mut notes = note("app", "start", "-4@%edi 8@%rsi", 0x1000);
        notes.extend(note("app", "done", "", 0x1010));
        notes.extend(note("other", "done", "8@-16(%rbp)", 0x1020));
        let probes = parse_notes(&notes);
        assert_eq!(probes.len(), 3);
        assert_eq!(probes[0].args, ["-4@%edi", "8@%rsi"]);
        assert_eq!((probes[0].address, probes[0].semaphore), (0x1000, 0x7000));
        assert_eq!(probes[0].arg_types(6), [Arg::Signed, Arg::Unsigned]);
        assert!(probes[1].args.is_empty());
        let many = Probe {
            args: vec!["-8@%rax".into(); 9],
            ..probes[0].clone()
        };
        assert_eq!(many.arg_types(6).len(), 6);

        assert_eq!(
            find(&probes, Some("app"), "start", "f").unwrap().address,
            0x1000
        );
        assert_eq!(find(&probes, None, "start", "f").unwrap().provider, "app");
        let e = find(&probes, None, "done", "f").unwrap_err().to_string();
        assert!(
            e.contains("several providers of f have a probe 'done': app, other"),
            "{e}"
        );
        let e = find(&probes, Some("app"), "stat", "f")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("f has no USDT probe app:stat; the closest: app:start"),
            "{e}"
        );
        let e = find(&[], None, "x", "f").unwrap_err().to_string();
        assert!(e.contains("no USDT probes"));
        // Damaged notes end the list, never panic.
        assert!(parse_notes(&notes[..notes.len() - 3]).len() == 2);
        assert!(parse_notes(&[0xff; 20]).is_empty());
    }

    #[test]
    fn python_and_libc() {
        let Ok(py) = std::fs::read("/usr/bin/python3.11") else {
            return skip_or_fail("no /usr/bin/python3.11");
        };
        let found = probes(&py).unwrap();
        let entry = find(&found, Some("python"), "function__entry", "python3.11").unwrap();
        // readelf -n: "Arguments: 8@%r14 8@%r15 -4@%eax" (or similar): three arguments.
        assert_eq!(entry.args.len(), 3, "{entry:?}");
        assert_eq!(entry.arg_types(6)[2], Arg::Signed);
        assert!(entry.semaphore != 0);
        for name in ["function__return", "line", "gc__start", "gc__done"] {
            assert!(find(&found, Some("python"), name, "p").is_ok(), "{name}");
        }
        let e = find(&found, Some("python"), "function_entry", "python3.11")
            .unwrap_err()
            .to_string();
        assert!(e.contains("the closest: python:function__entry"), "{e}");
        match std::fs::read("/usr/lib/x86_64-linux-gnu/libc.so.6") {
            Ok(libc) => {
                let p = probes(&libc).unwrap();
                // This Debian's libc carries no notes; another's may.
                if p.is_empty() {
                    let e = find(&p, None, "setjmp", "libc.so.6")
                        .unwrap_err()
                        .to_string();
                    assert_eq!(e, "libc.so.6 has no USDT probes (no .note.stapsdt notes)");
                } else {
                    assert!(p.iter().all(|x| x.provider == "libc"));
                }
            }
            Err(_) => skip_or_fail("no libc.so.6"),
        }
    }
}
