//! `analyze report` with perf's options: --stdio accepted, --percent-limit, --children, -g, on a
//! perf recording of busy (frame pointers).

use crate::common::*;

fn rows(text: &str) -> Vec<(f64, f64, String)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let pct = |s: &str| s.trim_end_matches('%').parse::<f64>().unwrap();
            (pct(w[0]), pct(w[1]), w[w.len() - 1].to_string())
        })
        .collect()
}

fn report(args: &[&str]) -> String {
    let out = analyze(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn percent_limit_and_children_as_perf_takes_them() {
    if !perf_ok() {
        return;
    }
    let dir = Tmp::new("report-options");
    let file = dir.0.join("busy.data");
    perf_record(
        &file,
        &["-g", "-F", "999"],
        &fixture("busy-fp"),
        &["1", "2"],
    );
    let f = file.to_str().unwrap();

    // --stdio --percent-limit 5: the hot function, nothing under 5%.
    let text = report(&["report", "--stdio", "--percent-limit", "5", "-i", f]);
    let limited = rows(&text);
    assert!(limited.iter().any(|r| r.2 == "spin_inner"), "{text}");
    assert!(limited.iter().all(|r| r.0 >= 5.0), "{text}");
    // A limit between the two hot functions' shares (hash_loop ~40%, spin_inner ~55%, as
    // the threads got the CPUs) keeps the one above it only.
    let all = rows(&report(&["report", "-i", f]));
    let share = |name: &str| {
        all.iter()
            .find(|r| r.2 == name)
            .unwrap_or_else(|| panic!("no {name} in {all:?}"))
            .0
    };
    let (hash, spin) = (share("hash_loop"), share("spin_inner"));
    let ((low, _), (high, high_share)) = if hash < spin {
        (("hash_loop", hash), ("spin_inner", spin))
    } else {
        (("spin_inner", spin), ("hash_loop", hash))
    };
    assert!(high_share - share(low) >= 1.0, "{all:?}");
    let limit = format!("{:.2}", (hash + spin) / 2.0);
    let half = rows(&report(&["report", "--percent-limit", &limit, "-i", f]));
    let has = |rows: &[(f64, f64, String)], name: &str| rows.iter().any(|r| r.2 == name);
    assert!(
        !has(&half, low) && has(&half, high),
        "--percent-limit {limit}: {half:?}"
    );

    // --children: sorted by Total, callers listed: the threads' root first (it has no Self),
    // worker with more passing through it than its own. (One of the two loops keeps no frame
    // of its own, so frame pointers skip worker above it: worker's Total is about the other
    // loop's share, 45-55% as the threads got the CPUs; the limit is below that.)
    let text = report(&["report", "--children", "--percent-limit", "30", "-i", f]);
    let children = rows(&text);
    assert!(
        children.windows(2).all(|w| w[0].1 >= w[1].1),
        "sorted by Total: {text}"
    );
    assert!(children[0].0 == 0.0 && children[0].1 > 90.0, "{text}");
    assert!(
        children.iter().any(|r| r.2 == "worker" && r.1 > r.0),
        "{text}"
    );
    assert!(children.iter().all(|r| r.1 >= 30.0), "{text}");

    // -g: each row's call graph under it, in perf's two orders; the main path of spin_inner's
    // graph is the one perf report -g draws for it.
    for (order, args) in [
        ("callee", &["-g"][..]),
        ("caller", &["-g", "caller"]),
        ("caller", &["-g", "graph,0.5,caller"]),
    ] {
        let mut a = vec!["report", "--percent-limit", "30", "-i", f];
        a.extend_from_slice(args);
        let ours = path_under(&report(&a), "spin_inner");
        let theirs = path_under(&perf_report_graph(f, "30", order), "spin_inner");
        assert!(ours.len() >= 2, "{args:?}: {ours:?}");
        assert_eq!(ours, theirs, "{args:?}: spin_inner's main path");
        let (first, last) = (&ours[0], ours.last().unwrap());
        match order {
            "callee" => assert_eq!(first, "spin_inner"),
            _ => assert_eq!(last, "spin_inner"),
        }
    }
}

/// `perf report --stdio --no-children --percent-limit PCT -g ORDER` of `file`.
fn perf_report_graph(file: &str, percent_limit: &str, order: &str) -> String {
    let out = std::process::Command::new("perf")
        .args([
            "report",
            "--stdio",
            "--no-children",
            "--percent-limit",
            percent_limit,
        ])
        .args(["-g", order, "-i", file])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The first path of the call graph under `symbol`'s row: each frame once, from `---` on,
/// following the first branch where paths part.
fn path_under(text: &str, symbol: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let row = lines
        .iter()
        .position(|l| !l.starts_with('#') && l.ends_with(&format!("[.] {symbol}")))
        .unwrap_or_else(|| panic!("no {symbol} row:\n{text}"));
    let mut path = Vec::new();
    for l in &lines[row + 1..] {
        let t = l.trim();
        if t.is_empty() || t.contains('%') && !t.contains("--") || t.starts_with('#') {
            break;
        }
        // "---name", "|--12.34%--name", "|          name", "name".
        let name = t
            .rsplit("--")
            .next()
            .unwrap()
            .trim_start_matches('|')
            .trim();
        if !name.is_empty() && !path.contains(&name.to_string()) {
            path.push(name.to_string());
        }
    }
    path
}

/// `report -g` against `perf report -g` on C++ (templates, lambdas) and Go recordings: the
/// same rows, graphs and branch percentages, line for line. Named differences: our rows
/// have Self and Total columns (perf's Overhead is Self), frames without a symbol are
/// named by address (`libstdc++.so.6.0.30!0xd4490`: the function the unwind tables delimit)
/// where perf prints the frame's address (both compared as `[unknown]`), and `--no-inline`
/// (perf's Symbol column is the real function; ours shows inlined ones unless told).
#[test]
fn call_graphs_equal_perfs_on_cpp_and_go() {
    if !perf_ok() {
        return;
    }
    let dir = Tmp::new("report-graphs");
    for program in ["cxxprog-g++-fp", "goprog"] {
        let file = dir.0.join(format!("{program}.data"));
        perf_record(
            &file,
            &["-g", "-F", "499"],
            &fixture(program),
            &["0.4", "2"],
        );
        let f = file.to_str().unwrap();
        for order in ["callee", "caller"] {
            let ours = report(&[
                "report",
                "--no-inline",
                "--percent-limit",
                "20",
                "-g",
                order,
                "-i",
                f,
            ]);
            let perf = perf_report_graph(f, "20", order);
            let ((ours, our_pcts), (theirs, their_pcts)) = (graph_lines(&ours), graph_lines(&perf));
            assert!(ours.len() > 3, "{program} {order}: {ours:?}");
            assert_eq!(ours, theirs, "{program} -g {order}");
            // perf weighs by period, we by sample: the first samples' periods differ a little.
            for (a, b) in our_pcts.iter().zip(&their_pcts) {
                assert!(
                    (a - b).abs() < 0.2,
                    "{program} -g {order}: {our_pcts:?} vs {their_pcts:?}"
                );
            }
        }
    }
}

/// A report's lines as both tools' can be compared: comments and blank lines dropped,
/// rows reduced to their symbol, addresses (perf's unnamed frames) and names by address
/// (ours) as `[unknown]`, branch percentages apart (in order).
fn graph_lines(text: &str) -> (Vec<String>, Vec<f64>) {
    let mut pcts = Vec::new();
    let mut lines = Vec::new();
    for l in text.lines().map(str::trim) {
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let row = l.split_once("[.] ").or_else(|| l.split_once("[k] "));
        if let (Some((_, symbol)), true) = (row, l.starts_with(|c: char| c.is_ascii_digit())) {
            lines.push(format!("row {symbol}"));
            continue;
        }
        let (head, name) = match l.rfind("--") {
            Some(i) => l.split_at(i + 2),
            None => ("", l),
        };
        let hex = name
            .strip_prefix("0x")
            .is_some_and(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()));
        let by_address = crate::folded::address_named_file(name).is_some();
        let name = if hex || by_address { "[unknown]" } else { name };
        // "|--24.37%--": the number apart.
        let branch = head
            .split_once("--")
            .and_then(|(lead, rest)| Some((lead, rest.split_once("%--")?.0)));
        match branch {
            Some((lead, pct)) => {
                pcts.push(pct.parse::<f64>().unwrap());
                lines.push(format!("{lead}--%--{name}"));
            }
            None => lines.push(format!("{head}{name}")),
        }
    }
    (lines, pcts)
}
