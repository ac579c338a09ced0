//! The files a recording writes: rotation (`--switch-output`) and the archive (`--archive`).

mod archive;
pub mod rotation;

pub use archive::archive;
