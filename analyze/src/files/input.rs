//! The input of every subcommand: a perf.data file (or `-`, a pipe-mode stream), or an
//! archive holding one ([`super::archive`]), read in place.

use std::path::Path;
use std::sync::Arc;

use format::PerfFileReader;

use super::archive::{self, Archive};

/// An opened recording, and the archive it came from, if it did.
pub struct Input {
    pub reader: PerfFileReader,
    pub archive: Option<Arc<Archive>>,
}

/// Opens `path`: an archive's recording, or the file itself. A file's records are walked
/// once: by the parallel read, which checks them as it goes, or as they are first iterated
/// ([`PerfFileReader::open_unwalked`]). The file is opened as a recording first: its map is
/// what reads it from disk, in 2 MiB pieces (an archive's magic read first by `read` took
/// its first pages into the cache in small ones).
pub fn open(path: &Path) -> Result<Input, format::Error> {
    let not_a_recording = match PerfFileReader::open_unwalked(path) {
        Ok(reader) => {
            return Ok(Input {
                reader,
                archive: None,
            })
        }
        Err(e) => e,
    };
    if path.as_os_str() == "-" || !archive::is_archive(path) {
        return Err(not_a_recording);
    }
    let a = Archive::open(path).map_err(|e| format::Error::Io {
        path: path.into(),
        cause: std::io::Error::other(e),
    })?;
    let name = path.join(archive::PERF_DATA);
    let reader = PerfFileReader::from_bytes(&name, a.perf_data())?;
    Ok(Input {
        reader,
        archive: Some(Arc::new(a)),
    })
}
