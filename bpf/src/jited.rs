//! The JIT-ed code of every BPF program loaded on the system, named as the kernel names it
//! in kallsyms and in PERF_RECORD_KSYMBOL records (`bpf_prog_<tag>_<name>`): what a
//! recording needs to name kernel frames inside programs loaded before it began, its own
//! among them. perf synthesizes the same from the same calls (`bpf_prog_get_next_id`,
//! `bpf_prog_get_info_by_fd`: `jited_ksyms`, `jited_func_lens`, `prog_tags`, `func_info`).

use std::collections::HashMap;
use std::ffi::CStr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use libbpf_rs::libbpf_sys as sys;

/// One function of a loaded program's JIT-ed code: the program itself or a subprogram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JitedFunction {
    pub addr: u64,
    pub len: u32,
    /// `bpf_prog_<tag>_<name>`, the name kallsyms gives it.
    pub name: String,
}

/// A loaded BPF program: its id, tag and JIT-ed functions (the main one first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedProgram {
    pub id: u32,
    pub tag: [u8; 8],
    pub functions: Vec<JitedFunction>,
}

/// Every loaded BPF program whose code is JIT-ed. Needs root (CAP_SYS_ADMIN): without it, or
/// where a program goes away while it is asked about, that program is left out.
pub fn loaded_programs() -> Vec<LoadedProgram> {
    let mut programs = Vec::new();
    // Each program's BTF, by id, loaded once: a loader's programs share one.
    let mut btfs = HashMap::new();
    let mut id = 0u32;
    // SAFETY: plain syscall wrappers writing the next id into `id`.
    while unsafe { sys::bpf_prog_get_next_id(id, &mut id) } == 0 {
        // SAFETY: a non-negative result is a descriptor we now own.
        let fd = unsafe { sys::bpf_prog_get_fd_by_id(id) };
        if fd < 0 {
            continue;
        }
        // SAFETY: fresh descriptor, owned here.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        if let Some(p) = program(&fd, &mut btfs) {
            programs.push(p);
        }
    }
    for btf in btfs.into_values().flatten() {
        // SAFETY: loaded by btf__load_from_kernel_by_id below, freed once.
        unsafe { sys::btf__free(btf.0) };
    }
    programs
}

/// A program's BTF, freed by [`loaded_programs`].
struct Btf(*mut sys::btf);

fn program(fd: &OwnedFd, btfs: &mut HashMap<u32, Option<Btf>>) -> Option<LoadedProgram> {
    let info_of = |info: &mut sys::bpf_prog_info| {
        let mut len = std::mem::size_of_val(info) as u32;
        // SAFETY: `info` is a valid buffer of `len` bytes; the arrays it points at (if any)
        // are as long as the counts it holds say.
        unsafe { sys::bpf_prog_get_info_by_fd(fd.as_raw_fd(), info, &mut len) == 0 }
    };
    let mut info = sys::bpf_prog_info::default();
    if !info_of(&mut info) || info.nr_jited_ksyms == 0 {
        return None;
    }
    let n = info.nr_jited_ksyms as usize;
    let mut ksyms = vec![0u64; n];
    let mut lens = vec![0u32; n];
    let mut tags = vec![[0u8; 8]; n];
    let funcs = info.nr_func_info as usize;
    let mut func_info = vec![sys::bpf_func_info::default(); funcs];
    let (name, tag, btf_id) = (info.name, info.tag, info.btf_id);
    // Ask again for the arrays, and nothing else.
    info = sys::bpf_prog_info {
        nr_jited_ksyms: n as u32,
        jited_ksyms: ksyms.as_mut_ptr() as u64,
        nr_jited_func_lens: n as u32,
        jited_func_lens: lens.as_mut_ptr() as u64,
        nr_prog_tags: n as u32,
        prog_tags: tags.as_mut_ptr() as u64,
        nr_func_info: funcs as u32,
        func_info_rec_size: std::mem::size_of::<sys::bpf_func_info>() as u32,
        func_info: func_info.as_mut_ptr() as u64,
        ..Default::default()
    };
    if !info_of(&mut info) || info.nr_jited_ksyms as usize != n {
        return None;
    }
    // The program's own name (at most 15 bytes); BTF has the functions' whole names.
    // SAFETY: the kernel NUL-terminates the name it fills in.
    let prog_name = unsafe { CStr::from_ptr(name.as_ptr()) }.to_string_lossy();
    let btf = (funcs == n && btf_id != 0)
        .then(|| {
            btfs.entry(btf_id)
                .or_insert_with(|| load_btf(btf_id))
                .as_ref()
        })
        .flatten();
    let functions = (0..n)
        // Zero where the kernel hides addresses (kptr_restrict without CAP_SYSLOG).
        .filter(|&i| ksyms[i] != 0)
        .map(|i| {
            // The main function goes by the program's tag, as kallsyms and the kernel's own
            // KSYMBOL records name it (prog_tags[0] is its code's alone, which only perf's
            // synthesized records use); subprograms by their own.
            let tag = if i > 0 && info.nr_prog_tags as usize == n {
                tags[i]
            } else {
                tag
            };
            // The kernel's bpf_get_prog_name: the BTF name of the function, else the
            // program's name; perf's own fallback for a subprogram without BTF: "F".
            let short = btf
                .and_then(|b| func_name(b, func_info[i].type_id))
                .or_else(|| (i == 0 && !prog_name.is_empty()).then(|| prog_name.to_string()))
                .or_else(|| (i > 0).then(|| "F".to_string()));
            let mut name = String::from("bpf_prog_");
            for b in tag {
                name.push_str(&format!("{b:02x}"));
            }
            if let Some(short) = short {
                name.push('_');
                name.push_str(&short);
            }
            JitedFunction {
                addr: ksyms[i],
                len: lens[i],
                name,
            }
        })
        .collect();
    // The kernel fills the whole struct in again: the id is there.
    Some(LoadedProgram {
        id: info.id,
        tag,
        functions,
    })
}

fn load_btf(id: u32) -> Option<Btf> {
    // SAFETY: returns a new object or an error pointer (null with errno in libbpf 1.x).
    let btf = unsafe { sys::btf__load_from_kernel_by_id(id) };
    // SAFETY: libbpf_get_error accepts any pointer libbpf returned.
    if btf.is_null() || unsafe { sys::libbpf_get_error(btf.cast()) } != 0 {
        return None;
    }
    Some(Btf(btf))
}

fn func_name(btf: &Btf, type_id: u32) -> Option<String> {
    // SAFETY: `btf` is a live BTF object; libbpf checks the id and offset.
    unsafe {
        let t = sys::btf__type_by_id(btf.0, type_id);
        if t.is_null() {
            return None;
        }
        let name = sys::btf__name_by_offset(btf.0, (*t).name_off);
        if name.is_null() {
            return None;
        }
        let name = CStr::from_ptr(name).to_string_lossy();
        (!name.is_empty()).then(|| name.into_owned())
    }
}
