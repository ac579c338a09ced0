//! "Did you mean": the names closest to one that was not found.
//!
//! Names of functions and events are words joined by `_` (`do_sys_openat2`,
//! `sys_enter_openat2`), so closeness counts the words two names share (a word that starts
//! the other counts half: `openat` and `openat2`) as much as their edit distance (strsim).

/// Up to `n` of `candidates` closest to `query`, best first. Each candidate is a key compared
/// with the query and the text shown for it (a tracepoint compared by its name and shown as
/// `system:name`).
pub fn closest<'a>(
    query: &str,
    candidates: impl IntoIterator<Item = (&'a str, &'a str)>,
    n: usize,
) -> Vec<&'a str> {
    let q = words(query);
    let mut scored: Vec<(f64, &str)> = candidates
        .into_iter()
        .map(|(key, shown)| (score(query, &q, key), shown))
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    let mut seen = std::collections::HashSet::new();
    scored
        .into_iter()
        .filter(|(_, s)| seen.insert(*s))
        .take(n)
        .map(|(_, s)| s)
        .collect()
}

/// [`closest`] joined for a message: `a, b, c`.
pub fn list<'a>(query: &str, candidates: impl IntoIterator<Item = &'a str>, n: usize) -> String {
    closest(query, candidates.into_iter().map(|c| (c, c)), n).join(", ")
}

fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect()
}

fn score(query: &str, q: &[String], key: &str) -> f64 {
    let k = words(key);
    let shared: f64 = q
        .iter()
        .map(|w| {
            if k.contains(w) {
                1.0
            } else if k
                .iter()
                .any(|x| x.len() > 2 && w.len() > 2 && (x.starts_with(w) || w.starts_with(x)))
            {
                0.5
            } else {
                0.0
            }
        })
        .sum();
    let words = shared / q.len().max(k.len()).max(1) as f64;
    words + strsim::normalized_levenshtein(&query.to_ascii_lowercase(), &key.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_words_and_spelling() {
        let names = [
            "sys_enter_openat",
            "sys_exit_openat",
            "sys_enter_openat2",
            "sys_exit_openat2",
            "sys_enter_open",
            "sys_enter_read",
            "tcp_retransmit_skb",
            "tcp_probe",
        ];
        let c = |q| list(q, names, 3);
        let near = c("do_sys_openat2");
        assert!(near.starts_with("sys_e"), "{near}");
        assert!(near.contains("sys_enter_openat2") && near.contains("sys_exit_openat2"));
        assert_eq!(
            closest("tcp_retransmit_skb", names.iter().map(|n| (*n, *n)), 1),
            ["tcp_retransmit_skb"]
        );
        assert!(c("sys_enter_opnat").starts_with("sys_enter_openat"));
        assert!(list("x", [], 5).is_empty());
        // Keys compared, texts shown, each once.
        let shown = closest(
            "read",
            [("read", "syscalls:read"), ("read", "syscalls:read")],
            5,
        );
        assert_eq!(shown, ["syscalls:read"]);
    }
}
