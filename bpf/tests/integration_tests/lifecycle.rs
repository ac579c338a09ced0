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
