//! `hutch bench cold`: N cold one-shot `hutch run` processes against the raw OCI runtime running
//! an equivalent bundle (same mounts, namespaces, seccomp and cgroup limits; the command instead
//! of the agent), interleaved so both see the same machine load. Then warm exec in one live
//! sandbox through the library, which is what a daemon-held sandbox costs per command.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use hutch_backend_container::{ContainerBackend, ContainerConfig, RuntimeKind};
use hutch_backend_process::ProcessBackend;
use hutch_core::{Backend, Discard, ExecRequest, SandboxSpec};
use serde_json::{json, Value};

use crate::report::{print_targets, table_header, table_row, write_json};
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

struct Floor {
    dir: PathBuf,
    id: String,
    backend: ContainerBackend,
}

impl Floor {
    /// Writes hutch's own bundle for a default sandbox, with `argv` as the container process.
    fn new(backend: &ContainerBackend, argv: &[&str], tag: &str) -> Result<Self> {
        let id = format!("hutch-floor-{}-{tag}", std::process::id());
        let dir = backend.state_dir().join("bench").join(&id);
        std::fs::create_dir_all(&dir)?;
        backend.write_bundle(&id, &SandboxSpec::default(), &dir)?;
        let cfg_path = dir.join("config.json");
        let mut cfg: Value = serde_json::from_slice(&std::fs::read(&cfg_path)?)?;
        cfg["process"]["args"] = json!(argv);
        cfg["process"]["cwd"] = json!("/workspace");
        std::fs::write(&cfg_path, serde_json::to_vec(&cfg)?)?;
        Ok(Self { dir, id, backend: backend.clone() })
    }

    async fn run_once(&self) -> Result<f64> {
        let mut cmd = self.backend.runtime().foreground_command(&self.id, &self.dir);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let t = Instant::now();
        let out = cmd.output().await.context("run the OCI runtime")?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        if !out.status.success() || out.stdout.is_empty() {
            bail!("floor run failed: {}", String::from_utf8_lossy(&out.stderr).trim());
        }
        Ok(ms)
    }
}

impl Drop for Floor {
    fn drop(&mut self) {
        self.backend.runtime().delete_blocking(&self.id);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One bubblewrap sandbox: new pid, net, ipc and uts namespaces, the host's /usr (and its
/// /bin, /lib* links) read-only, tmpfs /tmp, fresh /proc and /dev, as a plain peer would set it up.
async fn bwrap_once(bwrap: &Path, argv: &[&str]) -> Result<f64> {
    let mut cmd = tokio::process::Command::new(bwrap);
    cmd.args([
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--die-with-parent",
        "--ro-bind",
        "/usr",
        "/usr",
    ]);
    for d in ["bin", "sbin", "lib", "lib64"] {
        let host = Path::new("/").join(d);
        match std::fs::read_link(&host) {
            Ok(target) => {
                cmd.arg("--symlink").arg(target).arg(&host);
            }
            Err(_) if host.is_dir() => {
                cmd.arg("--ro-bind").arg(&host).arg(&host);
            }
            Err(_) => {}
        }
    }
    cmd.args(["--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev", "--chdir", "/tmp", "--"])
        .args(argv);
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let t = Instant::now();
    let out = cmd.output().await.context("run bwrap")?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    if !out.status.success() || out.stdout.is_empty() {
        bail!("bwrap run failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(ms)
}

/// One `hutch run --json` process; returns wall ms and the phase timings it reported.
async fn hutch_run_once(
    hutch: &Path,
    runtime: &str,
    argv: &[&str],
) -> Result<(f64, BTreeMap<String, f64>)> {
    let mut cmd = tokio::process::Command::new(hutch);
    cmd.args(["run", "--json", "--runtime", runtime, "--"]).args(argv);
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let t = Instant::now();
    let out = cmd.output().await.context("run hutch")?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    if !out.status.success() {
        bail!("hutch run failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim());
    }
    let j: Value = serde_json::from_slice(&out.stdout).context("parse hutch run --json")?;
    let phases = j["timings"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.trim_end_matches("_ms").to_string(), v.as_f64()?)))
                .collect()
        })
        .unwrap_or_default();
    Ok((ms, phases))
}

fn phase_summaries(samples: &[BTreeMap<String, f64>]) -> Value {
    let mut by: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for s in samples {
        for (k, v) in s {
            by.entry(k.clone()).or_default().push(*v);
        }
    }
    json!(by.into_iter().map(|(k, v)| (k, summarize(&v))).collect::<BTreeMap<_, _>>())
}

pub async fn run(a: &ColdArgs, iterations: usize, warmup: usize, out: &Path) -> Result<()> {
    let hutch = std::env::current_exe().context("locate the hutch binary")?;
    let mut results = Vec::new();
    let mut ratios = serde_json::Map::new();
    table_header();
    for rt in &a.runtimes {
        let kind = RuntimeKind::parse(rt)?;
        let backend = ContainerBackend::new(ContainerConfig::new(kind))
            .with_context(|| format!("container backend with {rt}"))?;
        for (name, argv) in COMMANDS {
            let floor = Floor::new(&backend, argv, name)?;
            let (mut floor_ms, mut hutch_ms, mut phases) = (Vec::new(), Vec::new(), Vec::new());
            for i in 0..warmup + iterations {
                // interleaved: both see the same load
                let f = floor.run_once().await?;
                let (h, p) = hutch_run_once(&hutch, rt, argv).await?;
                if i >= warmup {
                    floor_ms.push(f);
                    hutch_ms.push(h);
                    phases.push(p);
                }
            }
            let (fs, hs) = (summarize(&floor_ms), summarize(&hutch_ms));
            table_row(&format!("floor: {rt} run ({name})"), &fs);
            table_row(&format!("hutch run --runtime {rt} ({name})"), &hs);
            let ratio = hs.median / fs.median;
            eprintln!("{:<44} {:>6} {:>10.2}x", format!("  ratio hutch/{rt} ({name})"), "", ratio);
            ratios.insert(format!("{rt}_{name}"), json!(ratio));
            results.push(json!({"scenario": "floor", "runtime": rt, "command": name, "argv": argv, "summary": fs, "samples_ms": floor_ms}));
            results.push(json!({"scenario": "hutch_run", "runtime": rt, "command": name, "argv": argv, "summary": hs, "samples_ms": hutch_ms, "phases_ms": phase_summaries(&phases)}));
        }
    }

    // Peer: bubblewrap (no cgroup limits, no seccomp by default: a lighter isolation than
    // hutch's), the same commands on the host's /usr read-only. Measured when installed.
    let mut peers = serde_json::Map::new();
    match hutch_backend_container::runtime::which("bwrap") {
        Some(bwrap) => {
            for (name, argv) in COMMANDS {
                let mut samples = Vec::new();
                for i in 0..warmup + iterations {
                    let ms = bwrap_once(&bwrap, argv).await?;
                    if i >= warmup {
                        samples.push(ms);
                    }
                }
                let su = summarize(&samples);
                table_row(&format!("peer: bwrap ({name})"), &su);
                peers.insert(
                    format!("bwrap_{name}"),
                    json!({"summary": su, "samples_ms": samples, "argv": argv}),
                );
            }
        }
        None => {
            eprintln!("peer: bwrap is not installed (apt-get install bubblewrap); not measured");
            peers.insert("bwrap".into(), json!({"not_measured": "bubblewrap is not installed"}));
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
        table_row(&format!("warm exec echo, live sandbox ({label})"), &s);
        warm.insert(label, json!({"summary": s, "cold_phases_ms": timings.to_json()}));
    }

    let targets = json!([
        {"promise": "cold echo median <= 1.5x raw crun run median", "value": ratios.get("crun_echo"), "limit": 1.5,
         "met": ratios.get("crun_echo").and_then(Value::as_f64).map(|r| r <= 1.5)},
        {"promise": "warm exec median < 2 ms", "value": warm.values().next().map(|w| w["summary"]["median"].clone()), "limit": 2.0,
         "met": warm.values().next().and_then(|w| w["summary"]["median"].as_f64()).map(|m| m < 2.0)},
    ]);
    let doc = json!({
        "suite": "cold",
        "machine": crate::snapshot::machine(),
        "config": {"iterations": iterations, "warmup": warmup, "warm_execs": warm_n, "runtimes": a.runtimes},
        "results": results,
        "ratios": ratios,
        "warm_exec": warm,
        "peers": peers,
        "targets": targets,
    });
    print_targets(targets.as_array().into_iter().flatten());
    let path = write_json(out, "cold", &doc)?;
    eprintln!("results: {}", path.display());
    Ok(())
}
