//! The terminal view: ratatui draws the table of the latest reading; keys switch the view and
//! the process shown without waiting for the next reading.

use std::time::Duration;

use analyze::views::top::{self, Process, View};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Cell, Paragraph, Row, Table};
use ratatui::Frame;

use super::source::{heading, Snapshot, Source};

/// `p` cycles through this many of the heaviest processes.
const PROCESSES: usize = 10;

const KEYS: &str =
    "s: by self  t: by total  k: stacks  tab: next view  p: next process  a: all processes  q: quit";

struct State {
    view: View,
    /// The process shown (all without one).
    pid: Option<i32>,
    snapshot: Option<Snapshot>,
    /// Why the last reading failed (the file is not there yet, say).
    error: Option<String>,
}

impl State {
    fn processes(&self) -> Vec<Process> {
        self.snapshot
            .as_ref()
            .map(|s| top::processes(&s.profile))
            .unwrap_or_default()
    }

    /// `p`: the next of the heaviest processes, after the one shown.
    fn next_process(&mut self) {
        let procs = self.processes();
        let procs = &procs[..procs.len().min(PROCESSES)];
        let at = self
            .pid
            .and_then(|pid| procs.iter().position(|p| p.pid == pid));
        self.pid = match at {
            Some(i) => procs.get((i + 1) % procs.len()),
            None => procs.first(),
        }
        .map(|p| p.pid);
    }
}

pub fn run(source: Source, interval: Duration, view: View) -> anyhow::Result<()> {
    let readings = source.spawn(interval);
    let mut state = State {
        view,
        pid: None,
        snapshot: None,
        error: None,
    };
    let mut terminal = ratatui::try_init()?;
    let result = (|| -> anyhow::Result<()> {
        loop {
            while let Ok(r) = readings.try_recv() {
                match r {
                    Ok(s) => (state.snapshot, state.error) = (Some(s), None),
                    Err(e) => state.error = Some(e),
                }
            }
            terminal.draw(|f| draw(f, &state))?;
            if !event::poll(Duration::from_millis(100))? {
                continue;
            }
            let Event::Key(key) = event::read()? else {
                continue;
            };
            if key.kind != KeyEventKind::Press {
                continue;
            }
            match key.code {
                KeyCode::Char('q') | KeyCode::Esc => return Ok(()),
                KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => {
                    return Ok(())
                }
                KeyCode::Char('s') => state.view = View::BySelf,
                KeyCode::Char('t') => state.view = View::ByTotal,
                KeyCode::Char('k') => state.view = View::Stacks,
                KeyCode::Tab => {
                    state.view = match state.view {
                        View::BySelf => View::ByTotal,
                        View::ByTotal => View::Stacks,
                        View::Stacks => View::BySelf,
                    }
                }
                KeyCode::Char('p') => state.next_process(),
                KeyCode::Char('a') => state.pid = None,
                _ => {}
            }
        }
    })();
    ratatui::try_restore()?;
    result
}

fn draw(f: &mut Frame, state: &State) {
    let [head, status, body, keys] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Fill(1),
        Constraint::Length(1),
    ])
    .areas(f.area());
    f.render_widget(
        Paragraph::new(KEYS).style(Style::new().add_modifier(Modifier::REVERSED)),
        keys,
    );
    let Some(snap) = &state.snapshot else {
        let why = state.error.as_deref().unwrap_or("reading");
        f.render_widget(Paragraph::new(format!("analyze top: {why}")), head);
        return;
    };
    let procs = top::processes(&snap.profile);
    let process = state.pid.map(|pid| {
        procs
            .iter()
            .find(|p| p.pid == pid)
            .cloned()
            .unwrap_or(Process {
                pid,
                comm: "no samples".into(),
                weight: 0,
                count: 0,
            })
    });
    let filtered = state.pid.map(|pid| top::of_process(&snap.profile, pid));
    let shown = filtered.as_ref().unwrap_or(&snap.profile);
    f.render_widget(
        Paragraph::new(heading(snap, shown, process.as_ref()))
            .style(Style::new().add_modifier(Modifier::BOLD)),
        head,
    );
    let mut line = state.view.title().to_string();
    if let Some(e) = &state.error {
        line.push_str(&format!("; last reading failed: {e}"));
    } else if let Some(n) = snap.notes.first() {
        line.push_str(&format!("; {n}"));
    }
    f.render_widget(Line::from(line), status);

    let table = top::table(shown, state.view, body.height as usize);
    let widths = table.widths();
    let last = widths.len() - 1;
    let constraints: Vec<Constraint> = widths
        .iter()
        .enumerate()
        .map(|(c, &w)| {
            if c == last {
                Constraint::Fill(1)
            } else {
                Constraint::Length(w as u16)
            }
        })
        .collect();
    let numeric = table.numeric;
    let row = |cells: Vec<String>| {
        let cells: Vec<Cell> = cells
            .into_iter()
            .enumerate()
            .map(|(c, text)| {
                let w = widths[c];
                if c < numeric {
                    Cell::from(format!("{text:>w$}"))
                } else {
                    Cell::from(text)
                }
            })
            .collect();
        Row::new(cells)
    };
    let header = row(table.columns.iter().map(|c| c.to_string()).collect())
        .style(Style::new().add_modifier(Modifier::UNDERLINED));
    let rows: Vec<Row> = table.rows.into_iter().map(row).collect();
    f.render_widget(
        Table::new(rows, constraints)
            .header(header)
            .column_spacing(2),
        body,
    );
}
