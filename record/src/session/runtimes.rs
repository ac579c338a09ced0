//! The session's part in naming runtimes' frames: the JVMs' perf maps asked for (through the
//! workload's environment, a flag set in running JVMs, jcmd at the end), and the Python
//! processes told to the BPF programs as they appear.

use std::collections::BTreeSet;

use crate::config::Config;
use crate::sideband::{procfs, TimedFact};

/// What the workload's environment gets beside record's own.
pub(crate) fn workload_env(cfg: &Config) -> Vec<(String, String)> {
    let mut env = Vec::new();
    if cfg.jvm_perfmap {
        env.push(crate::runtimes::jvm::workload_env());
    }
    env
}

/// The JVMs seen so far write their perf map when they exit (those running when recording
/// began at once, the others once settled).
pub(crate) fn flag_jvms(
    cfg: &Config,
    flagger: &mut crate::runtimes::jvm::Flagger,
    jvms: &BTreeSet<u32>,
    initial: bool,
) {
    if !cfg.jvm_perfmap {
        return;
    }
    flagger.note(jvms, initial);
    for why in flagger.run_due() {
        eprintln!("record: {why}; its perf map is asked for at the end only (jcmd)");
    }
}

/// The JVMs still running write their perf maps now (jcmd).
pub(crate) fn ask_jvm_maps(cfg: &Config, jvms: &BTreeSet<u32>) {
    if !cfg.jvm_perfmap {
        return;
    }
    let alive: Vec<u32> = jvms
        .iter()
        .copied()
        .filter(|&p| !procfs::has_exited(p))
        .collect();
    for why in crate::runtimes::jvm::ask_maps(&alive) {
        eprintln!("record: {why}; its JIT frames are [unknown]");
    }
}

/// Tells the BPF programs about a process that runs a Python interpreter (a mapping of one,
/// or a fork of such a process). A failure costs that process its Python frames only.
pub(crate) fn watch_python(
    profiler: &bpf::Profiler,
    python: &mut crate::runtimes::python::Python,
    fact: &TimedFact,
) {
    if let Some(w) = python.observe(&fact.fact, fact.time) {
        if let Err(e) = profiler.watch_python(w.pid, w.runtime, &w.offsets) {
            eprintln!("record: Python frames of pid {}: {e}", w.pid);
        }
    }
}
