//! A progress bar on stderr while a suite runs, drawn only when stderr is a terminal. Lines the
//! suites print go through [`line`] so they never tear the bar.
use std::io::{IsTerminal, Write};
use std::sync::Mutex;

struct Bar {
    label: String,
    done: usize,
    total: usize,
    step: String,
}

static BAR: Mutex<Option<Bar>> = Mutex::new(None);

fn draw(b: &Bar) {
    let width = 30usize;
    let filled = (b.done.min(b.total) * width).checked_div(b.total).unwrap_or(0);
    eprint!(
        "\r\x1b[2K[{}{}] {}/{} {}: {}",
        "#".repeat(filled),
        " ".repeat(width - filled),
        b.done,
        b.total,
        b.label,
        b.step
    );
    let _ = std::io::stderr().flush();
}

/// Starts a bar of `total` steps (replacing any bar). A no-op unless stderr is a terminal.
pub fn start(label: &str, total: usize) {
    if !std::io::stderr().is_terminal() {
        return;
    }
    let b = Bar { label: label.to_string(), done: 0, total, step: String::new() };
    draw(&b);
    if let Ok(mut g) = BAR.lock() {
        *g = Some(b);
    }
}

/// Names the step now running.
pub fn step(what: &str) {
    if let Ok(mut g) = BAR.lock() {
        if let Some(b) = g.as_mut() {
            b.step = what.to_string();
            draw(b);
        }
    }
}

/// Marks `n` steps done.
pub fn advance(n: usize) {
    if let Ok(mut g) = BAR.lock() {
        if let Some(b) = g.as_mut() {
            b.done += n;
            draw(b);
        }
    }
}

/// Prints a line on stderr above the bar.
pub fn line(text: &str) {
    let g = BAR.lock();
    match g.as_ref().ok().and_then(|g| g.as_ref()) {
        Some(b) => {
            eprint!("\r\x1b[2K");
            eprintln!("{text}");
            draw(b);
        }
        None => eprintln!("{text}"),
    }
}

/// Removes the bar.
pub fn finish() {
    if let Ok(mut g) = BAR.lock() {
        if g.take().is_some() {
            eprint!("\r\x1b[2K");
        }
    }
}
