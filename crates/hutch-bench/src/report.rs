//! Writing results: JSON files and a plain table on stderr.
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::stats::Summary;

/// Writes `<dir>/<suite>-<unix time>.json` and `<dir>/<suite>-latest.json`.
pub fn write_json(dir: &Path, suite: &str, doc: &Value) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let ts = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let path = dir.join(format!("{suite}-{ts}.json"));
    let text = serde_json::to_string_pretty(doc)?;
    std::fs::write(&path, &text)?;
    std::fs::write(dir.join(format!("{suite}-latest.json")), &text)?;
    Ok(path)
}

pub fn table_header() {
    eprintln!(
        "{:<44} {:>6} {:>10} {:>10} {:>10}",
        "scenario", "n", "median ms", "p90 ms", "min ms"
    );
}

pub fn table_row(name: &str, s: &Summary) {
    eprintln!("{:<44} {:>6} {:>10.3} {:>10.3} {:>10.3}", name, s.n, s.median, s.p90, s.min);
}

/// One line per promise: what it is, the measured value, and whether it was met.
pub fn print_targets<'a>(targets: impl IntoIterator<Item = &'a Value>) {
    for t in targets {
        let verdict = match t["met"].as_bool() {
            Some(true) => "met",
            Some(false) => "NOT met",
            None => "not measured",
        };
        eprintln!("target: {} -> {} ({verdict})", t["promise"].as_str().unwrap_or(""), t["value"]);
    }
}
