//! python.bpf.h: the processes whose samples carry their Python frames.

use libbpf_rs::{MapCore, MapFlags};

use crate::skel::{types, BpfperfSkel};
use crate::Error;

/// Byte offsets into one CPython version's structures (`struct py_offsets`).
pub type PyOffsets = types::py_offsets;

/// Installs process `tgid`: its `_PyRuntime` at `runtime`, laid out as `offsets` say.
pub fn watch(
    skel: &BpfperfSkel<'_>,
    tgid: u32,
    runtime: u64,
    offsets: &PyOffsets,
) -> Result<(), Error> {
    let value = types::py_proc {
        runtime,
        off: *offsets,
    };
    // SAFETY: py_proc is plain old data generated from the BPF object's BTF.
    let bytes = unsafe { plain::as_bytes(&value) };
    skel.maps
        .py_procs
        .update(&tgid.to_ne_bytes(), bytes, MapFlags::ANY)
        .map_err(Error::bpf("install a Python process"))
}
