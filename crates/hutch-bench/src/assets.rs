//! Scripts the benchmark runs on other interpreters, compiled into the binary so `hutch bench`
//! works from any install location; written to a scratch file when needed.
use std::path::PathBuf;

use anyhow::{Context, Result};

const SECURE_EXEC_HARNESS: &str = include_str!("../../../scripts/bench/secure-exec-peer.mjs");
const PLOTS: &str = include_str!("../../../scripts/bench/plots.py");

fn write(name: &str, text: &str) -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("hutch-bench-assets-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let p = dir.join(name);
    std::fs::write(&p, text).with_context(|| format!("write {}", p.display()))?;
    Ok(p)
}

pub fn secure_exec_harness() -> Result<PathBuf> {
    write("secure-exec-peer.mjs", SECURE_EXEC_HARNESS)
}

pub fn plots_script() -> Result<PathBuf> {
    write("plots.py", PLOTS)
}

/// Removes the scratch files.
pub fn cleanup() {
    let _ = std::fs::remove_dir_all(
        std::env::temp_dir().join(format!("hutch-bench-assets-{}", std::process::id())),
    );
}
