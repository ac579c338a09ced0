//! Rust and C++ names as perf shows them.

/// How deep the C++ demangler may recurse: hostile or corrupt names must not overflow the stack.
const CPP_DEMANGLE_RECURSION_LIMIT: u32 = 128;

/// Demangles Rust and C++ names; others (and names the demanglers reject) stay as they are.
pub fn demangle(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        return format!("{d:#}");
    }
    if name.starts_with("_Z") {
        let parse =
            cpp_demangle::ParseOptions::default().recursion_limit(CPP_DEMANGLE_RECURSION_LIMIT);
        if let Ok(sym) = cpp_demangle::Symbol::new_with_options(name, &parse) {
            // As perf prints C++ names: no parameters, no return type.
            let opts = cpp_demangle::DemangleOptions::default()
                .no_params()
                .no_return_type()
                .recursion_limit(CPP_DEMANGLE_RECURSION_LIMIT);
            if let Ok(d) = sym.demangle_with_options(&opts) {
                return d;
            }
        }
    }
    name.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demangles_rust_and_cpp_and_survives_deep_nesting() {
        assert_eq!(
            demangle("_ZN4core3ptr13drop_in_place17h0123456789abcdefE"),
            "core::ptr::drop_in_place"
        );
        assert_eq!(demangle("_ZN3foo3barEv"), "foo::bar");
        assert_eq!(demangle("main"), "main");
        // A pathologically nested C++ name: returned as it is, no stack overflow.
        let deep = format!("_Z1f{}i{}", "PFv".repeat(5000), "E".repeat(5000));
        assert!(!demangle(&deep).is_empty());
    }
}
