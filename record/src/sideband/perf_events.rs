//! The kernel's side-band records: MMAP2/COMM/FORK/EXIT, and KSYMBOL/BPF_EVENT (BPF programs
//! loaded and unloaded), from one dummy perf event per CPU.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{fence, Ordering};

use perf_event_open_sys::bindings;

use super::fact::{Fact, TimedFact};

const PAGE: usize = 4096;
/// Data pages per CPU buffer (power of two): 256 KiB.
const DATA_PAGES: usize = 64;

struct Ring {
    _fd: OwnedFd,
    base: *mut u8,
    len: usize,
}

/// One dummy event per CPU, system-wide, with its ring buffer mapped.
pub struct SideBand {
    rings: Vec<Ring>,
}

// SAFETY: the mapped rings are only touched through &mut self.
unsafe impl Send for SideBand {}

impl SideBand {
    /// `data`: also report non-executable mappings (perf does for DWARF unwinding: libunwind
    /// reads .eh_frame_hdr through the process's read-only mappings).
    pub fn open(cpus: &[u32], data: bool) -> Result<SideBand, bpf::Error> {
        let mut rings = Vec::new();
        for &cpu in cpus {
            let mut attr = bindings::perf_event_attr {
                size: std::mem::size_of::<bindings::perf_event_attr>() as u32,
                type_: bindings::PERF_TYPE_SOFTWARE,
                config: bindings::PERF_COUNT_SW_DUMMY as u64,
                sample_type: (bindings::PERF_SAMPLE_TID
                    | bindings::PERF_SAMPLE_TIME
                    | bindings::PERF_SAMPLE_CPU) as u64,
                clockid: libc::CLOCK_MONOTONIC,
                ..Default::default()
            };
            attr.set_mmap(1);
            attr.set_mmap2(1);
            attr.set_mmap_data(data as u64);
            attr.set_comm(1);
            attr.set_comm_exec(1);
            attr.set_task(1);
            attr.set_ksymbol(1);
            attr.set_bpf_event(1);
            attr.set_sample_id_all(1);
            attr.set_use_clockid(1);
            // SAFETY: valid attr; descriptor checked below.
            let fd = unsafe {
                perf_event_open_sys::perf_event_open(
                    &mut attr,
                    -1,
                    cpu as i32,
                    -1,
                    bindings::PERF_FLAG_FD_CLOEXEC as u64,
                )
            };
            if fd < 0 {
                let source = std::io::Error::last_os_error();
                return Err(match source.raw_os_error() {
                    Some(libc::EACCES) | Some(libc::EPERM) => bpf::Error::NotPermitted,
                    _ => bpf::Error::PerfEventOpen {
                        what: "the side-band dummy event",
                        cpu,
                        source,
                    },
                });
            }
            // SAFETY: new descriptor, owned here.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            let len = PAGE * (1 + DATA_PAGES);
            // SAFETY: mapping the perf buffer of our own event.
            let base = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd.as_raw_fd(),
                    0,
                )
            };
            if base == libc::MAP_FAILED {
                return Err(bpf::Error::Io(std::io::Error::last_os_error()));
            }
            rings.push(Ring {
                _fd: fd,
                base: base.cast(),
                len,
            });
        }
        Ok(SideBand { rings })
    }

    /// Reads every record waiting in the buffers.
    pub fn drain(&mut self, out: &mut Vec<TimedFact>) {
        for ring in &mut self.rings {
            ring.drain(out);
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping what open() mapped.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

impl Ring {
    fn drain(&mut self, out: &mut Vec<TimedFact>) {
        // perf_event_mmap_page: data_head at 1024, data_tail at 1032.
        // SAFETY: the first page is the kernel's control page, valid while mapped.
        let head_ptr = unsafe { self.base.add(1024) } as *const u64;
        let tail_ptr = unsafe { self.base.add(1032) } as *mut u64;
        let head = unsafe { std::ptr::read_volatile(head_ptr) };
        fence(Ordering::Acquire);
        let mut tail = unsafe { std::ptr::read_volatile(tail_ptr) };
        let size = (PAGE * DATA_PAGES) as u64;
        let data = unsafe { std::slice::from_raw_parts(self.base.add(PAGE), PAGE * DATA_PAGES) };
        let mut record = Vec::with_capacity(256);
        while tail < head {
            let at = |off: u64| data[((tail + off) % size) as usize];
            let rsize = u16::from_le_bytes([at(6), at(7)]) as u64;
            if rsize < 8 || tail + rsize > head {
                break;
            }
            record.clear();
            record.extend((0..rsize).map(at));
            if let Some(f) = parse(&record) {
                out.push(f);
            }
            tail += rsize;
        }
        fence(Ordering::Release);
        unsafe { std::ptr::write_volatile(tail_ptr, tail) };
    }
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}
fn cstr(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// Parses one record (header included); the sample_id trailer is pid, tid, time, cpu.
fn parse(r: &[u8]) -> Option<TimedFact> {
    let kind = u32_at(r, 0);
    let misc = u16::from_le_bytes([r[4], r[5]]);
    if r.len() < 8 + 24 {
        return None;
    }
    let trailer = r.len() - 24;
    let time = u64_at(r, trailer + 8);
    let cpu = u32_at(r, trailer + 16);
    let body = &r[8..trailer];
    let fact = match kind {
        10 if body.len() >= 64 => Fact::Mmap2 {
            pid: u32_at(body, 0),
            tid: u32_at(body, 4),
            start: u64_at(body, 8),
            len: u64_at(body, 16),
            pgoff: u64_at(body, 24),
            maj: u32_at(body, 32),
            min: u32_at(body, 36),
            ino: u64_at(body, 40),
            ino_generation: u64_at(body, 48),
            prot: u32_at(body, 56),
            flags: u32_at(body, 60),
            filename: cstr(&body[64..]),
        },
        3 if body.len() >= 8 => Fact::Comm {
            pid: u32_at(body, 0),
            tid: u32_at(body, 4),
            comm: cstr(&body[8..]),
            exec: misc & (1 << 13) != 0,
        },
        7 | 4 if body.len() >= 16 => {
            let (pid, ppid, tid, ptid) = (
                u32_at(body, 0),
                u32_at(body, 4),
                u32_at(body, 8),
                u32_at(body, 12),
            );
            if kind == 7 {
                Fact::Fork {
                    pid,
                    ppid,
                    tid,
                    ptid,
                }
            } else {
                Fact::Exit {
                    pid,
                    ppid,
                    tid,
                    ptid,
                }
            }
        }
        2 if body.len() >= 16 => Fact::Lost {
            lost: u64_at(body, 8),
        },
        17 if body.len() > 16 => Fact::Ksymbol {
            addr: u64_at(body, 0),
            len: u32_at(body, 8),
            ksym_type: u16::from_le_bytes([body[12], body[13]]),
            flags: u16::from_le_bytes([body[14], body[15]]),
            name: cstr(&body[16..]),
        },
        18 if body.len() >= 16 => Fact::BpfEvent {
            kind: u16::from_le_bytes([body[0], body[1]]),
            flags: u16::from_le_bytes([body[2], body[3]]),
            id: u32_at(body, 4),
            tag: body[8..16].try_into().unwrap(),
        },
        _ => return None,
    };
    Some(TimedFact { time, cpu, fact })
}
