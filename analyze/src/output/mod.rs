//! Stage 5, output: one module per way of showing a profile.

pub mod annotate;
pub mod diff;
pub mod export;
pub mod flamegraph;
pub mod folded;
pub mod heatmap;
pub mod report;
pub mod script;
