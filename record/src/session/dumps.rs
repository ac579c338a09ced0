//! `--switch-output`: what each file moved to its timestamped name holds, said as perf says it.

use std::path::Path;

use crate::capture::recorder::Recorder;
use crate::config::Config;

/// The counts of the files of a rotated recording moved to their names so far.
#[derive(Default)]
pub(crate) struct DumpCounts {
    pub(crate) samples: u64,
    pub(crate) other: u64,
    pub(crate) lost: u64,
    pub(crate) bytes: u64,
}

impl DumpCounts {
    /// What `rec` wrote so far, in files of `written` bytes.
    pub(crate) fn of(rec: &Recorder, written: u64) -> DumpCounts {
        DumpCounts {
            samples: rec.samples,
            other: rec.off_cpu
                + rec.runq
                + rec.faults
                + rec.io
                + rec.wakeups
                + rec.traced
                + rec.net,
            lost: rec.lost,
            bytes: written,
        }
    }

    /// Says (unless quiet) what the file just moved to `path` holds, as perf says `[ perf
    /// record: Dump perf.data.<timestamp> ]`: the difference between `now`, the counts of
    /// all files so far, and the counts before it.
    pub(crate) fn print(&mut self, cfg: &Config, now: DumpCounts, path: &Path) {
        if cfg.status_line {
            eprintln!(
                "[ record: Dump {}: {} samples, {} other events, {} lost, {} bytes ]",
                path.display(),
                now.samples - self.samples,
                now.other - self.other,
                now.lost - self.lost,
                now.bytes - self.bytes
            );
        }
        *self = now;
    }
}
