//! The unwind stage of a profile: samples are unwound chunk by chunk in parallel, and samples
//! whose unwound stacks are identical are grouped as each batch of chunks finishes, so that
//! the stacks of 300k DWARF samples (a few thousand distinct) are never all held at once.
//! Every stack held is memory the process touches for the first time, which is what costs
//! most in a large DWARF report. Per-sample output (script) unwinds without grouping.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use hashbrown::HashTable;
use rayon::prelude::*;
use rustc_hash::FxHasher;

use crate::read::{RawSample, StackBytes, Weighed};
use crate::unwind::{StackEnd, UnwindCache, Unwinder, UnwoundStack};

/// Samples unwound by one task, of `n`, grouped among themselves before the batch merges: a
/// 64th of them (at least 16, at most 2048), so that every core gets a share of a few
/// thousand samples (three chunks of 2048 left one of two cores a third of the work). Groups
/// come out in the order of their first sample whatever the chunks.
fn task_size(n: usize) -> usize {
    (n / 64).clamp(16, 2048)
}

/// Chunks unwound before their groups merge into the profile's: bounds the stacks held.
const BATCH: usize = 32;

/// Samples and their unwound stacks (grouped by stack, in order of first appearance, where
/// [`unwind_grouped`] made them).
pub(super) struct Unwound<'r> {
    pub samples: Vec<Weighed<'r>>,
    /// How many recorded samples each of `samples` stands for.
    pub counts: Vec<u64>,
    /// Aligned with `samples`.
    pub stacks: Vec<UnwoundStack>,
    /// How DWARF unwinding ended, over every sample unwound.
    pub ends: BTreeMap<StackEnd, u64>,
}

/// One group: its first sample, the hash of its key, its summed weight and count.
struct Group {
    first: usize,
    hash: u64,
    weight: u64,
    count: u64,
    stack: UnwoundStack,
}

/// What makes samples one: event, process, thread, command name, kernel and user frames, and
/// a traced event's payload. Only samples that carried a stack copy are grouped here (the
/// others were grouped by [`crate::read::select::group_identical`]).
fn key_hash(s: &RawSample, stack: &UnwoundStack) -> u64 {
    let mut h = FxHasher::default();
    s.hash_origin(&mut h);
    stack.user.hash(&mut h);
    h.finish()
}

fn same(a: &RawSample, sa: &UnwoundStack, b: &RawSample, sb: &UnwoundStack) -> bool {
    a.same_origin(b) && sa.user == sb.user
}

/// Groups in order of first appearance.
#[derive(Default)]
struct Groups {
    table: HashTable<u32>,
    groups: Vec<Group>,
}

impl Groups {
    /// Adds `g` (whose `first` indexes `samples`): into the group with the same key, or as a
    /// new one.
    fn add(&mut self, samples: &[Weighed<'_>], g: Group) {
        let s = samples[g.first].0;
        let Groups { table, groups } = self;
        if s.stack_copy.is_some() {
            let found = table.find(g.hash, |&i| {
                let h = &groups[i as usize];
                h.hash == g.hash && same(samples[h.first].0, &h.stack, s, &g.stack)
            });
            if let Some(&i) = found {
                let into = &mut groups[i as usize];
                into.weight += g.weight;
                into.count += g.count;
                return;
            }
            table.insert_unique(g.hash, groups.len() as u32, |&i| groups[i as usize].hash);
        }
        groups.push(g);
    }
}

/// Unwinds each of `samples`, keeping them as they are (per-sample output).
pub(super) fn unwind_each<'r>(
    unwinder: &Unwinder<'_>,
    samples: Vec<Weighed<'r>>,
    counts: Vec<u64>,
    each: &(dyn Fn(u64) + Sync),
) -> Unwound<'r> {
    let stacks: Vec<UnwoundStack> = samples
        .par_iter()
        .map_init(UnwindCache::default, |cache, (s, _)| {
            each(1);
            unwind_one(unwinder, cache, s)
        })
        .collect();
    done_reading(&samples);
    let mut ends = BTreeMap::new();
    for end in stacks.iter().filter_map(|st| st.end) {
        *ends.entry(end).or_insert(0) += 1;
    }
    Unwound {
        samples,
        counts,
        stacks,
        ends,
    }
}

/// One sample's stack, its copy's pages counted against the input's page budget.
fn unwind_one(unwinder: &Unwinder<'_>, cache: &mut UnwindCache, s: &RawSample) -> UnwoundStack {
    if let Some(copy) = &s.stack_copy {
        copy.bytes.reading();
    }
    unwinder.unwind(cache, s)
}

/// Gives the input's pages that the stack copies lie in back (see
/// [`crate::read::StackBytes::reading`]).
fn done_reading(samples: &[Weighed<'_>]) {
    if let Some(copy) = samples.iter().find_map(|(s, _)| s.stack_copy.as_ref()) {
        copy.bytes.done_reading();
    }
}

/// Unwinds `samples` (whose counts `counts` gives) and groups those whose stacks come out the
/// same; `each` is called with the number of samples unwound as the work goes.
pub(super) fn unwind_grouped<'r>(
    unwinder: &Unwinder<'_>,
    samples: Vec<Weighed<'r>>,
    counts: Vec<u64>,
    each: &(dyn Fn(u64) + Sync),
) -> Unwound<'r> {
    let mut all = Groups::default();
    let mut ends: BTreeMap<StackEnd, u64> = BTreeMap::new();
    let per_task = task_size(samples.len());
    for (b, batch) in samples.chunks(per_task * BATCH).enumerate() {
        let parts: Vec<(Groups, BTreeMap<StackEnd, u64>)> = batch
            .par_chunks(per_task)
            .enumerate()
            .map_init(UnwindCache::default, |cache, (c, chunk)| {
                let start = b * per_task * BATCH + c * per_task;
                let mut groups = Groups::default();
                let mut ends = BTreeMap::new();
                for (k, (s, weight)) in chunk.iter().enumerate() {
                    let stack = unwinder.unwind(cache, s);
                    if let Some(end) = stack.end {
                        *ends.entry(end).or_insert(0) += 1;
                    }
                    let group = Group {
                        first: start + k,
                        hash: if s.stack_copy.is_some() {
                            key_hash(s, &stack)
                        } else {
                            0
                        },
                        weight: *weight,
                        count: counts[start + k],
                        stack,
                    };
                    groups.add(&samples, group);
                }
                // The task's stack copies given back as it ends (the block the last ends in
                // too): a task per thread mapped.
                let copies = chunk.iter().filter_map(|(s, _)| s.stack_copy.as_ref());
                StackBytes::done_with(copies.map(|c| &c.bytes));
                each(chunk.len() as u64);
                (groups, ends)
            })
            .collect();
        for (groups, chunk_ends) in parts {
            for g in groups.groups {
                all.add(&samples, g);
            }
            for (end, n) in chunk_ends {
                *ends.entry(end).or_insert(0) += n;
            }
        }
    }
    done_reading(&samples);
    let mut out = Unwound {
        samples: Vec::with_capacity(all.groups.len()),
        counts: Vec::with_capacity(all.groups.len()),
        stacks: Vec::with_capacity(all.groups.len()),
        ends,
    };
    for g in all.groups {
        out.samples.push((samples[g.first].0, g.weight));
        out.counts.push(g.count);
        out.stacks.push(g.stack);
    }
    out
}
