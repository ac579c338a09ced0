//! Write bursts of tracked threads, kept for the writeback requests that name them.
//!
//! A burst begins where a thread starts dirtying pages from a new place (its registers at the
//! write changed, or 100 ms passed); the kernel remembers, for each dirtied chunk of a file,
//! the burst that dirtied it, and a writeback request names that burst. A program writing
//! many files (tar -xf) makes thousands of bursts from a few call sites, and their pages wait
//! up to 30 s for writeback: the bursts are kept as long as the kernel can name them, the
//! stacks they share held once.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use bpf::OffCpuInterval;

/// As many bursts as the kernel's map of dirty chunks can name (one each at most).
const MAX_BURSTS: usize = 65_536;
/// The stacks' bytes kept at most: in DWARF mode without tables, each burst holds a stack
/// copy of its own (up to 16 KiB), which no other burst shares.
const MAX_BYTES: usize = 32 << 20;

/// The bursts by (start time, tid), equal stacks shared.
#[derive(Default)]
pub struct DirtyBursts {
    by_start: BTreeMap<(u64, u32), Arc<OffCpuInterval>>,
    /// Each distinct (thread, stack), by its hash.
    distinct: HashMap<u64, Vec<Arc<OffCpuInterval>>>,
    bytes: usize,
}

impl DirtyBursts {
    /// Keeps the burst `d` began, forgetting the oldest past the limits.
    pub fn insert(&mut self, d: &OffCpuInterval) {
        let hash = fingerprint(d);
        let bucket = self.distinct.entry(hash).or_default();
        let burst = match bucket.iter().find(|b| same_stack(b, d)) {
            Some(b) => b.clone(),
            None => {
                let b = Arc::new(d.clone());
                self.bytes += size(&b);
                bucket.push(b.clone());
                b
            }
        };
        if let Some(old) = self.by_start.insert((d.time, d.tid), burst) {
            self.release(old);
        }
        while self.by_start.len() > MAX_BURSTS || self.bytes > MAX_BYTES {
            let Some((_, oldest)) = self.by_start.pop_first() else {
                break;
            };
            self.release(oldest);
        }
    }

    /// The burst thread `tid` began at `start`, if it is still kept.
    pub fn get(&self, start: u64, tid: u32) -> Option<Arc<OffCpuInterval>> {
        self.by_start.get(&(start, tid)).cloned()
    }

    /// Drops a burst no longer named by its start: its stack goes when no other burst
    /// shares it (held then only here and in `distinct`).
    fn release(&mut self, burst: Arc<OffCpuInterval>) {
        if Arc::strong_count(&burst) > 2 {
            return;
        }
        let hash = fingerprint(&burst);
        if let Some(bucket) = self.distinct.get_mut(&hash) {
            bucket.retain(|b| !Arc::ptr_eq(b, &burst));
            if bucket.is_empty() {
                self.distinct.remove(&hash);
            }
            self.bytes -= size(&burst);
        }
    }
}

fn fingerprint(d: &OffCpuInterval) -> u64 {
    let mut h = DefaultHasher::new();
    (d.pid, d.tid, &d.kernel_stack, &d.user_stack).hash(&mut h);
    d.user_regs.map(|r| r.0).hash(&mut h);
    d.stack_copy.hash(&mut h);
    h.finish()
}

fn same_stack(a: &OffCpuInterval, b: &OffCpuInterval) -> bool {
    a.pid == b.pid
        && a.tid == b.tid
        && a.kernel_stack == b.kernel_stack
        && a.user_stack == b.user_stack
        && a.user_regs == b.user_regs
        && a.stack_copy == b.stack_copy
}

fn size(d: &OffCpuInterval) -> usize {
    std::mem::size_of::<OffCpuInterval>()
        + (d.kernel_stack.len() + d.user_stack.len()) * 8
        + d.stack_copy.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn burst(time: u64, tid: u32, ip: u64) -> OffCpuInterval {
        OffCpuInterval {
            pid: 1,
            tid,
            cpu: 0,
            time,
            duration_ns: 0,
            runq_ns: 0,
            state: 0,
            in_fault: false,
            kernel_stack: vec![0xffff_ffff_8100_0000],
            user_stack: vec![ip, 0x401000],
            user_regs: None,
            stack_copy: vec![],
            python: vec![],
        }
    }

    #[test]
    fn bursts_from_one_call_site_share_their_stack() {
        let mut bursts = DirtyBursts::default();
        for t in 0..10_000 {
            bursts.insert(&burst(t, 7, 0x402000 + (t % 3)));
        }
        assert_eq!(bursts.by_start.len(), 10_000);
        assert_eq!(bursts.distinct.len(), 3);
        let (a, b) = (bursts.get(0, 7).unwrap(), bursts.get(3, 7).unwrap());
        assert!(Arc::ptr_eq(&a, &b));
        assert!(bursts.get(1, 8).is_none());
    }

    #[test]
    fn the_oldest_go_past_the_limit_and_their_stacks_with_the_last_of_them() {
        let mut bursts = DirtyBursts::default();
        bursts.insert(&burst(0, 7, 0x1));
        for t in 1..=MAX_BURSTS as u64 {
            bursts.insert(&burst(t, 7, 0x2));
        }
        assert_eq!(bursts.by_start.len(), MAX_BURSTS);
        assert!(bursts.get(0, 7).is_none());
        assert!(bursts.get(1, 7).is_some());
        assert_eq!(
            bursts.distinct.len(),
            1,
            "the first stack went with its only burst"
        );
        assert_eq!(bursts.bytes, size(&burst(0, 7, 0x2)));
    }
}
