//! CPython 3.13 on publishes the layout out-of-process tools need: `_Py_DebugOffsets`, the
//! first member of `_PyRuntime` (in the `.PyRuntime` section), a cookie (`xdebugpy`), the
//! version (`PY_VERSION_HEX`) and groups of `uint64_t` offsets, each group led by its
//! structure's size. It is initialized data: read from the interpreter's file, no process
//! needed. The struct itself may change between minor versions (it says so), never within
//! one: what is listed here per minor version is the order of its fields, not offsets.

use super::notread::version_text;
use super::offsets::Offsets;

/// The field names of 3.13's `_Py_DebugOffsets` after the cookie, in order
/// (Include/internal/pycore_runtime.h of 3.13: `version`, `free_threaded`, then one group
/// per structure, each starting with `size`).
const FIELDS_3_13: &[&str] = &[
    "version",
    "free_threaded",
    "runtime_state.size",
    "runtime_state.finalizing",
    "runtime_state.interpreters_head",
    "interpreter_state.size",
    "interpreter_state.id",
    "interpreter_state.next",
    "interpreter_state.threads_head",
    "interpreter_state.gc",
    "interpreter_state.imports_modules",
    "interpreter_state.sysdict",
    "interpreter_state.builtins",
    "interpreter_state.ceval_gil",
    "interpreter_state.gil_runtime_state",
    "interpreter_state.gil_runtime_state_enabled",
    "interpreter_state.gil_runtime_state_locked",
    "interpreter_state.gil_runtime_state_holder",
    "thread_state.size",
    "thread_state.prev",
    "thread_state.next",
    "thread_state.interp",
    "thread_state.current_frame",
    "thread_state.thread_id",
    "thread_state.native_thread_id",
    "thread_state.datastack_chunk",
    "thread_state.status",
    "interpreter_frame.size",
    "interpreter_frame.previous",
    "interpreter_frame.executable",
    "interpreter_frame.instr_ptr",
    "interpreter_frame.localsplus",
    "interpreter_frame.owner",
    "code_object.size",
    "code_object.filename",
    "code_object.name",
    "code_object.qualname",
    "code_object.linetable",
    "code_object.firstlineno",
    "code_object.argcount",
    "code_object.localsplusnames",
    "code_object.localspluskinds",
    "code_object.co_code_adaptive",
    "pyobject.size",
    "pyobject.ob_type",
    "type_object.size",
    "type_object.tp_name",
    "type_object.tp_repr",
    "type_object.tp_flags",
    "tuple_object.size",
    "tuple_object.ob_item",
    "tuple_object.ob_size",
    "list_object.size",
    "list_object.ob_item",
    "list_object.ob_size",
    "dict_object.size",
    "dict_object.ma_keys",
    "dict_object.ma_values",
    "float_object.size",
    "float_object.ob_fval",
    "long_object.size",
    "long_object.lv_tag",
    "long_object.ob_digit",
    "bytes_object.size",
    "bytes_object.ob_size",
    "bytes_object.ob_sval",
    "unicode_object.size",
    "unicode_object.state",
    "unicode_object.length",
    "unicode_object.asciiobject_size",
    "gc.size",
    "gc.collecting",
];

/// The field order of minor version `minor`'s struct, where known.
fn fields(minor: u64) -> Option<&'static [&'static str]> {
    match minor {
        13 => Some(FIELDS_3_13),
        _ => None,
    }
}

const COOKIE: &[u8; 8] = b"xdebugpy";

/// The layout `_Py_DebugOffsets` at the start of `runtime` (the bytes of `_PyRuntime` as
/// the file holds them) gives, or why none: `Err` reads as "Python frames not read: ...".
pub fn read(runtime: &[u8]) -> Result<Offsets, String> {
    if runtime.get(..8) != Some(COOKIE) {
        return Err("its _Py_DebugOffsets cookie (xdebugpy) is not there".into());
    }
    let word = |i: usize| -> Option<u64> {
        let at = 8 + 8 * i;
        Some(u64::from_ne_bytes(
            runtime.get(at..at + 8)?.try_into().ok()?,
        ))
    };
    let version = word(0).ok_or("its _Py_DebugOffsets is cut short")?;
    let (major, minor) = (version >> 24 & 0xff, version >> 16 & 0xff);
    let found = version_text(version);
    let Some(names) = fields(minor).filter(|_| major == 3) else {
        return Err(format!(
            "no layout for {found} (its _Py_DebugOffsets is laid out as bpfperf does not know)"
        ));
    };
    let get = |name: &str| -> Result<u64, String> {
        let i = names
            .iter()
            .position(|n| *n == name)
            .expect("a listed field");
        word(i).ok_or_else(|| format!("its _Py_DebugOffsets ({found}) is cut short"))
    };
    if get("free_threaded")? != 0 {
        return Err(format!("no layout for {found} free-threaded"));
    }
    // An offset into its structure, checked against the structure's size.
    let off = |name: &str| -> Result<u16, String> {
        let value = get(name)?;
        let group = name.split('.').next().expect("a group");
        let size = get(&format!("{group}.size"))?;
        u16::try_from(value)
            .ok()
            .filter(|_| value < size)
            .ok_or_else(|| {
                format!("its _Py_DebugOffsets ({found}) has {name} = {value}, past its size {size}")
            })
    };
    // sizeof(PyASCIIObject), less than the group's sizeof(PyUnicodeObject).
    let ascii = off("unicode_object.asciiobject_size")?;
    let offsets = Offsets {
        runtime_interp_head: off("runtime_state.interpreters_head")?,
        interp_threads_head: off("interpreter_state.threads_head")?,
        tstate_next: off("thread_state.next")?,
        tstate_native_thread_id: off("thread_state.native_thread_id")?,
        tstate_cframe: off("thread_state.current_frame")?,
        cframe_current_frame: 0,
        frame_code: off("interpreter_frame.executable")?,
        frame_previous: off("interpreter_frame.previous")?,
        frame_prev_instr: off("interpreter_frame.instr_ptr")?,
        frame_is_entry: 0,
        frame_owner: off("interpreter_frame.owner")?,
        entry_by_owner: true,
        no_cframe: true,
        frame_objects: false,
        lines: super::offsets::Lines::Locations,
        code_filename: off("code_object.filename")?,
        code_qualname: off("code_object.qualname")?,
        code_firstlineno: off("code_object.firstlineno")?,
        code_linetable: off("code_object.linetable")?,
        code_code_adaptive: off("code_object.co_code_adaptive")?,
        var_size: off("bytes_object.ob_size")?,
        bytes_data: off("bytes_object.ob_sval")?,
        unicode_length: off("unicode_object.length")?,
        unicode_state: off("unicode_object.state")?,
        unicode_ascii_data: ascii,
        // PyCompactUnicodeObject: PyASCIIObject, then utf8_length and utf8 (8 bytes each).
        unicode_compact_data: ascii + 16,
    };
    if offsets.frame_span().is_none() {
        return Err(format!(
            "its _Py_DebugOffsets ({found}) puts the frame fields read more than {} bytes apart",
            super::offsets::FRAME_SPAN
        ));
    }
    Ok(offsets)
}

/// How many bytes of `_PyRuntime` [`read`] is given (more than any layout listed needs).
pub const NEEDED: usize = 8 + 8 * 128;

#[cfg(test)]
mod tests {
    use super::*;

    /// pyenv's 3.13's libpython: its `_PyRuntime` as the file holds it.
    fn runtime_of(path: &str) -> Vec<u8> {
        use object::read::elf::ProgramHeader;
        use object::{Object, ObjectSymbol};
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let elf = object::read::elf::ElfFile64::<object::Endianness>::parse(&*data).unwrap();
        let e = elf.endian();
        let addr = elf
            .dynamic_symbols()
            .find(|s| s.name() == Ok("_PyRuntime"))
            .unwrap()
            .address();
        let ph = elf
            .elf_program_headers()
            .iter()
            .find(|ph| {
                ph.p_type(e) == object::elf::PT_LOAD
                    && (ph.p_vaddr(e)..ph.p_vaddr(e) + ph.p_filesz(e)).contains(&addr)
            })
            .unwrap();
        let off = (addr - ph.p_vaddr(e) + ph.p_offset(e)) as usize;
        data[off..off + NEEDED].to_vec()
    }

    const LIB_3_13: &str = "/root/.pyenv/versions/3.13.0/lib/libpython3.13.so.1.0";

    /// What 3.13's `_Py_DebugOffsets` says, against what its headers say
    /// (`fixtures/python/offsets.c` built with them).
    #[test]
    fn debug_offsets_of_3_13_match_its_headers() {
        let o = read(&runtime_of(LIB_3_13)).expect("3.13's layout");
        super::super::offsets::tests::check_against_headers(
            "/root/.pyenv/versions/3.13.0/include/python3.13",
            &o,
        );
    }

    #[test]
    fn a_damaged_cookie_or_an_unknown_layout_is_said() {
        let mut r = runtime_of(LIB_3_13);
        r[0] = b'y';
        assert_eq!(
            read(&r),
            Err("its _Py_DebugOffsets cookie (xdebugpy) is not there".into())
        );
        let mut r = runtime_of(LIB_3_13);
        r[8..16].copy_from_slice(&0x030e_00a1u64.to_ne_bytes());
        assert_eq!(
            read(&r),
            Err("no layout for 3.14.0a1 (its _Py_DebugOffsets is laid out as bpfperf does not know)".into())
        );
    }
}
