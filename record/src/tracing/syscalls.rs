//! `syscalls:sys_enter_NAME` and `sys_exit_NAME` taken the cheaper way: from the raw syscall
//! tracepoints (tp_btf sys_enter/sys_exit, [`TraceAttach::Syscall`]), which see every
//! syscall and look its number up, instead of through perf, which builds each record in a
//! perf buffer first (about twice the cost a call). The record the program builds is the
//! kernel's: common header, `__syscall_nr`, then the arguments (enter) or `ret` (exit), each
//! 8 bytes. Taken only where the format file says exactly that layout and the syscall's
//! number is known; any other tracepoint goes through perf as before.

use bpf::trace::{TraceAttach, SYSCALL_SLOTS};
use format::trace_format::TraceFormat;

use super::tracepoints::Tracepoint;

/// The cheaper attachment of `tp`, if it is a syscall tracepoint this can build.
pub fn attach_of(tp: &Tracepoint) -> Option<TraceAttach> {
    if tp.system != "syscalls" {
        return None;
    }
    let (name, exit) = if let Some(n) = tp.name.strip_prefix("sys_enter_") {
        (n, false)
    } else {
        (tp.name.strip_prefix("sys_exit_")?, true)
    };
    let nr = number(name)?;
    laid_out_as_built(&tp.format, exit).then_some(TraceAttach::Syscall { nr, exit })
}

/// The x86-64 number of the syscall whose tracepoints are named `name` (the kernel names
/// them after its `sys_` functions: `newstat` is `stat`, `umount` is `umount2`).
/// From the `syscall-numbers` crate's table (Linux's syscall_64.tbl).
#[cfg(target_arch = "x86_64")]
fn number(name: &str) -> Option<u32> {
    let named = |n: &str| {
        (0..SYSCALL_SLOTS).find(|&nr| syscall_numbers::x86_64::sys_call_name(nr.into()) == Some(n))
    };
    let alias = match name {
        "sendfile64" => "sendfile",
        "umount" => "umount2",
        _ => name,
    };
    named(alias).or_else(|| named(name.strip_prefix("new")?))
}

#[cfg(not(target_arch = "x86_64"))]
fn number(_: &str) -> Option<u32> {
    None
}

/// Whether the format is the one the programs build: `__syscall_nr` (int) at 8, then six
/// 8-byte arguments from 16 at most (enter), or `ret` (8 bytes) at 16 (exit).
fn laid_out_as_built(format: &TraceFormat, exit: bool) -> bool {
    let at = |name: &str, offset: usize, size: usize| {
        format
            .field(name)
            .is_some_and(|f| f.offset == offset && f.size == size)
    };
    if !at("__syscall_nr", 8, 4) {
        return false;
    }
    let own: Vec<_> = format
        .fields
        .iter()
        .filter(|f| !f.name.starts_with("common_") && f.name != "__syscall_nr")
        .collect();
    if exit {
        return own.len() == 1 && at("ret", 16, 8);
    }
    own.len() <= 6
        && own
            .iter()
            .enumerate()
            .all(|(i, f)| f.offset == 16 + 8 * i && f.size == 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_as_the_kernel_gives_them_find_their_numbers() {
        assert_eq!(number("read"), Some(0));
        assert_eq!(number("write"), Some(1));
        assert_eq!(number("openat"), Some(257));
        assert_eq!(number("newstat"), Some(4));
        assert_eq!(number("newfstatat"), Some(262));
        assert_eq!(number("newuname"), Some(63));
        assert_eq!(number("sendfile64"), Some(40));
        assert_eq!(number("umount"), Some(166));
        assert_eq!(number("clock_nanosleep"), Some(230));
        assert_eq!(number("no_such_call"), None);
    }

    fn format(fields: &[(&str, usize, usize)]) -> TraceFormat {
        let mut text = String::from("name: x\nID: 1\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n");
        for (name, offset, size) in fields {
            text.push_str(&format!(
                "\tfield:long {name};\toffset:{offset};\tsize:{size};\tsigned:1;\n"
            ));
        }
        text.push_str("\nprint fmt: \"\"\n");
        TraceFormat::parse(&text).unwrap()
    }

    #[test]
    fn only_the_layout_the_programs_build_is_taken() {
        let nr = ("__syscall_nr", 8, 4);
        assert!(laid_out_as_built(
            &format(&[nr, ("fd", 16, 8), ("buf", 24, 8), ("count", 32, 8)]),
            false
        ));
        assert!(laid_out_as_built(&format(&[nr, ("ret", 16, 8)]), true));
        assert!(!laid_out_as_built(&format(&[nr, ("ret", 16, 4)]), true));
        assert!(!laid_out_as_built(&format(&[nr, ("fd", 24, 8)]), false));
        assert!(!laid_out_as_built(&format(&[("fd", 16, 8)]), false));
    }
}
