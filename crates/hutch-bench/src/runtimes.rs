//! `hutch bench runtimes`: isol8's benchmark. Per runtime (python, node, bash) a hello world,
//! cold (a fresh sandbox: create, start, write the code, run it, clean up) against warm (a
//! sandbox already started, as a pool holds it: write, run, clean up for the next user), with
//! the per-phase breakdown, for hutch and for Docker and podman driven like isol8 drives Docker.
use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use hutch_backend_container::ContainerBackend;
use hutch_core::{Backend, SandboxSpec};
use serde_json::{json, Value};

use crate::peers::Engine;
use crate::report::{ms, SuiteReport, Table};
use crate::stats::summarize;
use crate::subject::{compare, phase_summaries, Sample};
use crate::Ctx;

pub const RUNTIMES: [&str; 3] = ["python", "node", "bash"];
pub const ENGINES: [&str; 3] = ["hutch", "docker", "podman"];

#[derive(Debug, Args)]
pub struct RuntimesArgs {
    /// Runtimes: python, node, bash
    #[arg(long, default_value = "python,node,bash")]
    pub runtimes: String,
    /// Engines: hutch, docker, podman
    #[arg(long, default_value = "hutch,docker,podman")]
    pub engines: String,
}

/// (file, argv, code): the hello world per runtime; the file goes in the sandbox's work dir.
fn program(rt: &str, dir: &str) -> (String, Vec<String>, &'static str) {
    let (file, interp, code) = match rt {
        "python" => ("main.py", "python3", "print('hello world')\n"),
        "node" => ("main.js", "node", "console.log('hello world')\n"),
        _ => ("main.sh", "bash", "echo 'hello world'\n"),
    };
    let path = format!("{dir}/{file}");
    (path.clone(), vec![interp.to_string(), path], code)
}

const WANT: &[u8] = b"hello world\n";

fn elapsed(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

async fn hutch_write_run(
    sb: &dyn hutch_core::Sandbox,
    rt: &str,
    ph: &mut BTreeMap<String, f64>,
) -> Result<()> {
    let (path, argv, code) = program(rt, &sb.spec().workdir);
    let t = Instant::now();
    sb.write_file(&path, code.as_bytes(), None).await?;
    ph.insert("write".into(), elapsed(t));
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    ph.insert("run".into(), crate::subject::exec_ms(sb, &argv, WANT).await?);
    Ok(())
}

async fn hutch_cold(b: &ContainerBackend, rt: &str) -> Result<Sample> {
    let mut ph = BTreeMap::new();
    let t0 = Instant::now();
    let t = Instant::now();
    let mut sb = b.create(SandboxSpec::default()).await?;
    ph.insert("create".into(), elapsed(t));
    let r = async {
        let t = Instant::now();
        sb.start().await?;
        ph.insert("start".into(), elapsed(t));
        hutch_write_run(sb.as_ref(), rt, &mut ph).await
    }
    .await;
    let t = Instant::now();
    let d = sb.destroy().await;
    ph.insert("cleanup".into(), elapsed(t));
    r?;
    d?;
    Ok(Sample { cold: elapsed(t0), warm: None, phases: ph })
}

async fn hutch_warm(sb: &dyn hutch_core::Sandbox, rt: &str) -> Result<Sample> {
    let mut ph = BTreeMap::new();
    let t0 = Instant::now();
    hutch_write_run(sb, rt, &mut ph).await?;
    let t = Instant::now();
    let rep = sb.reset().await?;
    if !rep.is_clean() {
        bail!("the sandbox was not clean after reset: {rep:?}");
    }
    ph.insert("cleanup".into(), elapsed(t));
    Ok(Sample { cold: elapsed(t0), warm: None, phases: ph })
}

async fn engine_write_run(
    e: &Engine,
    name: &str,
    rt: &str,
    ph: &mut BTreeMap<String, f64>,
) -> Result<()> {
    let (path, argv, code) = program(rt, "/sandbox");
    ph.insert(
        "write".into(),
        e.exec_stdin(name, &["sh", "-c", &format!("cat > {path}")], code.as_bytes()).await?,
    );
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let (run, out) = e.exec(name, &argv).await?;
    if out != WANT {
        bail!("{argv:?} printed {:?}", String::from_utf8_lossy(&out));
    }
    ph.insert("run".into(), run);
    Ok(())
}

async fn engine_cold(e: &Engine, rt: &str) -> Result<Sample> {
    let mut ph = BTreeMap::new();
    let t0 = Instant::now();
    let (c, name) = e.create().await?;
    ph.insert("create".into(), c);
    let r = async {
        ph.insert("start".into(), e.start_container(&name).await?);
        engine_write_run(e, &name, rt, &mut ph).await
    }
    .await;
    let rm = e.remove(&name).await;
    r?;
    ph.insert("cleanup".into(), rm?);
    Ok(Sample { cold: elapsed(t0), warm: None, phases: ph })
}

async fn engine_warm(e: &Engine, name: &str, rt: &str) -> Result<Sample> {
    let mut ph = BTreeMap::new();
    let t0 = Instant::now();
    engine_write_run(e, name, rt, &mut ph).await?;
    // isol8's release: kill the user's processes and wipe /sandbox
    let (c, _) = e.exec(name, &["sh", "-c", "rm -rf /sandbox/* /tmp/*; true"]).await?;
    ph.insert("cleanup".into(), c);
    Ok(Sample { cold: elapsed(t0), warm: None, phases: ph })
}

enum Eng {
    Hutch(ContainerBackend),
    Peer(Box<Engine>),
}

pub async fn run(a: &RuntimesArgs, ctx: &Ctx) -> Result<SuiteReport> {
    let runtimes = crate::knobs::names("--runtimes", &a.runtimes, &RUNTIMES)?;
    let engines = crate::knobs::names("--engines", &a.engines, &ENGINES)?;
    let n = ctx.iterations_or(10);
    let warmup = ctx.warmup;
    let mut report = SuiteReport::new("runtimes", Value::Null);
    let mut main = Table::new(
        "Cold vs warm pool per runtime (isol8's shape): hello world, total ms",
        &[
            "runtime",
            "engine",
            "cold p50",
            "cold mean",
            "warm p50",
            "warm min",
            "warm mean",
            "speedup (cold p50 / warm min)",
        ],
    );
    let mut phases = Table::new(
        "Phase breakdown, p50 ms (cold path / warm path)",
        &["runtime", "engine", "create", "start", "write code", "run", "cleanup"],
    );
    let mut results = Vec::new();
    crate::progress::start("runtimes", engines.len() * runtimes.len());
    for en in &engines {
        crate::progress::step(&format!("{en}: starting"));
        let eng = match en.as_str() {
            "hutch" => Eng::Hutch(crate::subject::crun_backend()?),
            other => match Engine::start_named(other).await {
                Ok(e) => Eng::Peer(Box::new(e)),
                Err(why) => {
                    report.skip(en, &why, false);
                    crate::progress::advance(runtimes.len());
                    continue;
                }
            },
        };
        let r =
            measure_engine(&eng, en, &runtimes, n, warmup, &mut main, &mut phases, &mut results)
                .await;
        match eng {
            Eng::Hutch(_) => r?,
            Eng::Peer(mut e) => {
                e.stop().await;
                if let Err(err) = r {
                    report.skip(en, &format!("{err:#}"), true);
                }
            }
        }
    }
    crate::progress::finish();
    main.note("cold: a new sandbox (create, start), the code written into it, run, the sandbox removed. warm: a sandbox already started (a pool of one, as isol8's pool keeps them): write, run, and clean up for the next user (hutch: `reset`, which kills every process but the agent and empties the work dir and /tmp; docker/podman: `exec rm -rf /sandbox/* /tmp/*`, isol8's release). The interpreters are the host's, for every engine.");
    phases.note("isol8's \"exec setup\" phase (creating the exec instance) is part of \"run\" here: the docker CLI and hutch's agent do both in one call.");
    for rt in &runtimes {
        let get = |en: &str, k: &str| {
            results
                .iter()
                .find(|r: &&Value| r["runtime"] == rt.as_str() && r["engine"] == en)
                .and_then(|r| r[k]["median"].as_f64())
        };
        for peer in ["docker", "podman"] {
            if let (Some(hc), Some(pc), Some(hw), Some(pw)) =
                (get("hutch", "cold"), get(peer, "cold"), get("hutch", "warm"), get(peer, "warm"))
            {
                report.finding(format!(
                    "{rt}: hutch cold {} ms is {} than {peer} ({} ms); warm {} ms is {} ({} ms)",
                    ms(hc),
                    compare(hc, pc),
                    ms(pc),
                    ms(hw),
                    compare(hw, pw),
                    ms(pw)
                ));
            }
        }
    }
    report.doc = json!({
        "config": {"iterations": n, "warmup": warmup, "runtimes": runtimes, "engines": engines},
        "results": results,
    });
    let mut vs_docker = Vec::new();
    for r in results.iter().filter(|r| r["engine"] == "docker") {
        if let Some(h) =
            results.iter().find(|h| h["engine"] == "hutch" && h["runtime"] == r["runtime"])
        {
            for k in ["cold", "warm"] {
                if let (Some(d), Some(hv)) = (r[k]["median"].as_f64(), h[k]["median"].as_f64()) {
                    vs_docker.push(d / hv);
                }
            }
        }
    }
    let targets = vec![crate::report::faster_than_docker("runtime, cold and warm", &vs_docker)];
    let tt = crate::report::targets_table(&targets);
    if let Some(obj) = report.doc.as_object_mut() {
        obj.insert("targets".into(), json!(targets));
    }
    report.tables = vec![main, phases, tt];
    Ok(report)
}

#[allow(clippy::too_many_arguments)]
async fn measure_engine(
    eng: &Eng,
    en: &str,
    runtimes: &[String],
    n: usize,
    warmup: usize,
    main: &mut Table,
    phases: &mut Table,
    results: &mut Vec<Value>,
) -> Result<()> {
    for rt in runtimes {
        crate::progress::step(&format!("{en} {rt}"));
        let (mut cold, mut warm) = (Vec::new(), Vec::new());
        for i in 0..warmup + n {
            let s = match eng {
                Eng::Hutch(b) => hutch_cold(b, rt).await,
                Eng::Peer(e) => engine_cold(e, rt).await,
            }
            .with_context(|| format!("{en} {rt} cold"))?;
            if i >= warmup {
                cold.push(s);
            }
        }
        // the warm pool: one sandbox started before the clock runs
        match eng {
            Eng::Hutch(b) => {
                let mut sb = b.create(SandboxSpec::default()).await?;
                let r = async {
                    sb.start().await?;
                    for i in 0..warmup + n {
                        let s = hutch_warm(sb.as_ref(), rt).await?;
                        if i >= warmup {
                            warm.push(s);
                        }
                    }
                    Ok::<_, anyhow::Error>(())
                }
                .await;
                sb.destroy().await?;
                r.with_context(|| format!("{en} {rt} warm"))?;
            }
            Eng::Peer(e) => {
                let (_, name) = e.run_detached().await?;
                let r = async {
                    for i in 0..warmup + n {
                        let s = engine_warm(e, &name, rt).await?;
                        if i >= warmup {
                            warm.push(s);
                        }
                    }
                    Ok::<_, anyhow::Error>(())
                }
                .await;
                e.remove(&name).await?;
                r.with_context(|| format!("{en} {rt} warm"))?;
            }
        }
        let cs = summarize(&cold.iter().map(|s| s.cold).collect::<Vec<_>>());
        let ws = summarize(&warm.iter().map(|s| s.cold).collect::<Vec<_>>());
        main.row(vec![
            rt.clone(),
            en.into(),
            ms(cs.median),
            ms(cs.mean),
            ms(ws.median),
            ms(ws.min),
            ms(ws.mean),
            format!("{:.1}x", cs.median / ws.min),
        ]);
        let (cp, wp) = (phase_summaries(&cold), phase_summaries(&warm));
        let cell = |k: &str| {
            let c = cp.get(k).map(|s| ms(s.median)).unwrap_or("-".into());
            let w = wp.get(k).map(|s| ms(s.median)).unwrap_or("-".into());
            format!("{c} / {w}")
        };
        phases.row(vec![
            rt.clone(),
            en.into(),
            cell("create"),
            cell("start"),
            cell("write"),
            cell("run"),
            cell("cleanup"),
        ]);
        results.push(json!({
            "runtime": rt, "engine": en,
            "cold": cs, "warm": ws, "speedup": cs.median / ws.min,
            "cold_phases": cp, "warm_phases": wp,
        }));
        crate::progress::advance(1);
    }
    Ok(())
}
