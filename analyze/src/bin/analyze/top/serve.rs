//! `analyze top --serve ADDR`: a page whose flame graph follows the recording. Each reading
//! becomes the SVG `analyze flamegraph` writes (inferno, from the same profile); the page
//! asks for `/flamegraph.svg` every interval and puts it in place. Only ADDR is bound, and
//! only those two paths are served.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use analyze::views;

use super::source::{Snapshot, Source};

pub fn serve(addr: &str, source: Source, interval: Duration) -> anyhow::Result<()> {
    let server = tiny_http::Server::http(addr).map_err(|e| anyhow::anyhow!("{addr}: {e}"))?;
    let bound = server
        .server_addr()
        .to_ip()
        .map_or_else(|| addr.to_string(), |a| a.to_string());
    eprintln!("analyze top: serving http://{bound}/");
    let latest = Arc::new(Mutex::new(message_svg("reading the recording")));
    let readings = source.spawn(interval);
    let shared = latest.clone();
    std::thread::spawn(move || {
        for r in readings {
            let svg = match r {
                Ok(snap) => flamegraph(&snap),
                Err(e) => message_svg(&e),
            };
            *shared.lock().unwrap() = svg;
        }
    });
    let page = PAGE.replace("INTERVAL_MS", &interval.as_millis().to_string());
    let header =
        |value: &str| tiny_http::Header::from_bytes("Content-Type", value).expect("a valid header");
    for request in server.incoming_requests() {
        let path = request.url().split(['?', '#']).next().unwrap_or("");
        let get = *request.method() == tiny_http::Method::Get;
        let response = match path {
            "/" | "/index.html" if get => tiny_http::Response::from_string(page.clone())
                .with_header(header("text/html; charset=utf-8")),
            "/flamegraph.svg" if get => {
                tiny_http::Response::from_data(latest.lock().unwrap().clone())
                    .with_header(header("image/svg+xml"))
                    .with_header(
                        tiny_http::Header::from_bytes("Cache-Control", "no-store")
                            .expect("a valid header"),
                    )
            }
            _ => tiny_http::Response::from_string("not found").with_status_code(404),
        };
        // A client that went away is no reason to stop.
        let _ = request.respond(response);
    }
    Ok(())
}

/// The flame graph of a reading, titled as `analyze flamegraph` titles it, plus the window.
fn flamegraph(snap: &Snapshot) -> Vec<u8> {
    let p = &snap.profile;
    if p.stacks.is_empty() {
        return message_svg(&format!("{}: no samples yet", snap.path.display()));
    }
    let mut title = format!("{}: {} ({})", snap.path.display(), p.event, p.unit);
    if let Some(ns) = snap.window {
        title.push_str(&format!(", last {:.1} s", ns as f64 / 1e9));
    }
    let mut svg = Vec::new();
    match views::flamegraph::write_svg(p, &title, &mut svg) {
        Ok(()) => svg,
        Err(e) => message_svg(&format!("no flame graph: {e}")),
    }
}

/// A small SVG that says `text` (no samples yet, the file is not there yet).
fn message_svg(text: &str) -> Vec<u8> {
    let text = text
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"1200\" height=\"60\">\
         <text x=\"10\" y=\"30\" font-family=\"Verdana\" font-size=\"14\">{text}</text></svg>"
    )
    .into_bytes()
}

/// The page: the latest SVG, asked for every interval and replaced when it changed.
const PAGE: &str = r#"<!DOCTYPE html>
<html>
<head>
<meta charset="utf-8">
<title>analyze top</title>
<style>
body { margin: 0; font-family: sans-serif; }
#state { font-size: 12px; color: #a00; padding: 2px 6px; min-height: 14px; }
#graph svg { display: block; }
</style>
</head>
<body>
<div id="state"></div>
<div id="graph"></div>
<script>
const graph = document.getElementById("graph");
const state = document.getElementById("state");
let shown = "";
async function update() {
  try {
    const r = await fetch("/flamegraph.svg", { cache: "no-store" });
    const svg = await r.text();
    if (svg !== shown) {
      graph.innerHTML = svg;
      shown = svg;
    }
    state.textContent = "";
  } catch (e) {
    state.textContent = "analyze top does not answer: " + e;
  }
}
update();
setInterval(update, INTERVAL_MS);
</script>
</body>
</html>
"#;
