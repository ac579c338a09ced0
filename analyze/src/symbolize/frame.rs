//! What an address symbolizes to: frames as people see them.

/// One frame as shown to people.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FrameInfo {
    pub function: String,
    /// The file it came from (`[kernel.kallsyms]`, `/usr/lib/.../libc.so.6`, `[unknown]`).
    pub dso: String,
    /// `file:line`, when DWARF says.
    pub srcline: Option<String>,
    /// An inlined call (not a real stack frame).
    pub inlined: bool,
    /// No symbol names it: `function` is `FILE!0xSVMA`, the function the file's unwind
    /// tables delimit (see `symbolize::fde`), where perf prints `[unknown]`.
    pub by_address: bool,
}

impl FrameInfo {
    /// Function `function` of file `dso`, named by a symbol: no source line, not inlined.
    pub fn new(function: &str, dso: &str) -> FrameInfo {
        FrameInfo {
            function: function.into(),
            dso: dso.into(),
            srcline: None,
            inlined: false,
            by_address: false,
        }
    }

    pub fn unknown(dso: &str) -> FrameInfo {
        FrameInfo::new(crate::UNKNOWN, dso)
    }

    pub fn is_unknown(&self) -> bool {
        self.function == crate::UNKNOWN
    }

    /// Whether no symbol names it: `[unknown]`, or named by its address.
    pub fn lacks_symbol(&self) -> bool {
        self.by_address || self.is_unknown()
    }
}

/// What one address symbolizes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddrInfo {
    /// The function and the functions inlined into it at this address, outermost first.
    pub frames: Vec<FrameInfo>,
    /// Start (SVMA) of the outer function's symbol, for `symbol+offset`.
    pub start: Option<u64>,
}
