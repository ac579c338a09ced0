//! Loading and dropping: a dropped profiler gives back its programs, maps and events.

use bpf::{Options, Profiler};

use crate::common::*;

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn a_dropped_profiler_frees_what_it_loaded() {
    if !can_load_bpf() {
        return;
    }
    let _guard = exclusive();
    let options = Options::default();
    // The first load also sets up libbpf's process-wide state (BTF caches and the like).
    drop(Profiler::start(&options).unwrap());
    let before = open_fds();
    for _ in 0..3 {
        let profiler = Profiler::start(&options).unwrap();
        assert!(open_fds() > before, "a loaded profiler holds descriptors");
        assert_eq!(profiler.drops(), 0);
        drop(profiler);
        assert_eq!(open_fds(), before, "every descriptor is closed on drop");
    }
}

#[test]
fn loaded_programs_are_listed_as_kallsyms_names_them() {
    if !can_load_bpf() {
        return;
    }
    let _guard = exclusive();
    let profiler = Profiler::start(&Options::default()).unwrap();
    let programs = bpf::loaded_programs();
    let kallsyms = std::fs::read_to_string("/proc/kallsyms").unwrap();
    drop(profiler);
    let listed: std::collections::HashMap<u64, &str> = kallsyms
        .lines()
        .filter(|l| l.ends_with("[bpf]"))
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let addr = u64::from_str_radix(f.next()?, 16).ok()?;
            Some((addr, f.nth(1)?))
        })
        .collect();
    let functions: Vec<&bpf::JitedFunction> = programs.iter().flat_map(|p| &p.functions).collect();
    // Ours, loaded just now, among them, each under its whole name (longer than the 15
    // bytes a program's own name keeps).
    for ours in [
        "on_cpu_sample",
        "on_switch",
        "on_fork",
        "on_exit",
        "on_block_complete",
    ] {
        let f = functions
            .iter()
            .find(|f| f.name.ends_with(&format!("_{ours}")))
            .unwrap_or_else(|| panic!("{ours} not listed: {functions:?}"));
        assert_eq!(listed.get(&f.addr), Some(&f.name.as_str()), "{f:?}");
    }
    // Every listed function as kallsyms names it (programs of others may come and go).
    for f in &functions {
        assert!(f.name.starts_with("bpf_prog_") && f.len > 0, "{f:?}");
        if let Some(&name) = listed.get(&f.addr) {
            assert_eq!(name, f.name, "at {:#x}", f.addr);
        }
    }
    assert!(programs.iter().all(|p| p.id > 0 && !p.functions.is_empty()));
}
