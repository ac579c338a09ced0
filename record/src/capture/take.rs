//! What record takes from the BPF side besides the ring's events: the counts the kernel keeps
//! in maps (page-cache counts, --aggregate's), and each event as it comes out of the ring:
//! kept if on a CPU `-C` chose, its kernel stack without the tracing glue.

use std::sync::Arc;

use super::item::Item;
use crate::config::Config;
use crate::host::monotonic_ns;
use crate::sideband::kernel;

/// Takes the kernel's page-cache counts since `since` into `pending`; returns now.
pub(crate) fn take_cache_counts(
    profiler: &bpf::Profiler,
    pending: &mut Vec<Item>,
    since: u64,
) -> u64 {
    let now = monotonic_ns();
    pending.extend(
        profiler
            .take_cache_counts()
            .into_iter()
            .map(|counts| Item::Cache {
                counts,
                time: now,
                interval_ns: now - since,
            }),
    );
    now
}

/// Takes the on-CPU samples the kernel counted into `pending`, at `time` (the end of the
/// interval they were counted in).
pub(crate) fn take_aggregated(
    profiler: &bpf::Profiler,
    cfg: &Config,
    events: bool,
    pending: &mut Vec<Item>,
    time: u64,
) -> anyhow::Result<()> {
    if cfg.sampling {
        pending.extend(
            profiler
                .take_aggregated()?
                .into_iter()
                .map(|samples| Item::Aggregated { samples, time }),
        );
    }
    if events {
        pending.extend(
            profiler
                .take_aggregated_events()?
                .into_iter()
                .map(|events| Item::AggregatedEvents { events, time }),
        );
    }
    Ok(())
}

/// Leaves out what ran the tracepoint program atop the kernel stacks it took (see
/// [`kernel::Symbols::glue_frames`]); cpu-clock samples' stacks start where they were taken.
#[derive(Default)]
pub(crate) struct GlueStripper {
    /// The last shared network stack seen and what it is without the glue: the skbs of one
    /// send call, tens of thousands a second, share their call's stack.
    last_net: Option<SeenAndStripped>,
}

pub(crate) type SeenAndStripped = (Arc<[u64]>, Arc<[u64]>);

impl GlueStripper {
    pub(crate) fn strip(&mut self, e: &mut bpf::Event, symbols: &kernel::Symbols) {
        let stack = match e {
            bpf::Event::OffCpu(o) | bpf::Event::Dirty(o) => &mut o.kernel_stack,
            bpf::Event::BlockIo(b) => &mut b.kernel_stack,
            bpf::Event::Wakeup(w) => &mut w.kernel_stack,
            bpf::Event::Trace(t) => &mut t.kernel_stack,
            bpf::Event::Net(n) => return self.strip_shared(&mut n.kernel_stack, symbols),
            bpf::Event::OnCpu(_)
            | bpf::Event::Fault(_)
            | bpf::Event::Request(_)
            | bpf::Event::Exit { .. } => return,
        };
        let n = symbols.glue_frames(stack);
        stack.drain(..n);
    }

    pub(crate) fn strip_shared(&mut self, stack: &mut Arc<[u64]>, symbols: &kernel::Symbols) {
        // The memo holds the stack it saw: its address cannot be reused meanwhile.
        if let Some((seen, stripped)) = &self.last_net {
            if Arc::ptr_eq(seen, stack) {
                *stack = stripped.clone();
                return;
            }
        }
        let n = symbols.glue_frames(stack);
        let stripped: Arc<[u64]> = if n == 0 {
            stack.clone()
        } else {
            stack[n..].into()
        };
        let seen = std::mem::replace(stack, stripped.clone());
        self.last_net = Some((seen, stripped));
    }
}

/// Whether `e` happened on a CPU `-C` chose (or is not about one CPU).
pub(crate) fn on_chosen_cpu(cfg: &Config, e: &bpf::Event) -> bool {
    match (&cfg.cpus, e.cpu()) {
        (Some(cpus), Some(cpu)) => cpus.contains(&cpu),
        _ => true,
    }
}
