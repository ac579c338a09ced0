//! Numbers from the perf.data format and `linux/perf_event.h`.

/// Record types (`perf_event_header.type`).
pub mod record_type {
    pub const MMAP: u32 = 1;
    pub const LOST: u32 = 2;
    pub const COMM: u32 = 3;
    pub const EXIT: u32 = 4;
    pub const FORK: u32 = 7;
    pub const SAMPLE: u32 = 9;
    pub const MMAP2: u32 = 10;
    pub const LOST_SAMPLES: u32 = 13;
    /// A kernel symbol (JIT-ed BPF code, out-of-line code) registered or unregistered.
    pub const KSYMBOL: u32 = 17;
    /// A BPF program loaded or unloaded.
    pub const BPF_EVENT: u32 = 18;
    pub const HEADER_ATTR: u32 = 64;
    pub const HEADER_TRACING_DATA: u32 = 66;
    pub const HEADER_BUILD_ID: u32 = 67;
    pub const FINISHED_ROUND: u32 = 68;
    /// Hardware trace bytes (Intel PT, CoreSight): they follow the record, outside its size.
    pub const AUXTRACE: u32 = 71;
    pub const HEADER_FEATURE: u32 = 80;
    pub const COMPRESSED: u32 = 81;
    pub const COMPRESSED2: u32 = 83;
    pub const FINISHED_INIT: u32 = 82;
}

/// `perf_event_header.misc` bits.
pub mod misc {
    pub const KERNEL: u16 = 1;
    pub const USER: u16 = 2;
    pub const COMM_EXEC: u16 = 1 << 13;
    pub const MMAP_BUILD_ID: u16 = 1 << 14;
    pub const BUILD_ID_SIZE: u16 = 1 << 15;
}

/// `perf_event_attr.sample_type` bits, in the order their fields appear in a sample.
pub mod sample_type {
    pub const IP: u64 = 1 << 0;
    pub const TID: u64 = 1 << 1;
    pub const TIME: u64 = 1 << 2;
    pub const ADDR: u64 = 1 << 3;
    pub const READ: u64 = 1 << 4;
    pub const CALLCHAIN: u64 = 1 << 5;
    pub const ID: u64 = 1 << 6;
    pub const CPU: u64 = 1 << 7;
    pub const PERIOD: u64 = 1 << 8;
    pub const STREAM_ID: u64 = 1 << 9;
    pub const RAW: u64 = 1 << 10;
    pub const BRANCH_STACK: u64 = 1 << 11;
    pub const REGS_USER: u64 = 1 << 12;
    pub const STACK_USER: u64 = 1 << 13;
    pub const WEIGHT: u64 = 1 << 14;
    pub const IDENTIFIER: u64 = 1 << 16;
}

/// `perf_event_attr` flag bits (the bit field after `read_format`).
pub mod attr_flag {
    pub const DISABLED: u64 = 1 << 0;
    pub const INHERIT: u64 = 1 << 1;
    pub const EXCLUDE_USER: u64 = 1 << 4;
    pub const EXCLUDE_KERNEL: u64 = 1 << 5;
    pub const MMAP: u64 = 1 << 8;
    pub const COMM: u64 = 1 << 9;
    pub const FREQ: u64 = 1 << 10;
    pub const ENABLE_ON_EXEC: u64 = 1 << 12;
    pub const TASK: u64 = 1 << 13;
    pub const SAMPLE_ID_ALL: u64 = 1 << 18;
    pub const EXCLUDE_CALLCHAIN_USER: u64 = 1 << 22;
    pub const MMAP2: u64 = 1 << 23;
    pub const COMM_EXEC: u64 = 1 << 24;
    pub const USE_CLOCKID: u64 = 1 << 25;
    pub const KSYMBOL: u64 = 1 << 29;
    pub const BPF_EVENT: u64 = 1 << 30;
}

/// `perf_record_ksymbol.ksym_type` values and flags.
pub mod ksymbol {
    /// JIT-ed code of a BPF program.
    pub const TYPE_BPF: u16 = 1;
    /// Out-of-line code (kprobe instruction slots, static call trampolines).
    pub const TYPE_OOL: u16 = 2;
    /// The symbol is gone (its code freed).
    pub const FLAG_UNREGISTER: u16 = 1;
}

/// `perf_record_bpf_event.type` values.
pub mod bpf_event {
    pub const PROG_LOAD: u16 = 1;
    pub const PROG_UNLOAD: u16 = 2;
}

/// `perf_event_attr.type` values.
pub mod event_type {
    pub const HARDWARE: u32 = 0;
    pub const SOFTWARE: u32 = 1;
    pub const TRACEPOINT: u32 = 2;
}

/// Software event configs (`perf_sw_ids`).
pub mod sw_event {
    pub const CPU_CLOCK: u64 = 0;
    pub const TASK_CLOCK: u64 = 1;
    pub const DUMMY: u64 = 9;
    pub const BPF_OUTPUT: u64 = 10;
}

/// Callchain context markers.
pub mod callchain {
    pub const KERNEL: u64 = 0xffff_ffff_ffff_ff80;
    pub const USER: u64 = 0xffff_ffff_ffff_fe00;
    /// Any value at or above this is a context marker, not an address.
    pub const MAX_CONTEXT: u64 = 0xffff_ffff_ffff_f001;
}

/// Feature bits of the header's feature bitmap.
pub mod feature {
    pub const TRACING_DATA: u32 = 1;
    pub const BUILD_ID: u32 = 2;
    pub const HOSTNAME: u32 = 3;
    pub const OSRELEASE: u32 = 4;
    pub const VERSION: u32 = 5;
    pub const ARCH: u32 = 6;
    pub const NRCPUS: u32 = 7;
    pub const CMDLINE: u32 = 11;
    pub const EVENT_DESC: u32 = 12;
    pub const SAMPLE_TIME: u32 = 21;
    pub const CLOCKID: u32 = 23;
    pub const COMPRESSED: u32 = 27;
}

/// Size of the file header of a seekable perf.data file.
pub const FILE_HEADER_SIZE: u64 = 104;
/// Size of the header of a pipe-mode stream.
pub const PIPE_HEADER_SIZE: u64 = 16;
/// Size of `perf_event_attr` as we write it (PERF_ATTR_SIZE_VER7).
pub const ATTR_SIZE: u64 = 128;
/// Size of a record header (`perf_event_header`).
pub const RECORD_HEADER_SIZE: u64 = 8;
