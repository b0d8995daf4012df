//! Writing results: JSON (with the machine snapshot), one CSV per table, a Markdown section per
//! suite, and the plain table on stderr while the suite runs.
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::stats::Summary;

/// A result table: printed on stderr row by row, then written as CSV and Markdown.
#[derive(Debug, Clone, Default)]
pub struct Table {
    pub title: String,
    pub columns: Vec<String>,
    pub rows: Vec<Vec<String>>,
    /// Sentences printed under the table in the report.
    pub notes: Vec<String>,
    /// Whether the title and header went to stderr yet (with the first row).
    shown: bool,
}

pub const LATENCY_COLUMNS: [&str; 7] =
    ["scenario", "n", "p50 ms", "mean ms", "p95 ms", "p99 ms", "min ms"];

/// Milliseconds with a precision that suits their size.
pub fn ms(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

impl Table {
    pub fn new(title: &str, columns: &[&str]) -> Self {
        Self {
            title: title.into(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            ..Default::default()
        }
    }

    fn show_header(&mut self) {
        if !self.shown {
            self.shown = true;
            crate::progress::line(&format!("\n== {}\n{}", self.title, self.columns.join(" | ")));
        }
    }

    /// A latency table: one row per scenario with its summary.
    pub fn latency(title: &str) -> Self {
        Self::new(title, &LATENCY_COLUMNS)
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.show_header();
        crate::progress::line(&cells.join(" | "));
        self.rows.push(cells);
    }

    pub fn summary(&mut self, name: &str, s: &Summary) {
        self.row(vec![
            name.into(),
            s.n.to_string(),
            ms(s.median),
            ms(s.mean),
            ms(s.p95),
            ms(s.p99),
            ms(s.min),
        ]);
    }

    pub fn note(&mut self, text: impl Into<String>) {
        let text = text.into();
        self.show_header();
        crate::progress::line(&format!("  note: {text}"));
        self.notes.push(text);
    }

    pub fn markdown(&self) -> String {
        let mut s = format!("#### {}\n\n| {} |\n|", self.title, self.columns.join(" | "));
        for _ in &self.columns {
            s.push_str("---|");
        }
        s.push('\n');
        for r in &self.rows {
            let _ = writeln!(
                s,
                "| {} |",
                r.iter().map(|c| c.replace('|', "/")).collect::<Vec<_>>().join(" | ")
            );
        }
        for n in &self.notes {
            let _ = write!(s, "\n{n}\n");
        }
        s
    }

    pub fn csv(&self) -> String {
        let mut s = String::new();
        for r in std::iter::once(&self.columns).chain(&self.rows) {
            let cells: Vec<String> = r.iter().map(|c| csv_cell(c)).collect();
            s.push_str(&cells.join(","));
            s.push('\n');
        }
        s
    }

    pub fn slug(&self) -> String {
        let mut out = String::new();
        for c in self.title.chars() {
            if c.is_ascii_alphanumeric() {
                out.push(c.to_ascii_lowercase());
            } else if !out.ends_with('-') {
                out.push('-');
            }
        }
        out.trim_matches('-').to_string()
    }
}

fn csv_cell(c: &str) -> String {
    if c.contains([',', '"', '\n']) {
        format!("\"{}\"", c.replace('"', "\"\""))
    } else {
        c.to_string()
    }
}

/// What one suite produced.
#[derive(Debug)]
pub struct SuiteReport {
    pub suite: &'static str,
    /// The whole result document (the machine snapshot is added when written).
    pub doc: Value,
    pub tables: Vec<Table>,
    /// Plain findings for the report: ratios, who beat whom, which peers were skipped and why.
    pub findings: Vec<String>,
    /// Peers (or scenarios) not measured, or measured only in part, with the reason.
    pub skipped: std::collections::BTreeMap<String, String>,
    /// Markdown a suite wrote itself (`<suite>-latest.md`), put in the report as it is.
    pub own_markdown: Option<String>,
}

impl SuiteReport {
    pub fn new(suite: &'static str, doc: Value) -> Self {
        Self {
            suite,
            doc,
            tables: Vec::new(),
            findings: Vec::new(),
            skipped: Default::default(),
            own_markdown: None,
        }
    }

    /// Records that `name` was not measured (`during_run`: it failed part-way) and why.
    pub fn skip(&mut self, name: &str, why: &str, during_run: bool) {
        self.finding(if during_run {
            format!("{name} failed during the run, its rows are incomplete: {why}")
        } else {
            format!("{name} not measured: {why}")
        });
        self.skipped.insert(name.to_string(), why.to_string());
    }

    pub fn finding(&mut self, text: impl Into<String>) {
        let text = text.into();
        crate::progress::line(&format!("finding: {text}"));
        self.findings.push(text);
    }

    pub fn markdown(&self) -> String {
        let mut s = format!("### `{}`\n\n", self.suite);
        for f in &self.findings {
            let _ = writeln!(s, "- {f}");
        }
        if !self.findings.is_empty() {
            s.push('\n');
        }
        if let Some(own) = &self.own_markdown {
            // its headings one level down, under the suite's
            for line in own.lines() {
                if line.starts_with('#') {
                    s.push_str("###");
                }
                s.push_str(line);
                s.push('\n');
            }
            s.push('\n');
        }
        for t in &self.tables {
            s.push_str(&t.markdown());
            s.push('\n');
        }
        s
    }

    /// Writes `<suite>-<unix time>.json`, `<suite>-latest.json`, `<suite>-<table>.csv` per table
    /// and `<suite>.md` into `dir`; returns the JSON path.
    pub fn write(&mut self, dir: &Path) -> anyhow::Result<PathBuf> {
        if let Some(obj) = self.doc.as_object_mut() {
            obj.insert("suite".into(), Value::from(self.suite));
            obj.entry("machine").or_insert_with(crate::snapshot::machine);
            obj.insert("findings".into(), serde_json::json!(self.findings));
            obj.insert("skipped".into(), serde_json::json!(self.skipped));
        }
        let path = write_json(dir, self.suite, &self.doc)?;
        for t in &self.tables {
            std::fs::write(dir.join(format!("{}-{}.csv", self.suite, t.slug())), t.csv())?;
        }
        std::fs::write(dir.join(format!("{}.md", self.suite)), self.markdown())?;
        crate::progress::line(&format!("results: {}", path.display()));
        Ok(path)
    }
}

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

/// The promise that hutch is faster than Docker on every path measured: `ratios` are Docker's
/// median over hutch's, one per path; met when every one is above 1 (`value` is the smallest).
pub fn faster_than_docker(what: &str, ratios: &[f64]) -> Value {
    let min = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    if ratios.is_empty() {
        return serde_json::json!({"promise": format!("hutch faster than Docker on every {what}"), "value": null, "met": null});
    }
    serde_json::json!({
        "promise": format!("hutch faster than Docker on every {what} (smallest Docker/hutch ratio of {} paths)", ratios.len()),
        "value": min, "limit": 1.0, "met": min > 1.0,
    })
}

/// The plain stderr table of the suites that write their own results (`wasm`, `gateway`; see
/// [`crate::legacy`]). Unused on this branch until those suites are merged in.
#[allow(dead_code)]
pub fn table_header() {
    crate::progress::line(&format!(
        "{:<44} {:>6} {:>10} {:>10} {:>10}",
        "scenario", "n", "median ms", "p90 ms", "min ms"
    ));
}

#[allow(dead_code)]
pub fn table_row(name: &str, s: &Summary) {
    crate::progress::line(&format!(
        "{:<44} {:>6} {:>10.3} {:>10.3} {:>10.3}",
        name, s.n, s.median, s.p90, s.min
    ));
}

/// One line per promise on stderr, for the suites that write their own results.
#[allow(dead_code)]
pub fn print_targets<'a>(targets: impl IntoIterator<Item = &'a Value>) {
    for t in targets {
        let verdict = match t["met"].as_bool() {
            Some(true) => "met",
            Some(false) => "NOT met",
            None => "not measured",
        };
        crate::progress::line(&format!(
            "target: {} -> {} ({verdict})",
            t["promise"].as_str().unwrap_or(""),
            t["value"]
        ));
    }
}

/// One line per promise: what it is, the measured value, and whether it was met.
pub fn targets_table<'a>(targets: impl IntoIterator<Item = &'a Value>) -> Table {
    let mut t = Table::new("promises checked by this suite", &["promise", "value", "verdict"]);
    for p in targets {
        let verdict = match p["met"].as_bool() {
            Some(true) => "met",
            Some(false) => "NOT met",
            None => "not measured",
        };
        let value = match &p["value"] {
            Value::Number(n) => n.as_f64().map(ms).unwrap_or_default(),
            Value::Null => "-".into(),
            Value::String(v) => v.clone(),
            v => v.to_string(),
        };
        t.row(vec![p["promise"].as_str().unwrap_or("").into(), value, verdict.into()]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::summarize;

    #[test]
    fn a_table_renders_as_csv_and_markdown() {
        let mut t = Table::latency("Cold start: echo, batch 10");
        t.summary("docker, a \"quoted\", name", &summarize(&[1.0, 2.0, 3.0]));
        t.note("hutch was faster");
        assert_eq!(t.slug(), "cold-start-echo-batch-10");
        let csv = t.csv();
        let mut lines = csv.lines();
        assert_eq!(lines.next(), Some("scenario,n,p50 ms,mean ms,p95 ms,p99 ms,min ms"));
        assert_eq!(
            lines.next(),
            Some("\"docker, a \"\"quoted\"\", name\",3,2.00,2.00,3.00,3.00,1.00")
        );
        let md = t.markdown();
        assert!(md.starts_with("#### Cold start: echo, batch 10\n\n| scenario | n |"), "{md}");
        assert!(md.contains("|---|---|---|---|---|---|---|\n"), "{md}");
        assert!(md.ends_with("\nhutch was faster\n"), "{md}");
    }

    #[test]
    fn a_suite_writes_json_csv_and_markdown() {
        let dir = std::env::temp_dir().join(format!("hutch-bench-report-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut r = SuiteReport::new("demo", serde_json::json!({"machine": {"cores": 2}, "x": 1}));
        let mut t = Table::new("two cols", &["a", "b"]);
        t.row(vec!["1".into(), "2".into()]);
        r.tables.push(t);
        r.findings.push("hutch 3.0x faster than docker".into());
        r.write(&dir).unwrap();
        let doc: Value =
            serde_json::from_slice(&std::fs::read(dir.join("demo-latest.json")).unwrap()).unwrap();
        assert_eq!((doc["suite"].as_str(), doc["x"].as_i64()), (Some("demo"), Some(1)));
        assert_eq!(doc["findings"][0], "hutch 3.0x faster than docker");
        assert_eq!(std::fs::read_to_string(dir.join("demo-two-cols.csv")).unwrap(), "a,b\n1,2\n");
        let md = std::fs::read_to_string(dir.join("demo.md")).unwrap();
        assert!(md.starts_with("### `demo`\n\n- hutch 3.0x faster than docker\n"), "{md}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn faster_than_docker_needs_every_path() {
        let t = faster_than_docker("path", &[8.0, 1.5, 12.0]);
        assert_eq!((t["value"].as_f64(), t["met"].as_bool()), (Some(1.5), Some(true)));
        let t = faster_than_docker("path", &[8.0, 0.9]);
        assert_eq!(t["met"], false);
        assert!(faster_than_docker("path", &[])["met"].is_null());
    }

    #[test]
    fn milliseconds_keep_three_significant_digits() {
        assert_eq!(
            (ms(1234.4), ms(12.34), ms(1.234), ms(0.1234)),
            ("1234".into(), "12.3".into(), "1.23".into(), "0.123".into())
        );
        assert_eq!(ms(f64::NAN), "-");
    }
}
