//! The analysis pipeline.
