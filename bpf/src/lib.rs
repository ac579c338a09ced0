//! BPF programs and their loader (in progress).
