//! Integration tests of the BPF programs on the running kernel: they load the programs, follow
//! real processes and check what the ring buffer brings back. They need root and BTF; without
//! them they skip with a message, or fail when `CI` is set.

mod common;
mod lifecycle;
mod sampling;
mod trace;
