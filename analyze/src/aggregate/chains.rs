//! Chain graphs: each off-CPU stack with its waker's stack, then the stack where that waker
//! itself was blocked before it ran, then its waker, and so on (the bcc talk's "multiple
//! waker stacks"). Folded as
//!
//! ```text
//! blocked stack (root first);--;waker 1 (innermost first);comm 1;--;
//!   where waker 1 had blocked (innermost first);--;waker 2;comm 2;...
//! ```
//!
//! weighing the first thread's blocked time, so that the total equals `--event offcpu`'s.
//! A waker's own wait is its last off-CPU interval that ended before the wakeup (the
//! `bpfperf:wakeup` payload's `wake_ns`). A chain stops at the depth asked for, at an
//! interrupt, at a waker that had not blocked since the recording began, and at one record
//! did not follow, said in the chain: `[not followed: comm pid]`.

use rustc_hash::{FxHashMap, FxHashSet};

use super::wakeups::{wake_times, PseudoFrames, INTERRUPT, IRQ_ENTRY_PREFIX, SEPARATOR};
use crate::read::Recording;
use crate::symbolize::{Symbolized, SymbolizedStack};

/// Which threads' waits the chains start from (the others' are only followed into).
pub struct Roots<'a> {
    pub pid: Option<i32>,
    pub tid: Option<i32>,
    pub comm: Option<&'a str>,
}

impl Roots<'_> {
    fn take(&self, s: &SymbolizedStack, comms: &[String]) -> bool {
        self.pid.is_none_or(|p| p == s.pid)
            && self.tid.is_none_or(|t| t == s.tid)
            && self
                .comm
                .is_none_or(|c| comms.get(s.comm as usize).is_some_and(|n| n == c))
    }
}

/// Replaces the stacks by the chains of the off-CPU stacks (event `offcpu`) of the `roots`
/// threads, `depth` wakers deep; the other stacks (wakeups, other events, other threads'
/// waits) are dropped. Stacks must be per sample (their times and CPUs pair each wait with
/// its waker).
pub fn chain(
    sym: &mut Symbolized,
    rec: &Recording,
    offcpu: u32,
    wakeup: u32,
    depth: u32,
    roots: &Roots<'_>,
) {
    let stacks = std::mem::take(&mut sym.stacks);
    let wake_times = wake_times(rec);
    let mut wakers: FxHashMap<(u64, u32), usize> = FxHashMap::default();
    // Each thread's waits by when they ended.
    let mut waits: FxHashMap<i32, Vec<(u64, usize)>> = FxHashMap::default();
    // Processes record followed: those with samples of their own (a waker's sample is
    // the woken thread's).
    let mut followed: FxHashSet<i32> = FxHashSet::default();
    for (i, s) in stacks.iter().enumerate() {
        if s.event == wakeup {
            wakers.insert((s.time, s.cpu), i);
            continue;
        }
        followed.insert(s.pid);
        if s.event == offcpu {
            waits.entry(s.tid).or_default().push((s.time, i));
        }
    }
    for w in waits.values_mut() {
        w.sort_unstable();
    }
    let mut names = PseudoFrames::new(&mut sym.frames);
    let separator = names.id(SEPARATOR);
    let mut chains = Vec::new();
    for s in stacks.iter() {
        if s.event != offcpu || !roots.take(s, &sym.comms) {
            continue;
        }
        let mut frames = s.frames.clone();
        let mut blocked = s;
        for level in 1..=depth {
            let Some(&w) = wakers.get(&(blocked.time, blocked.cpu)) else {
                break;
            };
            let w = &stacks[w];
            frames.push(separator);
            if w.pid == 0 {
                // An interrupt: its stack up to its entry, then nothing it interrupted.
                let mut entered = false;
                frames.extend(w.frames.iter().rev().take_while(|&&f| {
                    let keep = !entered;
                    entered |= names.frames[f as usize]
                        .function
                        .starts_with(IRQ_ENTRY_PREFIX);
                    keep
                }));
                frames.push(names.id(INTERRUPT));
                break;
            }
            let comm = sym.comms[w.comm as usize].replace(' ', "_");
            frames.extend(w.frames.iter().rev());
            frames.push(names.id(&comm));
            if level == depth {
                break;
            }
            if !followed.contains(&w.pid) {
                frames.push(separator);
                frames.push(names.id(&format!("[not followed: {comm} {}]", w.pid)));
                break;
            }
            // The waker's last wait that ended before it woke this one.
            let woke_at = wake_times
                .get(&(blocked.time, blocked.cpu))
                .copied()
                .filter(|&t| t > 0 && t <= blocked.time)
                .unwrap_or(blocked.time);
            let Some(own) = waits
                .get(&w.tid)
                .and_then(|v| last_wait(v, woke_at, &stacks, &wakers))
            else {
                break;
            };
            blocked = &stacks[own];
            frames.push(separator);
            frames.extend(blocked.frames.iter().rev());
        }
        chains.push(SymbolizedStack {
            frames,
            // Addresses (script output) stay aligned: none for the joined part.
            addrs: Vec::new(),
            ..s.clone()
        });
    }
    sym.stacks = chains;
}

/// How far back past a thread's preemptions the search for its last wait goes.
const PREEMPTIONS_PASSED: usize = 64;

/// The last of a thread's `waits` (by end time, with their stacks' indices) that ended at or
/// before `time` and was a wait: woken by someone. An interval without a waker is a
/// preemption (the thread stayed runnable, no one woke it): the run queue held the thread
/// up, not what it had waited on before, so the search goes on past it.
fn last_wait(
    waits: &[(u64, usize)],
    time: u64,
    stacks: &[SymbolizedStack],
    wakers: &FxHashMap<(u64, u32), usize>,
) -> Option<usize> {
    let before = waits.partition_point(|&(end, _)| end <= time);
    waits[..before]
        .iter()
        .rev()
        .take(PREEMPTIONS_PASSED)
        .map(|&(_, i)| i)
        .find(|&i| wakers.contains_key(&(stacks[i].time, stacks[i].cpu)))
}

#[cfg(test)]
mod tests {
    use super::super::testing::{folded, frame, stack, wake};
    use super::*;
    use crate::read::testing::sample;
    use format::events::{OFFCPU_EVENT, WAKEUP_EVENT};

    /// A (thread 1) waits on B (2) from 100 to 300; B waits on C (3) from 50 to 250 and
    /// wakes A at 280; C ran since it was woken at 40 by thread 9, which record did not
    /// follow, and wakes B at 240.
    fn abc() -> (Symbolized, Recording) {
        let mut samples = vec![
            sample(1, 2, 300, 0, &[], Some(wake(280, 1))),
            sample(1, 3, 250, 0, &[], Some(wake(240, 2))),
            sample(1, 9, 60, 0, &[], Some(wake(40, 3))),
        ];
        for s in &mut samples {
            s.cpu = 0;
        }
        let rec = Recording {
            events: vec![OFFCPU_EVENT.into(), WAKEUP_EVENT.into()],
            samples,
            ..Default::default()
        };
        let names = [
            "a_main", "a_wait", "b_main", "b_wait", "b_wake", "c_main", "c_wait", "c_wake",
            "x_wake",
        ];
        let sym = Symbolized {
            comms: ["a", "b", "c", "", "", "", "", "", "x"]
                .map(String::from)
                .to_vec(),
            events: rec.events.clone(),
            frames: names.iter().map(|n| frame(n)).collect(),
            stacks: vec![
                stack(0, 3, 60, 20, &[5, 6]),
                stack(1, 9, 60, 0, &[8]),
                stack(0, 2, 250, 200, &[2, 3]),
                stack(1, 3, 250, 0, &[5, 7]),
                stack(0, 1, 300, 200, &[0, 1]),
                stack(1, 2, 300, 0, &[2, 4]),
            ],
            ..Default::default()
        };
        (sym, rec)
    }

    #[test]
    fn a_chain_goes_from_waker_to_waker_as_deep_as_asked() {
        let all = Roots {
            pid: None,
            tid: None,
            comm: None,
        };
        let a_only = Roots {
            pid: Some(1),
            ..all
        };
        let chains = |depth: u32, roots: &Roots<'_>| {
            let (mut sym, rec) = abc();
            chain(&mut sym, &rec, 0, 1, depth, roots);
            folded(&sym)
        };
        assert_eq!(
            chains(1, &a_only),
            [("a_main;a_wait;--;b_wake;b_main;b".to_string(), 200)]
        );
        assert_eq!(
            chains(2, &a_only),
            [(
                "a_main;a_wait;--;b_wake;b_main;b;--;b_wait;b_main;--;c_wake;c_main;c".to_string(),
                200
            )]
        );
        // C's own wait, woken by a thread not followed.
        let deep = "a_main;a_wait;--;b_wake;b_main;b;--;b_wait;b_main;--;c_wake;c_main;c;\
                    --;c_wait;c_main;--;x_wake;x;--;[not followed: x 9]";
        assert_eq!(chains(4, &a_only), [(deep.to_string(), 200)]);
        // Every thread's waits, each weighing its own blocked time.
        let weights: Vec<u64> = chains(4, &all).iter().map(|(_, w)| *w).collect();
        assert_eq!(weights, [20, 200, 200]);
    }

    /// A waker preempted after its wait and before the wakeup: its wait is the one before.
    #[test]
    fn a_wakers_preemption_is_passed_over() {
        let (mut sym, rec) = abc();
        // B was preempted from 260 to 270 (no one woke it).
        sym.stacks.push(stack(0, 2, 270, 10, &[2, 4]));
        let roots = Roots {
            pid: Some(1),
            tid: None,
            comm: None,
        };
        chain(&mut sym, &rec, 0, 1, 2, &roots);
        assert_eq!(
            folded(&sym),
            [(
                "a_main;a_wait;--;b_wake;b_main;b;--;b_wait;b_main;--;c_wake;c_main;c".to_string(),
                200
            )]
        );
    }

    /// A waker that had not blocked before the wakeup (its wait ended later) ends the chain.
    #[test]
    fn a_wait_that_ended_after_the_wakeup_is_not_the_wakers() {
        let (mut sym, rec) = abc();
        // B's wait now ends after it woke A (at 280): not the one that held B up.
        sym.stacks[2].time = 290;
        let roots = Roots {
            pid: Some(1),
            tid: None,
            comm: None,
        };
        chain(&mut sym, &rec, 0, 1, 4, &roots);
        assert_eq!(
            folded(&sym),
            [("a_main;a_wait;--;b_wake;b_main;b".to_string(), 200)]
        );
    }
}
