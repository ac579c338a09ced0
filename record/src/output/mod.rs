//! The files a recording writes: each created and finished (features, build ids), rotation (`--switch-output`) and the archive (`--archive`).

mod archive;
pub(crate) mod files;
pub mod rotation;

pub use archive::archive;
