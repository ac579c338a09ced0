//! Folded stacks, as stackcollapse-perf.pl prints them: `comm;root;...;leaf COUNT`.

use std::collections::BTreeMap;

use rustc_hash::FxHashMap;

use crate::pipeline::Profile;

/// The folded lines, sorted, one per unique stack. `kernel_annotate` adds `_[k]` to kernel
/// frames (flamegraph.pl colours them).
pub fn folded(profile: &Profile, kernel_annotate: bool) -> Vec<String> {
    // Merge identical stacks by frame ids first, then spell each unique one once.
    let mut by_ids: FxHashMap<(u32, &[u32], &[bool]), u64> = FxHashMap::default();
    for s in &profile.stacks {
        *by_ids.entry((s.comm, &s.frames, &s.kernel)).or_insert(0) += s.weight;
    }
    let mut merged: BTreeMap<String, u64> = BTreeMap::new();
    for ((comm, frames, kernel), weight) in by_ids {
        let mut key = profile.comms[comm as usize].replace([' ', ';'], "_");
        for (f, &k) in frames.iter().zip(kernel) {
            key.push(';');
            key.push_str(&profile.frames[*f as usize].function.replace(';', ":"));
            if k && kernel_annotate {
                key.push_str("_[k]");
            }
        }
        *merged.entry(key).or_insert(0) += weight;
    }
    merged
        .into_iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect()
}
