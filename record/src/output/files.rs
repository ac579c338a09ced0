//! The recording's files: each created with its events' attrs (compressed with `-z`), and
//! finished with the features and the build ids of the files its records map.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use format::{BuildIdEntry, EventAttr, Features, PerfFileWriter};

use crate::sideband::buildid;

/// Creates the recording's files, with its events.
pub(crate) struct Files {
    pub(crate) attrs: Vec<EventAttr>,
    pub(crate) compression_level: Option<i32>,
    /// The features every file has; each adds the build ids of the files it maps.
    pub(crate) features: Features,
    pub(crate) kernel_build_id: Option<Vec<u8>>,
    /// Build ids read so far (a rotated recording finishes many files mapping the same).
    pub(crate) build_ids: HashMap<String, Option<Vec<u8>>>,
}

impl Files {
    pub(crate) fn create(&self, path: &Path) -> Result<PerfFileWriter, format::Error> {
        match self.compression_level {
            Some(level) => PerfFileWriter::create_compressed(path, self.attrs.clone(), level),
            None => PerfFileWriter::create(path, self.attrs.clone()),
        }
    }

    /// Finishes `writer`, whose records map `files` (their build ids in `mapped` for those
    /// of other mount namespaces): the features, with the build ids. Returns its size.
    pub(crate) fn finish(
        &mut self,
        writer: PerfFileWriter,
        files: &BTreeSet<String>,
        mapped: &BTreeMap<String, Option<Vec<u8>>>,
    ) -> Result<u64, format::Error> {
        let mut build_ids = Vec::new();
        if let Some(id) = &self.kernel_build_id {
            build_ids.push(BuildIdEntry {
                pid: -1,
                kernel: true,
                build_id: id.clone(),
                filename: "[kernel.kallsyms]".into(),
            });
        }
        for file in files {
            let id = match mapped.get(file) {
                Some(Some(foreign_id)) => Some(foreign_id.clone()),
                _ => match self.build_ids.get(file) {
                    Some(id) => id.clone(),
                    None => {
                        let id = buildid::of_file(Path::new(file));
                        self.build_ids.insert(file.clone(), id.clone());
                        id
                    }
                },
            };
            if let Some(id) = id {
                build_ids.push(BuildIdEntry {
                    pid: -1,
                    kernel: false,
                    build_id: id,
                    filename: file.clone(),
                });
            }
        }
        let features = Features {
            build_ids,
            ..self.features.clone()
        };
        writer.finish(&features)
    }
}
