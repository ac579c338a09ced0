//! Off-CPU stacks with their wakers, as bcc's offwaketime folds them: the blocked thread's
//! stack (root first), `--`, the waker's stack from the wakeup back out (innermost first),
//! then the waker's name. Weight: nanoseconds blocked.
//!
//! A `bpfperf:wakeup` sample carries the waker (its pid, comm, stacks) and has the time and
//! CPU of the `offcpu-time` sample it explains: both are written when the blocked thread ran
//! again, on that CPU. Intervals without a recorded waker (preemption, a dropped wakeup) keep
//! their off-CPU stack alone, so the total equals `--event offcpu`'s. An interrupt's stack is
//! cut at its entry (what it interrupted is unrelated) and named `[interrupt]`.

use rustc_hash::FxHashMap;

use crate::read::Recording;
use crate::symbolize::FrameInfo;
use crate::symbolize::{Symbolized, SymbolizedStack};

/// The frame between the blocked stack and the waker's.
pub const SEPARATOR: &str = "--";
/// The waker's name when an interrupt (pid 0) woke the thread.
pub const INTERRUPT: &str = "[interrupt]";
/// x86-64 interrupt entry points (asm_common_interrupt, asm_sysvec_apic_timer_interrupt...).
pub(super) const IRQ_ENTRY_PREFIX: &str = "asm_";

/// Frames that name no code (`--`, `[interrupt]`, a waker's comm), each given its id in
/// `frames` once: found there if it is already, else added.
pub(super) struct PseudoFrames<'s> {
    pub frames: &'s mut Vec<FrameInfo>,
    ids: FxHashMap<String, u32>,
}

impl<'s> PseudoFrames<'s> {
    pub fn new(frames: &'s mut Vec<FrameInfo>) -> Self {
        PseudoFrames {
            frames,
            ids: FxHashMap::default(),
        }
    }

    pub fn id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let f = FrameInfo::new(name, "");
        let id = match self.frames.iter().position(|x| *x == f) {
            Some(i) => i as u32,
            None => {
                self.frames.push(f);
                (self.frames.len() - 1) as u32
            }
        };
        self.ids.insert(name.to_string(), id);
        id
    }
}

/// When each recorded wakeup woke its thread (the `bpfperf:wakeup` payload's `wake_ns`), by
/// the wakeup sample's (time, CPU).
pub(super) fn wake_times(rec: &Recording) -> FxHashMap<(u64, u32), u64> {
    let Some(event) = rec
        .events
        .iter()
        .position(|e| e == format::events::WAKEUP_EVENT)
    else {
        return FxHashMap::default();
    };
    rec.samples
        .iter()
        .filter(|s| s.event == event)
        .filter_map(|s| {
            let w = format::events::Wakeup::from_raw(s.raw.as_deref()?)?;
            Some(((s.time, s.cpu), w.wake_ns))
        })
        .collect()
}

/// Replaces each off-CPU stack that has a waker by the joined stack, and drops the wakeup
/// stacks. `offcpu` and `wakeup` are the events' indices.
pub fn join(sym: &mut Symbolized, offcpu: u32, wakeup: u32) {
    let stacks = std::mem::take(&mut sym.stacks);
    let mut wakers: FxHashMap<(u64, u32), SymbolizedStack> = FxHashMap::default();
    let mut blocked = Vec::with_capacity(stacks.len());
    for s in stacks {
        if s.event == wakeup {
            wakers.insert((s.time, s.cpu), s);
        } else {
            blocked.push(s);
        }
    }
    let mut names = PseudoFrames::new(&mut sym.frames);
    let separator = names.id(SEPARATOR);
    for s in &mut blocked {
        if s.event != offcpu {
            continue;
        }
        let Some(w) = wakers.remove(&(s.time, s.cpu)) else {
            continue;
        };
        let name = if w.pid == 0 {
            INTERRUPT.to_string()
        } else {
            sym.comms[w.comm as usize].replace(' ', "_")
        };
        s.frames.push(separator);
        let waker = w.frames.iter().rev();
        if w.pid == 0 {
            // An interrupt's stack goes on into whatever it interrupted (an idle loop,
            // another program): keep it up to the interrupt's entry.
            let mut entered = false;
            s.frames.extend(waker.take_while(|&&f| {
                let keep = !entered;
                entered |= names.frames[f as usize]
                    .function
                    .starts_with(IRQ_ENTRY_PREFIX);
                keep
            }));
        } else {
            s.frames.extend(waker);
        }
        s.frames.push(names.id(&name));
        // Addresses (script output) stay aligned: none for the joined part.
        if !s.addrs.is_empty() {
            s.addrs.truncate(0);
        }
    }
    sym.stacks = blocked;
}
