//! What a view asks of the pipeline: which samples, and how much of each frame to look up.

use crate::read::time_range::TimeRanges;
use crate::read::{EventSel, Selection, Weight};

/// What to keep and how to show it.
#[derive(Debug, Clone)]
pub struct Options {
    pub event: EventSel,
    /// What a sample of the event weighs instead of its count or ns (`--weight`).
    pub weight: Option<Weight>,
    /// Show inlined functions as frames of their own.
    pub inline: bool,
    pub user_only: bool,
    pub kernel_only: bool,
    pub pid: Option<i32>,
    pub tid: Option<i32>,
    pub comm: Option<String>,
    /// Only samples in these stretches of time (`--time`).
    pub time: Option<TimeRanges>,
    /// Keep every sample apart (views per sample: script, heatmaps), never merged by stack.
    pub per_sample: bool,
    /// Views of time (the Firefox Profiler's tracks, speedscope's Time Order): every sample's
    /// time in [`Symbolized::timeline`], each distinct stack unwound and symbolized once.
    pub timeline: bool,
    /// Look up source lines (`file:line`, for `--sort srcline`); inline frames need them too.
    pub lines: bool,
    /// Keep each frame's address and symbol offset (for `script`).
    pub addresses: bool,
    /// Draw a progress bar on stderr (only when it is a terminal).
    pub progress: bool,
    /// Name code no symbol covers by the function its unwind tables delimit
    /// (`liblzma.so.5.4.1!0x12ab0`, one name per function); else `[unknown]`, as perf does.
    pub address_names: bool,
}

impl Options {
    /// Whether views need every sample apart from the others (script's times and
    /// addresses, wakeups matched by time, heatmaps); else identical stacks become one.
    pub fn keeps_each_sample(&self) -> bool {
        self.per_sample
            || (self.addresses && !self.timeline)
            || matches!(
                self.event,
                EventSel::Wakeup | EventSel::Chain(_) | EventSel::Critical
            )
    }

    /// Whether off-CPU stacks get their socket waits' peers (`peer:ADDR:PORT` at the root):
    /// off-CPU and wakeup views of a recording with `bpfperf:sock_wait` events (`events`:
    /// its event names), whose samples must then be read and kept one by one (their times
    /// say which wait covers them). Not with addresses (script shows the samples as they
    /// are).
    pub fn labels_peers(&self, events: &[String]) -> bool {
        matches!(
            self.event,
            EventSel::OffCpu | EventSel::Wakeup | EventSel::Chain(_)
        ) && !self.addresses
            && crate::aggregate::has_socket_waits(events)
    }

    /// What the weights measure, as exports name their sample types and tracks: the
    /// event's (see [`EventSel::measure`]), or `latency` or the field `--weight` names.
    pub fn measure(&self) -> String {
        match &self.weight {
            Some(w) => w.name().to_string(),
            None => self.event.measure().to_string(),
        }
    }

    /// Whether reading must keep every sample with its own time: identical samples merged
    /// while reading keep the first one's time only.
    pub fn reads_each_sample(&self) -> bool {
        self.keeps_each_sample() || self.time.is_some() || self.timeline
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            event: EventSel::Cpu,
            weight: None,
            inline: true,
            user_only: false,
            kernel_only: false,
            pid: None,
            tid: None,
            comm: None,
            time: None,
            per_sample: false,
            timeline: false,
            lines: true,
            addresses: false,
            progress: false,
            address_names: true,
        }
    }
}

impl Options {
    /// The samples these options select (read's [`Selection`]).
    pub fn selection(&self) -> Selection<'_> {
        Selection {
            event: &self.event,
            weight: self.weight.as_ref(),
            pid: self.pid,
            tid: self.tid,
            comm: self.comm.as_deref(),
            time: self.time.as_ref(),
        }
    }
}
