//! `hutch bench stress`: agentkernel's stress test and the 100-way burst. N cold one-shot
//! sandboxes (`echo hello`) started at once: success rate, per-sandbox p50/p95/p99, wall time and
//! throughput; then a burst of 100 at once, every one of which must succeed, against Docker's
//! burst in the same run.
use anyhow::{Context, Result};
use clap::Args;
use hutch_backend_container::{ContainerBackend, RuntimeKind};
use serde_json::{json, Value};

use crate::peers::Engine;
use crate::report::{ms, SuiteReport, Table};
use crate::stats::summarize;
use crate::subject::{batch, hutch_bin, hutch_run_once};
use crate::Ctx;

pub const ENGINES: [&str; 5] = ["hutch", "hutch-lib", "crun-floor", "docker", "podman"];
const ARGV: [&str; 2] = ["echo", "hello"];

#[derive(Debug, Args)]
pub struct StressArgs {
    /// Sandboxes started at once in the stress test
    #[arg(long, default_value_t = 50)]
    pub parallel: usize,
    /// Sandboxes started at once in the burst
    #[arg(long, default_value_t = 100)]
    pub burst: usize,
    /// Engines: hutch (`hutch run` processes), hutch-lib (one process, the library), crun-floor
    /// (`crun run` of hutch's bundle, the least a container can cost), docker, podman
    #[arg(long, default_value = "hutch,hutch-lib,crun-floor,docker,podman")]
    pub engines: String,
}

enum Eng {
    Cli(std::path::PathBuf),
    Lib(ContainerBackend),
    /// One bundle per sandbox in flight (a bundle's container id is fixed)
    Floor(Vec<crate::peers::Floor>),
    Peer(Box<Engine>),
}

impl Eng {
    async fn one(&self, i: usize) -> Result<f64> {
        let t = std::time::Instant::now();
        match self {
            Eng::Cli(h) => {
                let (_, _, out) = hutch_run_once(h, "container", "crun", &ARGV).await?;
                anyhow::ensure!(out == "hello\n", "printed {out:?}");
            }
            Eng::Lib(b) => {
                crate::subject::library_cold_warm(b, &ARGV, b"hello\n").await?;
            }
            Eng::Floor(f) => {
                let (_, out) = f.get(i).context("no bundle for this sandbox")?.run_once().await?;
                anyhow::ensure!(out == b"hello\n", "printed {:?}", String::from_utf8_lossy(&out));
            }
            Eng::Peer(e) => {
                let (_, out) = e.oneshot(&ARGV).await?;
                anyhow::ensure!(out == b"hello\n", "printed {:?}", String::from_utf8_lossy(&out));
            }
        }
        Ok(t.elapsed().as_secs_f64() * 1e3)
    }
}

/// N at once: the row's cells and its JSON.
async fn wave(eng: &Eng, n: usize) -> (Vec<String>, Value) {
    let (res, wall) = batch(n, n, |i| eng.one(i)).await;
    let ok: Vec<f64> = res.iter().filter_map(|r| r.as_ref().ok().copied()).collect();
    let errors: Vec<String> =
        res.iter().filter_map(|r| r.as_ref().err().map(|e| format!("{e:#}"))).collect();
    let s = summarize(&ok);
    let rate = ok.len() as f64 / n as f64;
    let tput = ok.len() as f64 / (wall / 1e3);
    let cells = vec![
        format!("{}/{n}", ok.len()),
        format!("{:.0}%", rate * 100.0),
        ms(s.median),
        ms(s.p95),
        ms(s.p99),
        ms(wall),
        format!("{tput:.1}"),
    ];
    let mut first_errors = errors.clone();
    first_errors.truncate(3);
    (
        cells,
        json!({"n": n, "ok": ok.len(), "success_rate": rate, "latency": s, "wall_ms": wall, "throughput_per_s": tput, "errors": first_errors, "error_count": errors.len()}),
    )
}

pub async fn run(a: &StressArgs, ctx: &Ctx) -> Result<SuiteReport> {
    let engines = crate::knobs::names("--engines", &a.engines, &ENGINES)?;
    let (parallel, burst) =
        if ctx.smoke { (a.parallel.min(4), a.burst.min(10)) } else { (a.parallel, a.burst) };
    anyhow::ensure!(parallel > 0 && burst > 0, "--parallel and --burst must be at least 1");
    let mut report = SuiteReport::new("stress", Value::Null);
    let cols = ["engine", "ok", "success", "p50 ms", "p95 ms", "p99 ms", "wall ms", "sandboxes/s"];
    let mut stress = Table::new(
        &format!("Stress: {parallel} cold one-shot sandboxes at once (agentkernel's shape)"),
        &cols,
    );
    let mut burst_t = Table::new(&format!("Burst: {burst} cold one-shot sandboxes at once"), &cols);
    let mut results = serde_json::Map::new();
    crate::progress::start("stress", engines.len() * 2);
    for en in &engines {
        crate::progress::step(&format!("{en}: starting"));
        let eng = match en.as_str() {
            "hutch" => Eng::Cli(hutch_bin()?),
            "hutch-lib" => Eng::Lib(crate::subject::crun_backend()?),
            "crun-floor" => Eng::Floor(
                (0..parallel.max(burst))
                    .map(|i| {
                        crate::peers::Floor::new(RuntimeKind::Crun, &ARGV, &format!("stress{i}"))
                    })
                    .collect::<Result<_>>()?,
            ),
            other => match Engine::start_named(other).await {
                Ok(e) => Eng::Peer(Box::new(e)),
                Err(why) => {
                    report.skip(en, &why, false);
                    crate::progress::advance(2);
                    continue;
                }
            },
        };
        // one unmeasured sandbox first: the first run pays for page cache and image set-up
        let warm = eng.one(0).await;
        if let (Err(e), Eng::Peer(_)) = (&warm, &eng) {
            report.skip(en, &format!("{e:#}"), false);
        } else {
            warm.with_context(|| format!("{en}: a single sandbox"))?;
            crate::progress::step(&format!("{en}: {parallel} at once"));
            let (mut cells, sj) = wave(&eng, parallel).await;
            cells.insert(0, en.clone());
            stress.row(cells);
            crate::progress::advance(1);
            crate::progress::step(&format!("{en}: burst of {burst}"));
            let (mut cells, bj) = wave(&eng, burst).await;
            cells.insert(0, en.clone());
            burst_t.row(cells);
            results.insert(en.clone(), json!({"stress": sj, "burst": bj}));
        }
        crate::progress::advance(1);
        if let Eng::Peer(mut e) = eng {
            e.stop().await;
        }
    }
    crate::progress::finish();
    stress.note("Every sandbox runs `echo hello` with hutch's defaults (512 MiB, 1 CPU, 64 pids, read-only root, no network); docker and podman with the same limits (isol8's flags). hutch = a `hutch run` process per sandbox (like `docker run --rm`); hutch-lib = all sandboxes in one process through the library (what the daemon does); crun-floor = `crun run` of hutch's own bundle with `echo` in place of the agent, one bundle per sandbox (the least any container engine can cost here). Latency is per sandbox, from its start to its exit; throughput = successful sandboxes / wall time.");
    let burst_of = |en: &str| results.get(en).map(|r| r["burst"].clone());
    let mut targets = Vec::new();
    if let Some(h) = burst_of("hutch") {
        let all_ok = h["ok"] == h["n"];
        targets.push(json!({"promise": format!("burst of {burst} `hutch run` processes: every one succeeds"), "value": h["ok"], "limit": burst, "met": all_ok}));
        let hw = h["wall_ms"].as_f64().unwrap_or(f64::NAN);
        if !all_ok {
            report.finding(format!(
                "{} of {burst} hutch sandboxes in the burst failed: {}",
                h["error_count"], h["errors"]
            ));
        }
        match burst_of("docker") {
            Some(d) => {
                let dw = d["wall_ms"].as_f64().unwrap_or(f64::NAN);
                let ratio = dw / hw;
                report.finding(format!(
                    "burst of {burst}: hutch finished in {} ms ({}/{burst} ok), Docker in {} ms ({}/{burst} ok): hutch {ratio:.1}x faster; per-sandbox p50 {} ms vs {} ms",
                    ms(hw), h["ok"], ms(dw), d["ok"], ms(h["latency"]["median"].as_f64().unwrap_or(f64::NAN)), ms(d["latency"]["median"].as_f64().unwrap_or(f64::NAN))
                ));
                targets.push(json!({"promise": format!("burst of {burst}: hutch's wall time at least 9x shorter than Docker's in the same run"), "value": ratio, "limit": 9.0, "met": all_ok && ratio >= 9.0}));
            }
            None => targets.push(json!({"promise": format!("burst of {burst}: hutch at least 9x faster than Docker"), "value": null, "met": null})),
        }
    }
    let tt = crate::report::targets_table(&targets);
    report.doc = json!({
        "config": {"parallel": parallel, "burst": burst, "engines": engines, "command": ARGV},
        "results": results,
        "targets": targets,
    });
    report.tables = vec![stress, burst_t, tt];
    Ok(report)
}
