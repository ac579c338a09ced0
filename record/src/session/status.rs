//! The status line of a recording on a terminal: elapsed time, samples, other events, lost
//! events, file size, redrawn each second from the first second on, gone when recording ends.
//!
//! The workload writes to the same terminal, so the line keeps to the terminal's last row,
//! below a scrolling region that holds everything else (as apt draws its progress): the
//! workload's output scrolls above it and never mixes with it. At the end the region is
//! given back and the row cleared.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// What the line shows.
pub struct Counts {
    pub samples: u64,
    pub other_events: u64,
    pub lost: u64,
    pub bytes: u64,
}

pub struct StatusLine {
    /// The terminal's rows, if the line is wanted and stderr is a terminal.
    rows: Option<u16>,
    /// Whether the scrolling region is set (the line drawn at least once).
    drawn: bool,
    started: Instant,
    shown: Instant,
}

/// How often the line is redrawn (and how long a recording runs before it appears).
const EVERY: Duration = Duration::from_secs(1);

/// The rows of the terminal on stderr.
fn terminal_rows() -> Option<u16> {
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ fills the winsize it is given.
    let ok = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    (ok && size.ws_row >= 3).then_some(size.ws_row)
}

impl StatusLine {
    /// A line on stderr if it is a terminal and `wanted`, else nothing.
    pub fn new(wanted: bool) -> StatusLine {
        let rows = (wanted && std::io::stderr().is_terminal())
            .then(terminal_rows)
            .flatten();
        let now = Instant::now();
        StatusLine {
            rows,
            drawn: false,
            started: now,
            shown: now,
        }
    }

    /// Redraws the line if a second has passed; `counts` is asked only then.
    pub fn update(&mut self, counts: impl FnOnce() -> Counts) {
        let Some(rows) = self.rows else {
            return;
        };
        if self.shown.elapsed() < EVERY {
            return;
        }
        self.shown = Instant::now();
        let c = counts();
        let text = format!(
            "[ recording: {:.0} s, {} samples, {} other events, {} lost, {:.1} MB ]",
            self.started.elapsed().as_secs_f64(),
            c.samples,
            c.other_events,
            c.lost,
            c.bytes as f64 / 1e6
        );
        let mut out = String::new();
        if !self.drawn {
            // A new line keeps the cursor's row clear of the last one; then the region
            // (save cursor, set it, restore: setting it moves the cursor), and back up.
            out.push_str(&format!("\n\x1b7\x1b[1;{}r\x1b8\x1b[1A", rows - 1));
            self.drawn = true;
        }
        out.push_str(&format!("\x1b7\x1b[{rows};1H\x1b[2K{text}\x1b8"));
        let _ = std::io::stderr().lock().write_all(out.as_bytes());
    }

    /// Takes the line away and gives the terminal its whole height back.
    pub fn clear(&mut self) {
        if let (Some(rows), true) = (self.rows, self.drawn) {
            let out = format!("\x1b7\x1b[r\x1b[{rows};1H\x1b[2K\x1b8");
            let _ = std::io::stderr().lock().write_all(out.as_bytes());
            self.drawn = false;
        }
    }
}

impl Drop for StatusLine {
    /// An error that ends the recording early takes the line away too.
    fn drop(&mut self) {
        self.clear();
    }
}
