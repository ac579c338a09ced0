//! Recordings of traced events made in memory, for the unit tests of the stages and views
//! that read payloads.

use super::recording::{RawSample, Recording};

/// The format file of `syscalls:sys_enter_write` on 6.x kernels (id 840 here).
pub const SYS_ENTER_WRITE: &str = "name: sys_enter_write
ID: 840
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:int __syscall_nr;\toffset:8;\tsize:4;\tsigned:1;
\tfield:unsigned int fd;\toffset:16;\tsize:8;\tsigned:0;
\tfield:const char * buf;\toffset:24;\tsize:8;\tsigned:0;
\tfield:size_t count;\toffset:32;\tsize:8;\tsigned:0;

print fmt: \"fd: 0x%08lx, buf: 0x%08lx, count: 0x%08lx\", ((unsigned long)(REC->fd)), ((unsigned long)(REC->buf)), ((unsigned long)(REC->count))
";

/// A probe's return with its value, as bpfperf writes `uretprobe:libc:getaddrinfo`.
pub const GETADDRINFO_RETURN: &str = "name: getaddrinfo__return
ID: 60101
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:unsigned long __probe_func;\toffset:8;\tsize:8;\tsigned:0;
\tfield:u64 arg1;\toffset:16;\tsize:8;\tsigned:0;
\tfield:__data_loc char[] host;\toffset:24;\tsize:4;\tsigned:0;
\tfield:unsigned long __probe_ret_ip;\toffset:64;\tsize:8;\tsigned:0;
\tfield:s64 ret;\toffset:72;\tsize:8;\tsigned:1;

print fmt: \"(%lx <- %lx) ret=%Ld\", REC->__probe_func, REC->__probe_ret_ip, REC->ret
";

/// A `sys_enter_write` record: fd, buf, count.
pub fn write_payload(pid: i32, fd: u64, count: u64) -> Vec<u8> {
    let mut b = vec![0u8; 40];
    b[0..2].copy_from_slice(&840u16.to_le_bytes());
    b[4..8].copy_from_slice(&pid.to_le_bytes());
    b[8..12].copy_from_slice(&1i32.to_le_bytes());
    b[16..24].copy_from_slice(&fd.to_le_bytes());
    b[24..32].copy_from_slice(&0x5000u64.to_le_bytes());
    b[32..40].copy_from_slice(&count.to_le_bytes());
    b
}

/// A `getaddrinfo__return` record: its host (dynamic data after the fixed part) and `ret`.
pub fn return_payload(pid: i32, host: &str, ret: i64) -> Vec<u8> {
    let mut b = vec![0u8; 80];
    b[0..2].copy_from_slice(&60101u16.to_le_bytes());
    b[4..8].copy_from_slice(&pid.to_le_bytes());
    let loc = 80u32 | ((host.len() as u32 + 1) << 16);
    b[24..28].copy_from_slice(&loc.to_le_bytes());
    b[72..80].copy_from_slice(&ret.to_le_bytes());
    b.extend_from_slice(host.as_bytes());
    b.push(0);
    b
}

/// A recording of three events, `cpu-clock` (0), `syscalls:sys_enter_write` (1) and
/// `probe_libc:getaddrinfo__return` (2, a latency), with no samples yet; comms `dd`, `curl`.
pub fn recording() -> Recording {
    Recording {
        events: vec![
            "cpu-clock".into(),
            "syscalls:sys_enter_write".into(),
            "probe_libc:getaddrinfo__return".into(),
        ],
        formats: vec![
            None,
            Some(format::TraceFormat::parse(SYS_ENTER_WRITE).unwrap()),
            Some(format::TraceFormat::parse(GETADDRINFO_RETURN).unwrap()),
        ],
        latency: vec![false, false, true],
        comms: vec!["dd".into(), "curl".into()],
        ..Default::default()
    }
}

/// A sample of `event` by `pid` (its own thread; comm 0 for pid < 200, else 1) at `time`,
/// with `period`, the kernel stack `kernel` and the payload `raw`.
pub fn sample(
    event: usize,
    pid: i32,
    time: u64,
    period: u64,
    kernel: &[u64],
    raw: Option<Vec<u8>>,
) -> RawSample {
    RawSample {
        event,
        pid,
        tid: pid,
        time,
        cpu: 1,
        period,
        count: 1,
        comm: u32::from(pid >= 200),
        kernel: kernel.to_vec(),
        user: Vec::new(),
        stack_copy: None,
        raw: raw.map(Vec::into_boxed_slice),
    }
}
