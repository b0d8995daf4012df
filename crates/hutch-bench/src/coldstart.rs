//! `hutch bench coldstart`: secure-exec's cold-start matrix. Scenarios x batch sizes x
//! sequential/concurrent; cold = a new sandbox up to the result of its first command, warm = a
//! second command in the same sandbox; p50 and mean, and a phase breakdown.
//!
//! Scenarios: `hutch` (a sandbox through the library, in this process: what an embedding or the
//! daemon pays), `hutch-api` (the same through the daemon's HTTP API on a Unix socket), `docker`
//! and `podman` (`run -d` then `exec`, the way isol8 drives Docker), `secure-exec` (its own
//! definition: a new `NodeRuntime` and its first `exec`, then a second one).
use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use clap::Args;
use hutch_backend_container::ContainerBackend;
use serde_json::{json, Value};

use crate::http::{Conn, LocalDaemon};
use crate::peers::Engine;
use crate::report::{ms, SuiteReport, Table};
use crate::stats::summarize;
use crate::subject::{batch, compare, phase_summaries, Sample};
use crate::Ctx;

pub const SCENARIOS: [&str; 5] = ["hutch", "hutch-api", "docker", "podman", "secure-exec"];
const MODES: [&str; 2] = ["sequential", "concurrent"];
const ARGV: [&str; 2] = ["echo", "hello"];

#[derive(Debug, Args)]
pub struct ColdstartArgs {
    /// Batch sizes [env BENCH_BATCH_SIZES; default 1,10,50,100,200]
    #[arg(long)]
    pub batch_sizes: Option<String>,
    /// Scenarios: hutch, hutch-api, docker, podman, secure-exec [env BENCH_SCENARIOS; default all]
    #[arg(long)]
    pub scenarios: Option<String>,
    /// Modes: sequential, concurrent [default both]
    #[arg(long, default_value = "sequential,concurrent")]
    pub modes: String,
    /// Sandboxes in flight in concurrent mode
    #[arg(long, env = "BENCH_CONCURRENCY", default_value_t = 4)]
    pub concurrency: usize,
    /// Largest batch size the slow peers (docker, podman, secure-exec) run, to bound the run time
    #[arg(long, env = "BENCH_PEER_MAX_BATCH", default_value_t = 50)]
    pub peer_max_batch: usize,
}

enum Subject {
    Hutch(ContainerBackend),
    Api(LocalDaemon),
    Engine(Box<Engine>),
    SecureExec(std::path::PathBuf),
}

impl Subject {
    fn is_peer(&self) -> bool {
        matches!(self, Subject::Engine(_) | Subject::SecureExec(_))
    }

    async fn sample(&self) -> Result<Sample> {
        match self {
            Subject::Hutch(b) => crate::subject::library_cold_warm(b, &ARGV, b"hello\n").await,
            Subject::Api(d) => {
                let t = std::time::Instant::now();
                let mut c = Conn::connect(&d.socket).await?;
                let (s, v) = c.call("POST", "/v1/sandboxes", Some(&json!({}))).await?;
                if s != 201 {
                    bail!("create failed ({s}): {v}");
                }
                let created = t.elapsed().as_secs_f64() * 1e3;
                let id = v["id"].as_str().context("id")?.to_string();
                let path = format!("/v1/sandboxes/{id}/exec");
                let first = api_exec(&mut c, &path).await;
                let cold = t.elapsed().as_secs_f64() * 1e3;
                let warm = api_exec(&mut c, &path).await;
                let td = std::time::Instant::now();
                c.call("DELETE", &format!("/v1/sandboxes/{id}"), None).await?;
                let phases = BTreeMap::from([
                    ("create".to_string(), created),
                    ("first_exec".to_string(), first?),
                    ("delete".to_string(), td.elapsed().as_secs_f64() * 1e3),
                ]);
                Ok(Sample { cold, warm: Some(warm?), phases })
            }
            Subject::Engine(e) => {
                let t = std::time::Instant::now();
                let (run_ms, name) = e.run_detached().await?;
                let r = async {
                    let (first, out) = e.exec(&name, &ARGV).await?;
                    if out != b"hello\n" {
                        bail!("exec printed {:?}", String::from_utf8_lossy(&out));
                    }
                    let cold = t.elapsed().as_secs_f64() * 1e3;
                    let (warm, _) = e.exec(&name, &ARGV).await?;
                    Ok((cold, warm, first))
                }
                .await;
                let rm = e.remove(&name).await;
                let (cold, warm, first) = r?;
                let phases = BTreeMap::from([
                    ("run_detached".to_string(), run_ms),
                    ("first_exec".to_string(), first),
                    ("remove".to_string(), rm?),
                ]);
                Ok(Sample { cold, warm: Some(warm), phases })
            }
            Subject::SecureExec(_) => bail!("secure-exec runs whole batches"),
        }
    }

    /// One batch: every sample, or the first error.
    async fn run_batch(&self, n: usize, conc: usize, warmup: usize) -> Result<Vec<Sample>> {
        if let Subject::SecureExec(prefix) = self {
            return secure_exec_batch(prefix, n, conc, warmup).await;
        }
        for _ in 0..warmup {
            self.sample().await?;
        }
        let (res, _) = batch(n, conc, |_| self.sample()).await;
        res.into_iter().collect()
    }

    async fn stop(self) {
        match self {
            Subject::Api(d) => d.stop().await,
            Subject::Engine(mut e) => e.stop().await,
            _ => {}
        }
    }
}

async fn api_exec(c: &mut Conn, path: &str) -> Result<f64> {
    let t = std::time::Instant::now();
    let (s, r) = c.call("POST", path, Some(&json!({"command": ARGV}))).await?;
    if s != 200 || r["stdout"] != "hello\n" {
        bail!("exec failed ({s}): {r}");
    }
    Ok(t.elapsed().as_secs_f64() * 1e3)
}

async fn secure_exec_batch(
    prefix: &Path,
    n: usize,
    conc: usize,
    warmup: usize,
) -> Result<Vec<Sample>> {
    let script = crate::assets::secure_exec_harness()?;
    let cfg =
        json!({"batch": n, "concurrency": conc, "warmup": warmup, "code": "export const x = 1;"});
    let mut cmd = tokio::process::Command::new("node");
    cmd.arg(script).arg(cfg.to_string()).env("HUTCH_BENCH_NPM_PREFIX", prefix);
    let (_, out) = crate::peers::timed(&mut cmd).await?;
    let mut samples = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: Value = serde_json::from_str(line)
            .with_context(|| format!("secure-exec harness printed {line:?}"))?;
        if let Some(e) = v["error"].as_str() {
            bail!("secure-exec: {e}");
        }
        samples.push(Sample {
            cold: v["cold_ms"].as_f64().context("cold_ms")?,
            warm: v["warm_ms"].as_f64(),
            phases: BTreeMap::new(),
        });
    }
    if samples.len() != n {
        bail!("secure-exec: {} of {n} samples", samples.len());
    }
    Ok(samples)
}

pub async fn run(a: &ColdstartArgs, ctx: &Ctx) -> Result<SuiteReport> {
    let sizes = crate::knobs::sizes(
        "BENCH_BATCH_SIZES",
        &crate::knobs::pick(
            a.batch_sizes.as_deref(),
            "BENCH_BATCH_SIZES",
            if ctx.smoke { "1,2" } else { "1,10,50,100,200" },
        )?,
    )?;
    let scenarios = crate::knobs::names(
        "BENCH_SCENARIOS",
        &crate::knobs::pick(a.scenarios.as_deref(), "BENCH_SCENARIOS", &SCENARIOS.join(","))?,
        &SCENARIOS,
    )?;
    let modes = crate::knobs::names("--modes", &a.modes, &MODES)?;
    if a.concurrency == 0 {
        bail!("BENCH_CONCURRENCY must be at least 1");
    }
    // secure-exec's BENCH_ITERATIONS: how many times each batch runs (samples = batch x rounds);
    // unset, small batches repeat until a cell has at least 10 samples
    let rounds_for = |n: usize| match (ctx.smoke, ctx.iterations) {
        (true, _) => 1,
        (false, Some(i)) => i.max(1),
        (false, None) => 10usize.div_ceil(n).max(1),
    };
    let warmup = ctx.warmup.min(1);
    let peer_max = if ctx.smoke { 2 } else { a.peer_max_batch };

    let mut report = SuiteReport::new("coldstart", Value::Null);
    let mut results = Vec::new();
    let mut table = Table::new(
        "Cold start matrix: `echo hello` (secure-exec's shape)",
        &[
            "scenario",
            "batch",
            "mode",
            "n",
            "cold p50 ms",
            "cold mean ms",
            "warm p50 ms",
            "warm mean ms",
            "batch wall ms",
        ],
    );
    let mut phase_rows: Vec<(String, BTreeMap<String, crate::stats::Summary>)> = Vec::new();
    let total = scenarios.len() * modes.len() * sizes.len();
    crate::progress::start("coldstart", total);
    for sc in &scenarios {
        crate::progress::step(&format!("{sc}: starting"));
        let subject = match sc.as_str() {
            "hutch" => Subject::Hutch(crate::subject::crun_backend()?),
            "hutch-api" => Subject::Api(LocalDaemon::start("coldstart").await?),
            "docker" | "podman" => match Engine::start_named(sc).await {
                Ok(e) => Subject::Engine(Box::new(e)),
                Err(why) => {
                    report.skip(sc, &why, false);
                    crate::progress::advance(modes.len() * sizes.len());
                    continue;
                }
            },
            _ => match crate::peers::secure_exec_prefix() {
                Ok(p) => Subject::SecureExec(p),
                Err(why) => {
                    report.skip(sc, &why, false);
                    crate::progress::advance(modes.len() * sizes.len());
                    continue;
                }
            },
        };
        let mut all_samples = Vec::new();
        let mut failed = None;
        'cells: for mode in &modes {
            for &n in &sizes {
                crate::progress::step(&format!("{sc} {mode} batch {n}"));
                if subject.is_peer() && n > peer_max {
                    crate::progress::advance(1);
                    continue;
                }
                let conc = if mode == "concurrent" { a.concurrency } else { 1 };
                let mut samples = Vec::new();
                let t = std::time::Instant::now();
                let rounds = rounds_for(n);
                for _ in 0..rounds {
                    match subject.run_batch(n, conc, warmup).await {
                        Ok(s) => samples.extend(s),
                        Err(e) if subject.is_peer() => {
                            failed = Some(format!("{e:#}"));
                            break 'cells;
                        }
                        Err(e) => {
                            subject.stop().await;
                            return Err(e.context(format!("coldstart {sc}, batch {n}, {mode}")));
                        }
                    }
                }
                let wall = t.elapsed().as_secs_f64() * 1e3 / rounds as f64;
                let cold = summarize(&samples.iter().map(|s| s.cold).collect::<Vec<_>>());
                let warm = summarize(&samples.iter().filter_map(|s| s.warm).collect::<Vec<_>>());
                table.row(vec![
                    sc.clone(),
                    n.to_string(),
                    mode.clone(),
                    cold.n.to_string(),
                    ms(cold.median),
                    ms(cold.mean),
                    ms(warm.median),
                    ms(warm.mean),
                    ms(wall),
                ]);
                results.push(json!({
                    "scenario": sc, "batchSize": n, "mode": mode, "concurrency": conc, "iterations": rounds,
                    "coldStart": cold, "warmStart": warm, "batchWallMs": wall,
                    "phases": phase_summaries(&samples),
                }));
                all_samples.extend(samples);
                crate::progress::advance(1);
            }
        }
        if let Some(why) = failed {
            report.skip(sc, &why, true);
        }
        if !all_samples.is_empty() && all_samples.iter().any(|s| !s.phases.is_empty()) {
            phase_rows.push((sc.clone(), phase_summaries(&all_samples)));
        }
        subject.stop().await;
    }
    crate::progress::finish();
    table.note(format!(
        "cold = a new sandbox up to the result of its first `echo hello`; warm = a second `echo hello` in it; concurrent mode keeps {} in flight; the peers run batches up to {peer_max}; each batch ran {} (BENCH_ITERATIONS; unset: until a cell has 10 samples), after {warmup} warm-up sandbox(es). secure-exec runs `export const x = 1;` in a V8 isolate (no process, no kernel isolation): its own benchmark's workload.",
        a.concurrency,
        match ctx.iterations { Some(i) if !ctx.smoke => format!("{i} time(s)"), _ if ctx.smoke => "once".to_string(), _ => "ceil(10 / batch) time(s)".to_string() }
    ));
    let mut phases = Table::new(
        "Phase breakdown, p50 ms over all batches",
        &["scenario", "phase", "p50 ms", "mean ms", "p95 ms"],
    );
    for (sc, ph) in &phase_rows {
        for (name, s) in ph {
            phases.row(vec![sc.clone(), name.clone(), ms(s.median), ms(s.mean), ms(s.p95)]);
        }
    }
    phases.note("hutch: prepare (bundle), runtime_create (OCI runtime up to the agent's first instruction), agent_ready, first_exec, destroy (after the warm exec). docker/podman: `run -d`, first `exec`, `rm -f`. hutch-api: POST /v1/sandboxes, first exec, DELETE.");

    // hutch against each peer, cell by cell
    let cell = |sc: &str, n: usize, mode: &str| {
        results.iter().find(|r| r["scenario"] == sc && r["batchSize"] == n && r["mode"] == mode)
    };
    let mut ratios = Vec::new();
    for peer in ["docker", "podman", "secure-exec"] {
        for mode in &modes {
            for &n in &sizes {
                let (Some(h), Some(p)) = (cell("hutch", n, mode), cell(peer, n, mode)) else {
                    continue;
                };
                let f = |r: &Value, k: &str| r[k]["median"].as_f64().unwrap_or(f64::NAN);
                let (hc, pc, hw, pw) =
                    (f(h, "coldStart"), f(p, "coldStart"), f(h, "warmStart"), f(p, "warmStart"));
                ratios.push(json!({"peer": peer, "mode": mode, "batchSize": n, "cold_peer_over_hutch": pc / hc, "warm_peer_over_hutch": pw / hw}));
                if n == sizes[0]
                    || n == sizes.iter().copied().filter(|&s| s <= peer_max).max().unwrap_or(n)
                {
                    report.finding(format!(
                        "batch {n} {mode}: hutch cold p50 {} ms is {} than {peer} ({} ms); warm {} ms is {} ({} ms)",
                        ms(hc), compare(hc, pc), ms(pc), ms(hw), compare(hw, pw), ms(pw)
                    ));
                }
            }
        }
    }
    report.doc = json!({
        "scenarioSetup": {"scenarios": scenarios, "batchSizes": sizes, "modes": modes, "concurrency": a.concurrency,
                          "iterations": ctx.iterations, "warmup": warmup, "peerMaxBatch": peer_max, "command": ARGV},
        "results": results,
        "ratios": ratios,
    });
    let vs_docker: Vec<f64> = ratios
        .iter()
        .filter(|r| r["peer"] == "docker")
        .flat_map(|r| [r["cold_peer_over_hutch"].as_f64(), r["warm_peer_over_hutch"].as_f64()])
        .flatten()
        .collect();
    let targets =
        vec![crate::report::faster_than_docker("cold and warm cell of the matrix", &vs_docker)];
    let tt = crate::report::targets_table(&targets);
    if let Some(obj) = report.doc.as_object_mut() {
        obj.insert("targets".into(), json!(targets));
    }
    report.tables = vec![table, phases, tt];
    Ok(report)
}
