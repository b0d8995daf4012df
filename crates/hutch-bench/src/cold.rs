//! `hutch bench cold`: N cold one-shot `hutch run` processes against the raw OCI runtime running
//! an equivalent bundle (same mounts, namespaces, seccomp and cgroup limits; the command instead
//! of the agent), interleaved so both see the same machine load. Then warm exec in one live
//! sandbox through the library, which is what a daemon-held sandbox costs per command.
use std::time::Instant;

use anyhow::{bail, Result};
use clap::Args;
use hutch_backend_container::{ContainerBackend, ContainerConfig, RuntimeKind};
use hutch_backend_process::ProcessBackend;
use hutch_core::{Backend, Discard, ExecRequest, SandboxSpec};

use crate::peers::{Bwrap, Floor};
use crate::report::{targets_table, SuiteReport, Table};
use crate::subject::{hutch_bin, hutch_run_once, phase_summaries, Sample};
use serde_json::{json, Value};

use crate::stats::summarize;

#[derive(Debug, Args)]
pub struct ColdArgs {
    /// OCI runtimes to measure (each against its own floor)
    #[arg(long, value_delimiter = ',', default_value = "crun,runc")]
    pub runtimes: Vec<String>,
    /// Warm execs measured in the live sandbox (default: 20 x iterations)
    #[arg(long)]
    pub warm_execs: Option<usize>,
}

const COMMANDS: [(&str, &[&str]); 2] =
    [("echo", &["echo", "hello"]), ("python", &["python3", "-c", "print(1)"])];

pub async fn run(a: &ColdArgs, ctx: &crate::Ctx) -> Result<SuiteReport> {
    let (iterations, warmup) = (ctx.iterations_or(20), ctx.warmup);
    let hutch = hutch_bin()?;
    let mut results = Vec::new();
    let mut ratios = serde_json::Map::new();
    let mut t = Table::latency("hutch run against the raw OCI runtime (the floor)");
    for rt in &a.runtimes {
        let kind = RuntimeKind::parse(rt)?;
        for (name, argv) in COMMANDS {
            let floor = Floor::new(kind, argv, name)?;
            let (mut floor_ms, mut hutch_ms, mut phases) = (Vec::new(), Vec::new(), Vec::new());
            for i in 0..warmup + iterations {
                // interleaved: both see the same load
                let (f, _) = floor.run_once().await?;
                let (h, p, _) = hutch_run_once(&hutch, "container", rt, argv).await?;
                if i >= warmup {
                    floor_ms.push(f);
                    hutch_ms.push(h);
                    phases.push(Sample { phases: p, ..Default::default() });
                }
            }
            let (fs, hs) = (summarize(&floor_ms), summarize(&hutch_ms));
            t.summary(&format!("floor: {rt} run ({name})"), &fs);
            t.summary(&format!("hutch run --runtime {rt} ({name})"), &hs);
            let ratio = hs.median / fs.median;
            t.note(format!("hutch / {rt} ({name}): {ratio:.2}x"));
            ratios.insert(format!("{rt}_{name}"), json!(ratio));
            results.push(json!({"scenario": "floor", "runtime": rt, "command": name, "argv": argv, "summary": fs, "samples_ms": floor_ms}));
            results.push(json!({"scenario": "hutch_run", "runtime": rt, "command": name, "argv": argv, "summary": hs, "samples_ms": hutch_ms, "phases_ms": json!(phase_summaries(&phases))}));
        }
    }

    // Peer: bubblewrap (no cgroup limits, no seccomp by default: a lighter isolation than
    // hutch's), the same commands on the host's /usr read-only. Measured when installed.
    let mut peers = serde_json::Map::new();
    let mut report_findings = Vec::new();
    match Bwrap::find() {
        Ok(bwrap) => {
            for (name, argv) in COMMANDS {
                let mut samples = Vec::new();
                for i in 0..warmup + iterations {
                    let (ms, _) = bwrap.run_once(argv).await?;
                    if i >= warmup {
                        samples.push(ms);
                    }
                }
                let su = summarize(&samples);
                t.summary(&format!("peer: bwrap ({name})"), &su);
                peers.insert(
                    format!("bwrap_{name}"),
                    json!({"summary": su, "samples_ms": samples, "argv": argv}),
                );
            }
        }
        Err(why) => {
            report_findings.push(format!("bwrap not measured: {why}"));
            peers.insert("bwrap".into(), json!({"not_measured": why}));
        }
    }

    // Warm exec in one live sandbox, in-process (what a daemon or library user pays per command).
    let warm_n = a.warm_execs.unwrap_or(iterations * 20).max(1);
    let mut warm = serde_json::Map::new();
    let kind = RuntimeKind::parse(a.runtimes.first().map(String::as_str).unwrap_or("crun"))?;
    let backends: Vec<(String, Box<dyn Backend>)> = vec![
        (
            format!("container:{}", kind.name()),
            Box::new(ContainerBackend::new(ContainerConfig::new(kind))?),
        ),
        ("process (no isolation)".to_string(), Box::new(ProcessBackend::new()?)),
    ];
    for (label, b) in backends {
        let mut sb = b.create(SandboxSpec::default()).await?;
        sb.start().await?;
        let mut samples = Vec::with_capacity(warm_n);
        let mut failure = None;
        for i in 0..warmup.max(3) + warm_n {
            let t = Instant::now();
            match sb.exec(ExecRequest::argv(["echo", "hello"]), Vec::new(), &mut Discard).await {
                Ok(r) if r.stdout == b"hello\n" => {}
                Ok(r) => {
                    failure =
                        Some(format!("unexpected output {:?}", String::from_utf8_lossy(&r.stdout)))
                }
                Err(e) => failure = Some(e.to_string()),
            }
            if i >= warmup.max(3) {
                samples.push(t.elapsed().as_secs_f64() * 1e3);
            }
            if failure.is_some() {
                break;
            }
        }
        let timings = sb.destroy().await?;
        if let Some(f) = failure {
            bail!("warm exec on {label} failed: {f}");
        }
        let s = summarize(&samples);
        t.summary(&format!("warm exec echo, live sandbox ({label})"), &s);
        warm.insert(label, json!({"summary": s, "cold_phases_ms": timings.to_json()}));
    }

    let targets = json!([
        {"promise": "cold echo median <= 1.5x raw crun run median", "value": ratios.get("crun_echo"), "limit": 1.5,
         "met": ratios.get("crun_echo").and_then(Value::as_f64).map(|r| r <= 1.5)},
        {"promise": "warm exec median < 2 ms", "value": warm.values().next().map(|w| w["summary"]["median"].clone()), "limit": 2.0,
         "met": warm.values().next().and_then(|w| w["summary"]["median"].as_f64()).map(|m| m < 2.0)},
    ]);
    let doc = json!({
        "config": {"iterations": iterations, "warmup": warmup, "warm_execs": warm_n, "runtimes": a.runtimes},
        "results": results,
        "ratios": ratios,
        "warm_exec": warm,
        "peers": peers,
        "targets": targets,
    });
    let tt = targets_table(targets.as_array().into_iter().flatten());
    let mut report = SuiteReport::new("cold", doc);
    for f in report_findings {
        report.finding(f);
    }
    report.tables = vec![t, tt];
    Ok(report)
}
