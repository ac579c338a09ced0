//! Rust and C++ names as perf shows them.
//!
//! perf 6.1 as Debian builds it (without libbfd) demangles each symbol with GNU libiberty's
//! `cplus_demangle(name, DMGL_NO_OPTS)`: Rust first (legacy `_ZN...17h<hash>E` and v0 `_R`),
//! then C++ (`_Z`), and prints the mangled name where neither applies.
//!
//! - Rust: rustc-demangle's alternate form (no hash), for the names libiberty takes as Rust.
//!   It equals libiberty's on the 19,883 dynamic symbols of rustc's `librustc_driver` and
//!   std (v0) and the 30,976 function symbols of analyze itself (legacy and v0); the two
//!   differ only where LLVM appended `.0`, `.1` to a static's name (libiberty drops it), and
//!   those are data, never named here.
//! - C++: libiberty itself (`demangle.c`, linked with libiberty-dev's `libiberty.a`, the
//!   library Debian's perf is linked with): no parameters and no return type (but a thunk's
//!   target keeps its parameters), an empty template parameter pack as nothing
//!   (`AnalysisManager<llvm::Function>`), integer template arguments as `8u` and `548964ul`,
//!   `std::string` rather than `std::basic_string<char, ...>`, and names over 1024 characters
//!   left mangled (libiberty refuses them). Hostile names: libiberty's recursion limits stay
//!   on, its worst stack use measured on fuzzed 1024-character names is 250 KB (threads here
//!   have 2 MB), and an output over [`OUTPUT_LIMIT`] abandons the name (short names can
//!   expand exponentially), which then stays mangled.

use std::cell::RefCell;
use std::ffi::{c_char, c_long, CString};

/// The longest demangled C++ name kept; longer ones stay mangled. The longest of the 94,706
/// C++ names of libLLVM 14, 15 and Rust's 22, and libjvm, demangles to 3,580 bytes.
const OUTPUT_LIMIT: usize = 64 << 10;

extern "C" {
    /// `demangle.c`: libiberty's demangling of the NUL-terminated `mangled` into `buf`
    /// (`cap` bytes); its length, or -1 where there is none.
    fn bpfperf_cplus_demangle(mangled: *const c_char, buf: *mut c_char, cap: usize) -> c_long;
}

/// Demangles Rust and C++ names as perf does; others (and names the demanglers reject) stay
/// as they are.
pub fn demangle(name: &str) -> String {
    if is_rust(name) {
        if let Ok(d) = rustc_demangle::try_demangle(name) {
            return format!("{d:#}");
        }
    }
    if name.starts_with("_Z") || name.starts_with("_GLOBAL_") {
        if let Some(d) = demangle_cxx(name) {
            return d;
        }
    }
    name.to_string()
}

/// Whether libiberty takes `name` as Rust: v0 (`_R`), or legacy, whose last path segment is
/// the hash (`17h` and 16 hex digits, then `E`, then nothing or a `.suffix`). Other `_ZN`
/// names are C++.
fn is_rust(name: &str) -> bool {
    if name.starts_with("_R") {
        return true;
    }
    if !name.starts_with("_ZN") {
        return false;
    }
    let b = name.as_bytes();
    b.windows(20).enumerate().any(|(i, w)| {
        w.starts_with(b"17h")
            && w[3..19]
                .iter()
                .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
            && w[19] == b'E'
            && b.get(i + 20).is_none_or(|&c| c == b'.')
    })
}

/// libiberty's demangling of a C++ name, `None` where it has none.
fn demangle_cxx(name: &str) -> Option<String> {
    thread_local! {
        static BUF: RefCell<Vec<u8>> = RefCell::new(Vec::with_capacity(OUTPUT_LIMIT));
    }
    let mangled = CString::new(name).ok()?;
    BUF.with_borrow_mut(|buf| {
        buf.clear();
        // SAFETY: `mangled` is NUL-terminated; `buf` has `capacity()` writable bytes, and the
        // C side writes at most that many and returns how many it wrote.
        let len = unsafe {
            bpfperf_cplus_demangle(mangled.as_ptr(), buf.as_mut_ptr().cast(), buf.capacity())
        };
        let len = usize::try_from(len).ok().filter(|&l| l <= buf.capacity())?;
        // SAFETY: the first `len` bytes were written by the C side.
        unsafe { buf.set_len(len) };
        // Identifiers are cut by length, which can split a UTF-8 character in two.
        Some(String::from_utf8_lossy(buf).into_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangles_rust_and_cpp_as_perf_prints_them() {
        assert_eq!(
            demangle("_ZN4core3ptr13drop_in_place17h0123456789abcdefE"),
            "core::ptr::drop_in_place"
        );
        assert_eq!(
            demangle("_ZN4core3ptr13drop_in_place17h0123456789abcdefE.llvm.123"),
            "core::ptr::drop_in_place"
        );
        assert_eq!(
            demangle("_RNvXsi_NtNtNtCsgEmfK2I1SDS_4core3fmt3num3impjNtB9_7Display3fmt"),
            "<usize as core::fmt::Display>::fmt"
        );
        assert_eq!(demangle("_ZN3foo3barEv"), "foo::bar");
        assert_eq!(demangle("_ZN3foo3barE"), "foo::bar");
        assert_eq!(demangle("main"), "main");
        // Issue #29: empty packs, integer template arguments, thunks, abbreviations.
        assert_eq!(
            demangle(
                "_ZN4llvm11PassManagerINS_8FunctionENS_15AnalysisManagerIS1_JEEEJEE3runERS1_RS3_"
            ),
            "llvm::PassManager<llvm::Function, llvm::AnalysisManager<llvm::Function>>::run"
        );
        assert_eq!(
            demangle("_ZN4llvm11SmallPtrSetIPNS_10BasicBlockELj8EE6insertES2_"),
            "llvm::SmallPtrSet<llvm::BasicBlock*, 8u>::insert"
        );
        assert_eq!(demangle("_ZN1fILm548964EEEvv"), "f<548964ul>");
        assert_eq!(
            demangle("_ZThn8_N12LIRGenerator8block_doEP10BlockBegin"),
            "non-virtual thunk to LIRGenerator::block_do(BlockBegin*)"
        );
        assert_eq!(demangle("_ZNSs4swapERSs"), "std::string::swap");
        assert_eq!(demangle("_ZN3foo3barEv.cold"), "foo::bar");
    }

    #[test]
    fn hostile_names_neither_crash_nor_hang() {
        // Nested past libiberty's limits: returned as they are, no stack overflow.
        let deep = format!("_Z1f{}i{}", "PFv".repeat(5000), "E".repeat(5000));
        assert_eq!(demangle(&deep), deep);
        // Deep, but short enough for libiberty to try: the stack holds.
        for name in [
            format!("_Z1f{}i", "P".repeat(1015)),
            format!("_Z1fIJ{}{}EEv", "J".repeat(500), "E".repeat(500)),
            format!("_ZZ1f{}", "F".repeat(1000)),
        ] {
            let _ = demangle(&name);
        }
        // Each step names the previous type twice: 2^k output from a few hundred bytes.
        // Substitutions: S_ is f, S0_ A, S1_ A<int, int>, then each A<previous, previous>.
        let sub = |i: u32| {
            let (mut n, mut digits) = (i - 1, Vec::new());
            loop {
                digits.push(char::from_digit(n % 36, 36).unwrap().to_ascii_uppercase());
                n /= 36;
                if n == 0 {
                    break;
                }
            }
            format!("S{}_", digits.iter().rev().collect::<String>())
        };
        let bomb = |steps: u32| {
            let mut name = String::from("_Z1fI1AIiiE");
            for prev in 2..2 + steps {
                name += &format!("S0_I{}{}E", sub(prev), sub(prev));
            }
            name + "Ev"
        };
        // 9 steps: 17 KB, demangled; 58 steps (697 bytes): 2^58 times that, abandoned.
        assert!(demangle(&bomb(9)).len() > 10_000);
        let start = std::time::Instant::now();
        assert_eq!(demangle(&bomb(58)), bomb(58));
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
        // Not NUL-terminated, not UTF-8 once cut: no panic.
        assert_eq!(demangle("_Z1f\0x"), "_Z1f\0x");
        let _ = demangle("_Z2\u{e9}v");
    }
}
