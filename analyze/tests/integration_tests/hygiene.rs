//! The test suite runs on a clone with nothing beside it: files outside the repository
//! (`../shared/fixtures/elsewhere`, perf.data files from other machines) are reached through
//! one helper, `common::elsewhere`, which skips with a line outside CI and fails under CI.

use std::path::Path;

use crate::common::root;

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn only_one_helper_names_files_outside_the_repository() {
    let mut files = Vec::new();
    for krate in ["analyze", "record", "format", "bpf"] {
        rust_files(&root().join(krate).join("tests"), &mut files);
    }
    assert!(files.len() > 20, "{} test files", files.len());
    let helper = root().join("analyze/tests/integration_tests/common.rs");
    let mut found = Vec::new();
    for f in files {
        if f == helper || f.ends_with("hygiene.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        for (i, line) in text.lines().enumerate() {
            if line.contains("shared/fixtures") || line.contains("\"../shared") {
                found.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "use common::elsewhere() (skips outside CI):\n{}",
        found.join("\n")
    );
}
