//! Folded stacks, as stackcollapse-perf.pl prints them: `comm;root;...;leaf COUNT`.

use std::collections::BTreeMap;

use crate::pipeline::Profile;

/// The folded lines, sorted, one per unique stack. `kernel_annotate` adds `_[k]` to kernel
/// frames (flamegraph.pl colours them).
pub fn folded(profile: &Profile, kernel_annotate: bool) -> Vec<String> {
    let mut merged: BTreeMap<String, u64> = BTreeMap::new();
    let mut key = String::new();
    for s in &profile.stacks {
        key.clear();
        key.push_str(&s.comm.replace([' ', ';'], "_"));
        for (f, &k) in s.frames.iter().zip(&s.kernel) {
            key.push(';');
            key.push_str(&profile.frames[*f as usize].function.replace(';', ":"));
            if k && kernel_annotate {
                key.push_str("_[k]");
            }
        }
        *merged.entry(key.clone()).or_insert(0) += s.weight;
    }
    merged
        .into_iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect()
}
