//! Format files for probes, made up in the kernel's own syntax, so that `perf script` decodes
//! our probes' payloads as it decodes the kernel's uprobe and kprobe events.
//!
//! Fields and print formats follow the kernel's (kernel/trace/trace_probe.c): an entry has
//! `unsigned long __probe_ip` then its arguments, printed `"(%lx) arg1=%Ld ..."`; a return
//! `__probe_func` and `__probe_ret_ip`, printed `"(%lx <- %lx) ..."`; an `s64` argument
//! prints with `%Ld`, a `u64` with `%Lu`. The offsets are those of the payloads the BPF
//! side builds (probes.bpf.c): `[common 8][__probe_ip 8][arg1..argN 8 each]`, and for a
//! return its entry's payload with 6 arguments then `[__probe_ret_ip 8][ret 8]`.

use bpf::trace::{PROBE_ARGS, PROBE_HEADER};

/// Bytes of a return probe's payload.
pub const RETURN_SIZE: usize = PROBE_HEADER + 8 * PROBE_ARGS + 16;

/// How an argument's 8 bytes read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg {
    Signed,
    Unsigned,
}

impl Arg {
    fn decl(self) -> (&'static str, u8, &'static str) {
        match self {
            Arg::Signed => ("s64", 1, "%Ld"),
            Arg::Unsigned => ("u64", 0, "%Lu"),
        }
    }
}

/// The common header every record starts with (as tracefs writes it on this kernel).
const COMMON: &str = "\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;
";

fn field(out: &mut String, decl: &str, offset: usize, signed: u8) {
    out.push_str(&format!(
        "\tfield:{decl};\toffset:{offset};\tsize:8;\tsigned:{signed};\n"
    ));
}

/// The format of an entry probe (`name` without its system) with `args` as arg1..argN.
pub fn entry(name: &str, id: u64, args: &[Arg]) -> String {
    let mut text = format!("name: {name}\nID: {id}\nformat:\n{COMMON}\n");
    field(&mut text, "unsigned long __probe_ip", 8, 0);
    let mut fmt = String::from("(%lx)");
    let mut recs = String::from("REC->__probe_ip");
    for (i, a) in args.iter().enumerate() {
        let (ty, signed, conv) = a.decl();
        let n = i + 1;
        field(
            &mut text,
            &format!("{ty} arg{n}"),
            PROBE_HEADER + 8 * i,
            signed,
        );
        fmt.push_str(&format!(" arg{n}={conv}"));
        recs.push_str(&format!(", REC->arg{n}"));
    }
    text.push_str(&format!("\nprint fmt: \"{fmt}\", {recs}\n"));
    text
}

/// The format of a return probe: its function's address, the six arguments it was called
/// with, the address it returned to and the value it returned (`ret`).
pub fn ret(name: &str, id: u64) -> String {
    let mut text = format!("name: {name}\nID: {id}\nformat:\n{COMMON}\n");
    field(&mut text, "unsigned long __probe_func", 8, 0);
    let mut fmt = String::from("(%lx <- %lx)");
    let mut recs = String::from("REC->__probe_func, REC->__probe_ret_ip");
    for i in 0..PROBE_ARGS {
        let n = i + 1;
        field(&mut text, &format!("s64 arg{n}"), PROBE_HEADER + 8 * i, 1);
        fmt.push_str(&format!(" arg{n}=%Ld"));
        recs.push_str(&format!(", REC->arg{n}"));
    }
    field(
        &mut text,
        "unsigned long __probe_ret_ip",
        RETURN_SIZE - 16,
        0,
    );
    field(&mut text, "s64 ret", RETURN_SIZE - 8, 1);
    fmt.push_str(" ret=%Ld");
    recs.push_str(", REC->ret");
    text.push_str(&format!("\nprint fmt: \"{fmt}\", {recs}\n"));
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use format::{FieldKind, TraceFormat, Value};

    #[test]
    fn entry_reads_back() {
        let text = entry("getaddrinfo", 60100, &[Arg::Signed, Arg::Unsigned]);
        let f = TraceFormat::parse(&text).unwrap();
        assert_eq!((f.name.as_str(), f.id), ("getaddrinfo", 60100));
        let names: Vec<&str> = f.fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "common_type",
                "common_flags",
                "common_preempt_count",
                "common_pid",
                "__probe_ip",
                "arg1",
                "arg2"
            ]
        );
        assert_eq!(f.fixed_size(), PROBE_HEADER + 16);
        let arg1 = f.field("arg1").unwrap();
        assert_eq!(
            (arg1.offset, arg1.size, arg1.signed, arg1.kind),
            (16, 8, true, FieldKind::Int)
        );
        assert!(!f.field("arg2").unwrap().signed);
        assert_eq!(
            f.print_fmt,
            "\"(%lx) arg1=%Ld arg2=%Lu\", REC->__probe_ip, REC->arg1, REC->arg2"
        );
        // Exactly the kernel's lines (tabs, semicolons), blank lines around the fields.
        assert!(
            text.contains("\n\n\tfield:unsigned long __probe_ip;\toffset:8;\tsize:8;\tsigned:0;\n")
        );
        assert!(text.contains("\tfield:s64 arg1;\toffset:16;\tsize:8;\tsigned:1;\n"));
        assert!(text.ends_with(
            ";\n\nprint fmt: \"(%lx) arg1=%Ld arg2=%Lu\", REC->__probe_ip, REC->arg1, REC->arg2\n"
        ));
        // No arguments: the address alone.
        let bare = TraceFormat::parse(&entry("f", 1, &[])).unwrap();
        assert_eq!(bare.print_fmt, "\"(%lx)\", REC->__probe_ip");
        assert_eq!(bare.fixed_size(), PROBE_HEADER);
    }

    #[test]
    fn return_reads_back() {
        let f = TraceFormat::parse(&ret("getaddrinfo__return", 60101)).unwrap();
        assert_eq!(f.fixed_size(), RETURN_SIZE);
        assert_eq!(RETURN_SIZE, 80);
        let at = |n: &str| f.field(n).map(|x| (x.offset, x.size, x.signed));
        assert_eq!(at("__probe_func"), Some((8, 8, false)));
        assert_eq!(at("arg1"), Some((16, 8, true)));
        assert_eq!(at("arg6"), Some((56, 8, true)));
        assert_eq!(at("__probe_ret_ip"), Some((64, 8, false)));
        assert_eq!(at("ret"), Some((72, 8, true)));
        assert!(f.print_fmt.starts_with("\"(%lx <- %lx) arg1=%Ld"));
        assert!(f.print_fmt.ends_with(" ret=%Ld\", REC->__probe_func, REC->__probe_ret_ip, REC->arg1, REC->arg2, REC->arg3, REC->arg4, REC->arg5, REC->arg6, REC->ret"));
        // A payload as the BPF side sends it decodes field by field.
        let mut raw = vec![0u8; RETURN_SIZE];
        raw[8..16].copy_from_slice(&0x401000u64.to_le_bytes());
        raw[16..24].copy_from_slice(&(-2i64).to_le_bytes());
        raw[64..72].copy_from_slice(&0x401234u64.to_le_bytes());
        raw[72..80].copy_from_slice(&(-11i64).to_le_bytes());
        let v = |n: &str| f.field(n).unwrap().value(&raw).unwrap();
        assert_eq!(v("__probe_func"), Value::Unsigned(0x401000));
        assert_eq!(v("arg1"), Value::Signed(-2));
        assert_eq!(v("__probe_ret_ip"), Value::Unsigned(0x401234));
        assert_eq!(v("ret"), Value::Signed(-11));
    }
}
