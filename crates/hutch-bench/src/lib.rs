//! `hutch bench`: the five seed studies reproduced on hutch, with the peers measured side by
//! side in the same run. Every suite writes JSON with a machine snapshot, CSV per table and a
//! Markdown section; `all` adds one report and the plots. Numbers are medians and same-run
//! ratios; nothing here asserts a timing (the promises live in docs/SPECIFICATION.md and each
//! suite records whether they were met).
#![forbid(unsafe_code)]

mod assets;
mod backends;
mod cold;
mod coldstart;
mod gateway;
mod http;
mod knobs;
mod peers;
mod pool;
mod progress;
mod report;
mod runner;
mod runtimes;
mod snapshot;
pub mod stats;
mod stress;
mod subject;
mod wasm;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, FromArgMatches, Subcommand};

pub use report::SuiteReport;

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub suite: Option<Suite>,
    /// Measured iterations per scenario; in coldstart, runs of each batch (env BENCH_ITERATIONS)
    #[arg(long, global = true, env = "BENCH_ITERATIONS")]
    pub iterations: Option<usize>,
    /// Unmeasured warm-up iterations per scenario (env BENCH_WARMUP)
    #[arg(long, global = true, env = "BENCH_WARMUP", default_value_t = 2)]
    pub warmup: usize,
    /// Directory for the results (JSON, CSV, Markdown, PNG)
    #[arg(long, global = true, default_value = "bench-results")]
    pub out: PathBuf,
    /// One iteration of everything, small batches (every suite when no suite is named): checks
    /// that each suite runs at all, not how fast
    #[arg(long, global = true)]
    pub smoke: bool,
}

#[derive(Debug, Subcommand)]
pub enum Suite {
    /// secure-exec's matrix: scenarios x batch sizes x sequential/concurrent, cold and warm, phases
    Coldstart(coldstart::ColdstartArgs),
    /// One-shot `hutch run` against the raw OCI runtime floor and bubblewrap, warm exec in one sandbox
    Cold(cold::ColdArgs),
    /// Ash's pool: store operations on real SQLite, pool acquire to first exec over the API
    Pool(pool::PoolArgs),
    /// isol8's: cold vs warm pool per runtime (python, node, bash) with a per-phase breakdown
    Runtimes(runtimes::RuntimesArgs),
    /// agentkernel's: every backend and peer side by side (latency, throughput, isolation)
    Backends(backends::BackendsArgs),
    /// agentkernel's stress test and the 100-way burst against Docker's
    Stress(stress::StressArgs),
    /// Code contexts (resident runner) in-process and over the API, against secure-exec
    Runner(runner::RunnerArgs),
    /// The wasm backend: instance acquisition from the pool, fresh Python/JavaScript instances vs container exec
    Wasm(wasm::WasmArgs),
    /// The WebAssembly-vs-Docker gateway study: wrk against native, process, wasm, wasmtime CLI and container handlers
    Gateway(gateway::GatewayArgs),
    /// Every suite above, one report, the plots
    All,
}

/// The suites `all` runs, in this order.
pub const ALL: [&str; 9] =
    ["cold", "coldstart", "pool", "runtimes", "wasm", "backends", "stress", "gateway", "runner"];

/// What every suite reads from the shared flags.
#[derive(Debug, Clone)]
pub struct Ctx {
    pub iterations: Option<usize>,
    pub warmup: usize,
    pub smoke: bool,
}

impl Ctx {
    /// The iterations to run: 1 in smoke mode, else the flag, else the suite's default.
    pub fn iterations_or(&self, default: usize) -> usize {
        if self.smoke {
            1
        } else {
            self.iterations.unwrap_or(default).max(1)
        }
    }
}

/// A suite's arguments as if given no flags (their defaults), for `all`.
fn defaults<T: Args + FromArgMatches>() -> Result<T> {
    let cmd = T::augment_args(clap::Command::new("suite").no_binary_name(true));
    let m = cmd.try_get_matches_from(Vec::<String>::new())?;
    Ok(T::from_arg_matches(&m)?)
}

/// A suite written before [`SuiteReport`] (it prints its own table and writes its own
/// `<name>-latest.json`, perhaps `<name>-latest.md`): run it, then read its results back so `all`
/// puts them in the report with the others (`gateway` and `wasm`).
async fn legacy(
    name: &'static str,
    out: &Path,
    run: impl std::future::Future<Output = Result<()>>,
) -> Result<SuiteReport> {
    run.await?;
    let path = out.join(format!("{name}-latest.json"));
    let doc: serde_json::Value = serde_json::from_slice(
        &std::fs::read(&path).with_context(|| format!("read {}", path.display()))?,
    )
    .with_context(|| format!("parse {}", path.display()))?;
    let mut rep = SuiteReport::new(name, doc);
    rep.own_markdown = std::fs::read_to_string(out.join(format!("{name}-latest.md"))).ok();
    if let Some(t) = rep.doc["targets"].as_array().filter(|t| !t.is_empty()) {
        rep.tables.push(report::targets_table(t));
    }
    Ok(rep)
}

async fn run_suite(s: &Suite, ctx: &Ctx, out: &Path) -> Result<SuiteReport> {
    match s {
        Suite::Coldstart(a) => coldstart::run(a, ctx).await,
        Suite::Cold(a) => cold::run(a, ctx).await,
        Suite::Pool(a) => pool::run(a, ctx).await,
        Suite::Runtimes(a) => runtimes::run(a, ctx).await,
        Suite::Backends(a) => backends::run(a, ctx).await,
        Suite::Stress(a) => stress::run(a, ctx).await,
        Suite::Runner(a) => runner::run(a, ctx).await,
        Suite::Wasm(a) => {
            let run = wasm::run(a, ctx.iterations_or(20), ctx.warmup, ctx.smoke, out);
            legacy("wasm", out, run).await
        }
        Suite::Gateway(a) => {
            legacy("gateway", out, gateway::run(a, ctx.iterations_or(20), ctx.smoke, out)).await
        }
        Suite::All => bail!("`all` is not a single suite"),
    }
}

/// A suite by name, with its default arguments.
fn named(name: &str) -> Result<Suite> {
    Ok(match name {
        "coldstart" => Suite::Coldstart(defaults()?),
        "cold" => Suite::Cold(defaults()?),
        "pool" => Suite::Pool(defaults()?),
        "runtimes" => Suite::Runtimes(defaults()?),
        "backends" => Suite::Backends(defaults()?),
        "stress" => Suite::Stress(defaults()?),
        "runner" => Suite::Runner(defaults()?),
        "wasm" => Suite::Wasm(defaults()?),
        "gateway" => Suite::Gateway(defaults()?),
        other => bail!("unknown suite {other:?} (suites: {})", ALL.join(", ")),
    })
}

async fn run_named(name: &str, ctx: &Ctx, out: &Path) -> Result<SuiteReport> {
    run_suite(&named(name)?, ctx, out).await
}

pub async fn main(a: BenchArgs) -> Result<()> {
    let ctx = Ctx {
        iterations: a.iterations,
        warmup: if a.smoke { 0 } else { a.warmup },
        smoke: a.smoke,
    };
    // Ctrl-C or SIGTERM drops the running suite, whose peers stop on drop (no daemon left behind)
    let run = run_args(&a, &ctx);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let r = tokio::select! {
        r = run => r,
        _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
        _ = term.recv() => Err(anyhow::anyhow!("terminated")),
    };
    progress::finish();
    assets::cleanup();
    r
}

async fn run_args(a: &BenchArgs, ctx: &Ctx) -> Result<()> {
    match &a.suite {
        None if a.smoke => run_all(ctx, &a.out).await,
        None => bail!(
            "name a suite ({}) or `all`; `hutch bench --smoke` runs every suite once",
            ALL.join(", ")
        ),
        Some(Suite::All) => run_all(ctx, &a.out).await,
        Some(s) => {
            let mut rep = run_suite(s, ctx, &a.out).await?;
            rep.write(&a.out)?;
            Ok(())
        }
    }
}

/// Every suite in turn; a suite that cannot run is recorded and the others still run; the run
/// fails at the end if any could not.
async fn run_all(ctx: &Ctx, out: &Path) -> Result<()> {
    let started = Instant::now();
    let machine = snapshot::machine();
    let mut sections = Vec::new();
    let mut failed = Vec::new();
    let mut timings = Vec::new();
    let mut promises = Vec::new();
    for name in ALL {
        progress::line(&format!(
            "\n######## hutch bench {name}{}",
            if ctx.smoke { " (smoke)" } else { "" }
        ));
        let t = Instant::now();
        match run_named(name, ctx, out).await {
            Ok(mut rep) => {
                rep.write(out).with_context(|| format!("write the {name} results"))?;
                for t in rep.doc["targets"].as_array().into_iter().flatten() {
                    promises.push((name, t.clone()));
                }
                sections.push(rep.markdown());
            }
            Err(e) => {
                progress::finish();
                progress::line(&format!("hutch bench {name}: cannot run: {e:#}"));
                sections.push(format!("### `{name}`\n\n**Could not run**: {e:#}\n"));
                failed.push(name);
            }
        }
        timings.push((name, t.elapsed().as_secs_f64()));
    }
    let plots = draw_plots(out).await;
    let mut summary = report::targets_table(promises.iter().map(|(_, t)| t));
    summary.title = "Promises checked in this run (docs/SPECIFICATION.md)".into();
    summary.columns.insert(0, "suite".into());
    for (row, (suite, _)) in summary.rows.iter_mut().zip(&promises) {
        row.insert(0, suite.to_string());
    }
    sections.insert(0, summary.markdown());
    let md = report_markdown(
        &machine,
        ctx,
        started.elapsed().as_secs_f64(),
        &timings,
        &sections,
        &plots,
    );
    std::fs::write(out.join("report.md"), md)?;
    progress::line(&format!("report: {}", out.join("report.md").display()));
    if !failed.is_empty() {
        bail!("suites that could not run: {}", failed.join(", "));
    }
    Ok(())
}

fn report_markdown(
    machine: &serde_json::Value,
    ctx: &Ctx,
    secs: f64,
    timings: &[(&str, f64)],
    sections: &[String],
    plots: &Result<Vec<String>, String>,
) -> String {
    use std::fmt::Write as _;
    let mut s = String::from("# hutch bench report\n\n");
    let _ = writeln!(
        s,
        "Every table: hutch and the peers in the same run, on this machine. Medians and same-run ratios; nothing is compared across machines.{}\n",
        if ctx.smoke { " **Smoke run**: one iteration, small batches; the numbers only show that each suite runs." } else { "" }
    );
    let m =
        |k: &str| machine[k].as_str().map(String::from).unwrap_or_else(|| machine[k].to_string());
    let _ = writeln!(s, "| machine | |\n|---|---|");
    for (k, label) in [
        ("cpu", "CPU"),
        ("cores", "cores"),
        ("mem_total_kib", "memory (KiB)"),
        ("kernel", "kernel"),
        ("os", "OS"),
        ("cgroups", "cgroups"),
        ("rcu_expedited", "rcu_expedited"),
        ("load_average", "load average at the start"),
        ("git_commit", "git commit"),
    ] {
        let _ = writeln!(s, "| {label} | {} |", m(k));
    }
    if let Some(e) = machine["engines"].as_object() {
        for (k, v) in e {
            let _ = writeln!(s, "| {k} | {} |", v.as_str().unwrap_or("not installed"));
        }
    }
    let _ = writeln!(s, "| load average at the end | {} |", snapshot::load_average());
    let _ = writeln!(
        s,
        "\nTotal time {:.0} s ({}).\n",
        secs,
        timings.iter().map(|(n, t)| format!("{n} {t:.0} s")).collect::<Vec<_>>().join(", ")
    );
    match plots {
        Ok(files) if !files.is_empty() => {
            s.push_str("## Plots\n\n");
            for f in files {
                let _ = writeln!(s, "![{f}]({f})\n");
            }
        }
        Ok(_) => {}
        Err(why) => {
            let _ = writeln!(s, "Plots not drawn: {why}\n");
        }
    }
    s.push_str("## Results\n\n");
    for sec in sections {
        s.push_str(sec);
        s.push('\n');
    }
    s
}

/// Draws the PNGs with matplotlib from a venv scripts/bench-peers.sh makes
/// (`HUTCH_BENCH_VENV`, default /var/cache/hutch-bench/venv); returns the file names.
async fn draw_plots(out: &Path) -> Result<Vec<String>, String> {
    let venv = std::env::var_os("HUTCH_BENCH_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/hutch-bench/venv"));
    let py = venv.join("bin/python");
    if !py.exists() {
        return Err(format!("no matplotlib venv at {} ({})", venv.display(), peers::INSTALL_HINT));
    }
    let script = assets::plots_script().map_err(|e| format!("{e:#}"))?;
    let mut cmd = tokio::process::Command::new(py);
    cmd.arg(script).arg(out);
    match peers::timed(&mut cmd).await {
        Ok((_, o)) => Ok(String::from_utf8_lossy(&o.stdout).lines().map(String::from).collect()),
        Err(e) => Err(format!("{e:#}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_suite_in_all_has_default_arguments() {
        for name in ALL {
            let s = named(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(!matches!(s, Suite::All), "{name}");
        }
        let e = named("gatewya").unwrap_err().to_string();
        assert!(e.contains("unknown suite \"gatewya\"") && e.contains("coldstart"), "{e}");
    }

    /// A suite in the old style, as gateway.rs and wasm.rs are written.
    async fn old_style_suite(out: &Path) -> Result<()> {
        report::table_header();
        report::table_row("variant a", &stats::summarize(&[1.0, 2.0]));
        let targets =
            vec![serde_json::json!({"promise": "a is fast", "value": "90%", "met": true})];
        report::print_targets(&targets);
        report::write_json(
            out,
            "oldstyle",
            &serde_json::json!({"rows": [1, 2], "targets": targets}),
        )?;
        std::fs::write(out.join("oldstyle-latest.md"), "# Old style\n\n| a |\n|---|\n| 1 |\n")?;
        Ok(())
    }

    #[tokio::test]
    async fn an_old_style_suite_lands_in_the_report() {
        let out = std::env::temp_dir().join(format!("hutch-bench-legacy-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let mut rep = legacy("oldstyle", &out, old_style_suite(&out)).await.expect("legacy suite");
        assert_eq!(rep.doc["rows"], serde_json::json!([1, 2]));
        let md = rep.markdown();
        assert!(
            md.contains("#### Old style\n") && md.contains("| a is fast | 90% | met |"),
            "{md}"
        );
        rep.write(&out).expect("write");
        assert!(out.join("oldstyle.md").exists() && out.join("oldstyle-latest.md").exists());
        let e = legacy("missing", &out, async { Ok(()) }).await.expect_err("no results file");
        assert!(format!("{e:#}").contains("missing-latest.json"), "{e:#}");
        std::fs::remove_dir_all(&out).expect("clean up");
    }

    #[test]
    fn smoke_runs_one_iteration_whatever_the_knobs_say() {
        let ctx = Ctx { iterations: Some(30), warmup: 0, smoke: true };
        assert_eq!(ctx.iterations_or(20), 1);
        let ctx = Ctx { iterations: None, warmup: 2, smoke: false };
        assert_eq!(ctx.iterations_or(20), 20);
        let ctx = Ctx { iterations: Some(0), warmup: 2, smoke: false };
        assert_eq!(ctx.iterations_or(20), 1);
    }
}
