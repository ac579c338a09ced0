/// What can go wrong loading or running the BPF programs; each message says how to fix it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("BPF needs root or CAP_BPF+CAP_PERFMON: run record with sudo")]
    NotPermitted,
    #[error("the kernel has no BTF (/sys/kernel/btf/vmlinux is missing): BPF CO-RE needs CONFIG_DEBUG_INFO_BTF=y")]
    NoBtf,
    // Display leaves the source out: it follows in the error chain (`{:#}` prints both).
    #[error("perf_event_open of {what} on CPU {cpu} failed (check /proc/sys/kernel/perf_event_paranoid, or run as root)")]
    PerfEventOpen {
        what: &'static str,
        cpu: u32,
        #[source]
        source: std::io::Error,
    },
    #[error("{step} (BPFPERF_DEBUG=1 shows libbpf's log)")]
    Bpf {
        step: &'static str,
        #[source]
        source: libbpf_rs::Error,
    },
    #[error("cannot attach {event}: {why}")]
    Attach { event: String, why: String },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl Error {
    pub(crate) fn bpf(step: &'static str) -> impl FnOnce(libbpf_rs::Error) -> Error {
        move |source| {
            // SAFETY: geteuid has no preconditions.
            let root = unsafe { libc::geteuid() } == 0;
            if !root && matches!(source.kind(), libbpf_rs::ErrorKind::PermissionDenied) {
                Error::NotPermitted
            } else {
                Error::Bpf { step, source }
            }
        }
    }
}
