//! Where CPython keeps what the frame reader needs, per version.
//!
//! The numbers are `offsetof` and `sizeof` in the headers of Debian 12's python3.11-dev
//! 3.11.2 (internal headers included), as `fixtures/python/offsets.c` prints them; the test
//! `offsets_match_the_headers` compiles that program and compares. 3.12's table is in
//! `offsets_3_12.rs`; from 3.13 on the layout is read from the interpreter's own
//! `_Py_DebugOffsets` (`debug_offsets.rs`). Other versions are not read: record names each
//! such process at the end.

/// How a code object maps instructions to lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lines {
    /// 3.11 on: the location table (`co_linetable`), lasti in bytes.
    Locations,
    /// 3.10: `co_linetable` of (bytes, line delta) pairs, lasti in code units.
    Linetable310,
    /// 3.8, 3.9: `co_lnotab` of (bytes, line delta) pairs, lasti in bytes.
    Lnotab,
}

/// Byte offsets into one version's structures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offsets {
    /// `_PyRuntimeState.interpreters.head`.
    pub runtime_interp_head: u16,
    /// `PyInterpreterState.threads.head`.
    pub interp_threads_head: u16,
    pub tstate_next: u16,
    pub tstate_native_thread_id: u16,
    pub tstate_cframe: u16,
    /// `_PyCFrame.current_frame`.
    pub cframe_current_frame: u16,
    /// `_PyInterpreterFrame.f_code`, `.previous`, `.prev_instr`, `.is_entry`.
    pub frame_code: u16,
    pub frame_previous: u16,
    pub frame_prev_instr: u16,
    pub frame_is_entry: u16,
    /// `_PyInterpreterFrame.owner` (a `char`).
    pub frame_owner: u16,
    /// 3.12 on: no `is_entry`; an eval call's first frame is the one behind a frame owned by
    /// the C stack (`FRAME_OWNED_BY_CSTACK`), which is no Python function's.
    pub entry_by_owner: bool,
    /// 3.13 on: no `_PyCFrame`; `tstate_cframe` is `PyThreadState.current_frame`.
    pub no_cframe: bool,
    /// 3.8 to 3.10: frame objects (`frame_objects.rs`).
    pub frame_objects: bool,
    /// How its code objects give lines.
    pub lines: Lines,
    /// `PyCodeObject` fields.
    pub code_filename: u16,
    pub code_qualname: u16,
    pub code_firstlineno: u16,
    pub code_linetable: u16,
    pub code_code_adaptive: u16,
    /// `PyVarObject.ob_size`, `PyBytesObject.ob_sval`.
    pub var_size: u16,
    pub bytes_data: u16,
    /// `PyASCIIObject.length` and `.state`; where a compact ASCII string's characters
    /// start (`sizeof(PyASCIIObject)`), and a compact non-ASCII one's
    /// (`sizeof(PyCompactUnicodeObject)`).
    pub unicode_length: u16,
    pub unicode_state: u16,
    pub unicode_ascii_data: u16,
    pub unicode_compact_data: u16,
}

/// CPython 3.11 on x86-64.
pub const PY_3_11: Offsets = Offsets {
    runtime_interp_head: 40,
    interp_threads_head: 16,
    tstate_next: 8,
    tstate_native_thread_id: 160,
    tstate_cframe: 56,
    cframe_current_frame: 8,
    frame_code: 32,
    frame_previous: 48,
    frame_prev_instr: 56,
    frame_is_entry: 68,
    frame_owner: 69,
    entry_by_owner: false,
    no_cframe: false,
    frame_objects: false,
    lines: Lines::Locations,
    code_filename: 112,
    code_qualname: 128,
    code_firstlineno: 72,
    code_linetable: 136,
    code_code_adaptive: 184,
    var_size: 16,
    bytes_data: 32,
    unicode_length: 16,
    unicode_state: 32,
    unicode_ascii_data: 48,
    unicode_compact_data: 72,
};

/// `py_offsets.flags` (python.bpf.h): [`Offsets::entry_by_owner`], [`Offsets::no_cframe`].
const PY_ENTRY_BY_OWNER: u16 = 1;
const PY_NO_CFRAME: u16 = 2;
const PY_FRAME_OBJECTS: u16 = 4;
const PY_THREAD_BY_PTHREAD: u16 = 8;

/// The most bytes of a frame the BPF program reads (`PY_FRAME_SPAN`).
pub const FRAME_SPAN: u16 = bpf::PY_FRAME_SPAN;

impl Offsets {
    /// Where the frame fields the BPF program reads lie, as one span it reads at once:
    /// (start, length), or `None` where they span more than [`FRAME_SPAN`] bytes or a
    /// pointer field is not 8-aligned from the start (python.bpf.h reads them as u64s).
    pub fn frame_span(&self) -> Option<(u16, u16)> {
        let mut fields = vec![
            (self.frame_code, 8),
            (self.frame_previous, 8),
            (self.frame_prev_instr, 8),
        ];
        if self.entry_by_owner {
            fields.push((self.frame_owner, 1));
        } else if !self.frame_objects {
            fields.push((self.frame_is_entry, 1));
        }
        let start = fields.iter().map(|f| f.0).min()?;
        let end = fields.iter().map(|f| f.0 + f.1).max()?;
        let aligned = fields.iter().all(|f| f.1 == 1 || (f.0 - start) % 8 == 0);
        (aligned && end - start <= FRAME_SPAN).then_some((start, end - start))
    }

    /// What the BPF program is given.
    pub fn for_bpf(&self) -> bpf::PyOffsets {
        let (frame_span_start, frame_span_len) = self.frame_span().unwrap_or((0, u16::MAX));
        bpf::PyOffsets {
            runtime_interp_head: self.runtime_interp_head,
            interp_threads_head: self.interp_threads_head,
            tstate_next: self.tstate_next,
            tstate_native_thread_id: self.tstate_native_thread_id,
            tstate_cframe: self.tstate_cframe,
            cframe_current_frame: self.cframe_current_frame,
            frame_code: self.frame_code,
            frame_previous: self.frame_previous,
            frame_prev_instr: self.frame_prev_instr,
            frame_is_entry: self.frame_is_entry,
            code_code_adaptive: self.code_code_adaptive,
            frame_owner: self.frame_owner,
            flags: (self.entry_by_owner as u16 * PY_ENTRY_BY_OWNER)
                | (self.no_cframe as u16 * PY_NO_CFRAME)
                | (self.frame_objects as u16 * (PY_FRAME_OBJECTS | PY_THREAD_BY_PTHREAD)),
            frame_span_start,
            frame_span_len,
            ..Default::default()
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// What `offsets.c` prints with the headers in `include`, compared with `o`.
    pub fn check_against_headers(include: &str, o: &Offsets) {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let out = std::env::temp_dir().join(format!(
            "bpfperf-pyoffsets-{}-{}",
            std::process::id(),
            include.replace('/', "_")
        ));
        let built = std::process::Command::new("cc")
            .arg(format!("-I{include}"))
            .arg("-o")
            .arg(&out)
            .arg(root.join("fixtures/python/offsets.c"))
            .status()
            .expect("cc");
        assert!(built.success(), "offsets.c did not build with {include}");
        let printed = std::process::Command::new(&out)
            .output()
            .expect("run offsets");
        let _ = std::fs::remove_file(&out);
        let text = String::from_utf8(printed.stdout).unwrap();
        let get = |name: &str| -> Option<u16> {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        };
        if o.frame_objects {
            let pairs = [
                ("runtime_interpreters_head", o.runtime_interp_head),
                ("interp_threads_head", o.interp_threads_head),
                ("tstate_next", o.tstate_next),
                ("tstate_thread_id", o.tstate_native_thread_id),
                ("tstate_frame", o.tstate_cframe),
                ("frame_code", o.frame_code),
                ("frame_previous", o.frame_previous),
                ("frame_lasti", o.frame_prev_instr),
                ("code_filename", o.code_filename),
                ("code_name", o.code_qualname),
                ("code_firstlineno", o.code_firstlineno),
                ("code_linetable", o.code_linetable),
                ("code_size", o.code_code_adaptive),
                ("var_size", o.var_size),
                ("bytes_data", o.bytes_data),
                ("unicode_length", o.unicode_length),
                ("unicode_state", o.unicode_state),
                ("unicode_ascii_data", o.unicode_ascii_data),
                ("unicode_compact_data", o.unicode_compact_data),
            ];
            for (name, ours) in pairs {
                let theirs = get(name).unwrap_or_else(|| panic!("{name} not printed ({include})"));
                assert_eq!(theirs, ours, "{name} ({include})");
            }
            return;
        }
        let mut pairs = vec![
            ("runtime_interpreters_head", o.runtime_interp_head),
            ("interp_threads_head", o.interp_threads_head),
            ("tstate_next", o.tstate_next),
            ("tstate_native_thread_id", o.tstate_native_thread_id),
            ("tstate_cframe", o.tstate_cframe),
            ("frame_code", o.frame_code),
            ("frame_previous", o.frame_previous),
            ("frame_prev_instr", o.frame_prev_instr),
            ("frame_owner", o.frame_owner),
            ("code_filename", o.code_filename),
            ("code_qualname", o.code_qualname),
            ("code_firstlineno", o.code_firstlineno),
            ("code_linetable", o.code_linetable),
            ("code_code_adaptive", o.code_code_adaptive),
            ("var_size", o.var_size),
            ("bytes_data", o.bytes_data),
            ("unicode_length", o.unicode_length),
            ("unicode_state", o.unicode_state),
            ("unicode_ascii_data", o.unicode_ascii_data),
            ("unicode_compact_data", o.unicode_compact_data),
        ];
        if !o.no_cframe {
            pairs.push(("cframe_current_frame", o.cframe_current_frame));
        }
        if o.entry_by_owner {
            // The owner value that marks an eval call's own frame (python.bpf.h's).
            pairs.push(("frame_owned_by_cstack", 3));
        } else {
            pairs.push(("frame_is_entry", o.frame_is_entry));
        }
        assert_eq!(
            get("frame_is_entry").is_none(),
            o.entry_by_owner,
            "{include}"
        );
        assert_eq!(
            get("cframe_current_frame").is_none(),
            o.no_cframe,
            "{include}"
        );
        for (name, ours) in pairs {
            let theirs = get(name).unwrap_or_else(|| panic!("{name} not printed ({include})"));
            assert_eq!(theirs, ours, "{name} ({include})");
        }
    }
}
