//! `perf_event_attr` as it is stored in perf.data.

use crate::constants::ATTR_SIZE;

/// One event of a recording: its `perf_event_attr`, its name and the ids its records carry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventAttr {
    /// Name shown by `perf script`/`perf report` (written to EVENT_DESC).
    pub name: String,
    /// `perf_event_attr.type` (see [`crate::event_type`]).
    pub type_: u32,
    pub config: u64,
    /// Sample period, or frequency when `flags` has [`crate::attr_flag::FREQ`].
    pub sample_period_or_freq: u64,
    /// Which fields samples carry (see [`crate::sample_type`]).
    pub sample_type: u64,
    /// The attr bit field (see [`crate::attr_flag`]).
    pub flags: u64,
    pub wakeup_events: u32,
    pub sample_regs_user: u64,
    pub sample_stack_user: u32,
    pub clockid: i32,
    pub sample_max_stack: u16,
    /// Ids that records of this event carry in their ID/IDENTIFIER field. Unique in the file.
    pub ids: Vec<u64>,
}

impl EventAttr {
    /// The 128-byte `perf_event_attr` (PERF_ATTR_SIZE_VER7), little-endian.
    pub fn to_bytes(&self) -> [u8; ATTR_SIZE as usize] {
        let mut b = [0u8; ATTR_SIZE as usize];
        let mut put = |off: usize, bytes: &[u8]| b[off..off + bytes.len()].copy_from_slice(bytes);
        put(0, &self.type_.to_le_bytes());
        put(4, &(ATTR_SIZE as u32).to_le_bytes());
        put(8, &self.config.to_le_bytes());
        put(16, &self.sample_period_or_freq.to_le_bytes());
        put(24, &self.sample_type.to_le_bytes());
        put(40, &self.flags.to_le_bytes());
        put(48, &self.wakeup_events.to_le_bytes());
        put(80, &self.sample_regs_user.to_le_bytes());
        put(88, &self.sample_stack_user.to_le_bytes());
        put(92, &self.clockid.to_le_bytes());
        put(108, &self.sample_max_stack.to_le_bytes());
        b
    }
}
