//! Settings tests give through the environment (tiny maps, unseen skbs, few preallocated
//! requests), to see what happens when things do not fit.

use anyhow::bail;

/// The number above 0 that the test setting `name` holds, where set; `what` it counts names
/// it in the error.
pub(crate) fn test_setting(name: &str, what: &str) -> anyhow::Result<Option<u32>> {
    match std::env::var(name) {
        Ok(v) => match v.parse::<u32>() {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => bail!("{name}={v}: expected a number of {what} above 0"),
        },
        Err(_) => Ok(None),
    }
}

/// The entries of each aggregation map: `BPFPERF_AGG_ENTRIES` where set (tests make the
/// maps tiny to see what does not fit), else bpfperf.h's.
pub(crate) fn aggregate_entries() -> anyhow::Result<Option<u32>> {
    test_setting("BPFPERF_AGG_ENTRIES", "entries")
}

/// `BPFPERF_OFFCPU_UNSEEN_EVERY` where set (tests make about one switch back onto a CPU in N
/// run no program, as some hosts hide switches from tracing), else 0.
pub(crate) fn offcpu_unseen_every() -> anyhow::Result<u32> {
    Ok(test_setting("BPFPERF_OFFCPU_UNSEEN_EVERY", "switches")?.unwrap_or(0))
}

/// `BPFPERF_IO_UNSEEN_EVERY` where set (tests make about one block request's completion in N
/// run no program, as interrupts on some hosts do), else 0.
pub(crate) fn io_unseen_every() -> anyhow::Result<u32> {
    Ok(test_setting("BPFPERF_IO_UNSEEN_EVERY", "completions")?.unwrap_or(0))
}

/// `BPFPERF_NET_UNSEEN_EVERY` where set (tests make about one skb in N pass the driver
/// unseen, as the kernel now and then runs no program for a hook), else 0.
pub(crate) fn net_unseen_every() -> anyhow::Result<u32> {
    Ok(test_setting("BPFPERF_NET_UNSEEN_EVERY", "skbs")?.unwrap_or(0))
}
