//! A filter's error: where in the text, and what.

/// Where a filter is wrong (column: 1-based, in characters) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub column: usize,
    pub message: String,
}
