use std::path::PathBuf;

/// Everything that can go wrong reading or writing a perf.data file.
///
/// Each variant names the file; the ones about bad content also name the byte offset.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The cause is part of the message (not a `source()`), so `{:#}` chains print it once.
    #[error("{path}: {cause}")]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },
    #[error("{path}: is a directory, not a perf.data file")]
    IsDirectory { path: PathBuf },
    #[error("{path}: empty file (0 bytes), not a perf.data file")]
    Empty { path: PathBuf },
    #[error("{path}: not a perf.data file: magic at offset 0 is {found:?}, expected \"PERFILE2\"")]
    BadMagic { path: PathBuf, found: String },
    #[error("{path}: damaged at offset {offset}: {what}")]
    Damaged {
        path: PathBuf,
        offset: u64,
        what: String,
    },
    #[error("{path}: {cause}")]
    Parse {
        path: PathBuf,
        cause: linux_perf_data::Error,
    },
    #[error("{path}: cannot write: {what}")]
    Write { path: PathBuf, what: String },
    /// The filesystem holding the file is full.
    #[error("{path}: no space left on device")]
    NoSpace { path: PathBuf },
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, cause: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            cause,
        }
    }

    pub(crate) fn damaged(path: impl Into<PathBuf>, offset: u64, what: impl Into<String>) -> Self {
        Error::Damaged {
            path: path.into(),
            offset,
            what: what.into(),
        }
    }
}
