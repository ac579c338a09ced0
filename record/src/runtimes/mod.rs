//! Language runtimes whose frames the kernel's stacks do not name: CPython's interpreter
//! frames (read in the kernel, named here) and the JVMs' JIT code (their perf maps).

pub mod jvm;
pub mod python;
