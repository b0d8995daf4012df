//! `hutch bench backends`: agentkernel's side-by-side table. Every hutch backend and every peer:
//! cold one-shot latency, warm exec latency, one-shot throughput, hutch's phase breakdown, and
//! isolation facts read by a probe inside each sandbox (not taken from documentation).
use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use clap::Args;
use hutch_backend_container::{ContainerBackend, ContainerConfig, RuntimeKind};
use hutch_backend_process::ProcessBackend;
use hutch_core::{Backend, SandboxSpec};
use serde_json::{json, Value};

use crate::peers::{Bwrap, Engine, Floor};
use crate::report::{ms, SuiteReport, Table};
use crate::stats::summarize;
use crate::subject::{batch, compare, exec_ms, hutch_bin, hutch_run_once};
use crate::Ctx;

pub const SUBJECTS: [&str; 8] = [
    "hutch:crun",
    "hutch:runc",
    "hutch:process",
    "crun-floor",
    "runc-floor",
    "bwrap",
    "docker",
    "podman",
];

#[derive(Debug, Args)]
pub struct BackendsArgs {
    /// What to measure: hutch:crun, hutch:runc, hutch:process, crun-floor, runc-floor, bwrap, docker, podman
    #[arg(
        long,
        default_value = "hutch:crun,hutch:runc,hutch:process,crun-floor,runc-floor,bwrap,docker,podman"
    )]
    pub subjects: String,
    /// Sandboxes in flight in the throughput test
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
}

const ECHO: [&str; 2] = ["echo", "hello"];
/// Reads isolation facts without writing anything (safe on the unisolated process backend).
const PROBE: &str = "echo uid=$(id -u); echo netifs=$(( $(wc -l < /proc/net/dev) - 2 )); \
echo seccomp=$(grep '^Seccomp:' /proc/self/status | cut -f2); \
echo nnp=$(grep '^NoNewPrivs:' /proc/self/status | cut -f2); \
echo root=$(grep ' / ' /proc/mounts | tail -n 1 | cut -d' ' -f4 | cut -d, -f1); \
echo pids=$(ls /proc | grep -c '^[0-9]'); \
echo memlimit=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max 2>/dev/null || echo -)";

enum Subj {
    Hutch { hutch: std::path::PathBuf, backend: &'static str, runtime: &'static str },
    Floor(RuntimeKind),
    Bwrap(Bwrap),
    Peer(Box<Engine>),
}

impl Subj {
    /// One cold one-shot of `argv`: wall ms, stdout, hutch's phases.
    async fn oneshot(
        &self,
        argv: &[&str],
        floor: Option<&Floor>,
    ) -> Result<(f64, String, BTreeMap<String, f64>)> {
        Ok(match self {
            Subj::Hutch { hutch, backend, runtime } => {
                let (ms, ph, out) = hutch_run_once(hutch, backend, runtime, argv).await?;
                (ms, out, ph)
            }
            Subj::Floor(_) => {
                let f = floor.context("the floor needs a bundle")?;
                let (ms, out) = f.run_once().await?;
                (ms, String::from_utf8_lossy(&out).into(), BTreeMap::new())
            }
            Subj::Bwrap(b) => {
                let (ms, out) = b.run_once(argv).await?;
                (ms, String::from_utf8_lossy(&out).into(), BTreeMap::new())
            }
            Subj::Peer(e) => {
                let (ms, out) = e.oneshot(argv).await?;
                (ms, String::from_utf8_lossy(&out).into(), BTreeMap::new())
            }
        })
    }
}

/// Host memory of one live sandbox: the resident set of every process in its memory cgroup
/// (read from the sandbox's own /proc/self/cgroup, which shows the host path: no cgroup
/// namespace on these engines) plus its host-side keeper (containerd-shim, conmon) if it has one.
fn rss_of_cgroup(self_cgroup: &str) -> Option<u64> {
    let path = self_cgroup.lines().find_map(|l| {
        let mut it = l.splitn(3, ':');
        let (_, ctrls, p) = (it.next()?, it.next()?, it.next()?);
        ctrls.split(',').any(|c| c == "memory").then(|| p.to_string())
    })?;
    let procs =
        std::fs::read_to_string(format!("/sys/fs/cgroup/memory{path}/cgroup.procs")).ok()?;
    let status =
        |pid: &str| std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |st: &str, k: &str| {
        st.lines().find_map(|l| l.strip_prefix(k)).map(|v| v.trim().to_string())
    };
    let kib = |st: &str| {
        field(st, "VmRSS:")
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0)
    };
    let mut total = 0;
    let mut keepers = std::collections::BTreeSet::new();
    for pid in procs.split_whitespace() {
        let st = status(pid);
        total += kib(&st);
        if let Some(pp) = field(&st, "PPid:") {
            let pst = status(&pp);
            let name = field(&pst, "Name:").unwrap_or_default();
            if name.starts_with("containerd-shim") || name == "conmon" {
                keepers.insert(pp);
            }
        }
    }
    for k in keepers {
        total += kib(&status(&k));
    }
    (total > 0).then_some(total)
}

fn probe_facts(out: &str) -> BTreeMap<String, String> {
    out.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

fn describe_mem(v: &str) -> String {
    match v.parse::<u64>() {
        Ok(b) if b >= 1 << 60 => "none".into(),
        Ok(b) => format!("{} MiB", b >> 20),
        Err(_) if v == "max" => "none".into(),
        Err(_) => v.into(),
    }
}

pub async fn run(a: &BackendsArgs, ctx: &Ctx) -> Result<SuiteReport> {
    let subjects = crate::knobs::names("--subjects", &a.subjects, &SUBJECTS)?;
    let n = ctx.iterations_or(20);
    let warmup = ctx.warmup;
    let tput_n = if ctx.smoke { 2 } else { (n * 2).max(8) };
    let mut report = SuiteReport::new("backends", Value::Null);
    let mut main = Table::new(
        "Backends side by side (agentkernel's shape): `echo hello`",
        &[
            "backend",
            "cold one-shot p50 ms",
            "cold p95 ms",
            "warm exec p50 ms",
            "one-shot throughput /s",
            "host RSS per live sandbox",
            "vs docker (cold / warm)",
        ],
    );
    let mut iso = Table::new(
        "Isolation, read by a probe inside each sandbox",
        &[
            "backend",
            "uid",
            "network interfaces",
            "seccomp",
            "no_new_privs",
            "root",
            "visible pids",
            "memory limit seen inside",
        ],
    );
    let mut phase_t = Table::new(
        "hutch phase breakdown of the cold one-shots, p50 ms",
        &["backend", "prepare", "runtime_create", "agent_ready", "exec", "destroy"],
    );
    let mut results = BTreeMap::new();
    let hutch = hutch_bin()?;
    crate::progress::start("backends", subjects.len());
    for name in &subjects {
        crate::progress::step(name);
        let subj = match name.as_str() {
            "hutch:crun" => {
                Subj::Hutch { hutch: hutch.clone(), backend: "container", runtime: "crun" }
            }
            "hutch:runc" => {
                Subj::Hutch { hutch: hutch.clone(), backend: "container", runtime: "runc" }
            }
            "hutch:process" => {
                Subj::Hutch { hutch: hutch.clone(), backend: "process", runtime: "crun" }
            }
            "crun-floor" => Subj::Floor(RuntimeKind::Crun),
            "runc-floor" => Subj::Floor(RuntimeKind::Runc),
            "bwrap" => match Bwrap::find() {
                Ok(b) => Subj::Bwrap(b),
                Err(why) => {
                    report.skip("bwrap", &why, false);
                    crate::progress::advance(1);
                    continue;
                }
            },
            _ => match Engine::start_named(name).await {
                Ok(e) => Subj::Peer(Box::new(e)),
                Err(why) => {
                    report.skip(name, &why, false);
                    crate::progress::advance(1);
                    continue;
                }
            },
        };
        let r = measure(&subj, name, n, warmup, tput_n, a.concurrency).await;
        if let Subj::Peer(mut e) = subj {
            e.stop().await;
        }
        match r {
            Ok(v) => {
                results.insert(name.clone(), v);
            }
            Err(e) if name.starts_with("hutch:") => {
                return Err(e.context(format!("backends: {name}")))
            }
            Err(e) => {
                report.skip(name, &format!("{e:#}"), true);
            }
        }
        crate::progress::advance(1);
    }
    crate::progress::finish();
    let med = |v: &Value, k: &str| v[k]["median"].as_f64();
    let docker = results.get("docker").cloned();
    for (name, v) in &results {
        let vs = match &docker {
            Some(d) if name != "docker" => {
                let c = match (med(v, "cold"), med(d, "cold")) {
                    (Some(a), Some(b)) => compare(a, b),
                    _ => "-".into(),
                };
                let w = match (med(v, "warm"), med(d, "warm")) {
                    (Some(a), Some(b)) => compare(a, b),
                    _ => "-".into(),
                };
                format!("{c} / {w}")
            }
            _ => "-".into(),
        };
        main.row(vec![
            name.clone(),
            med(v, "cold").map(ms).unwrap_or("-".into()),
            v["cold"]["p95"].as_f64().map(ms).unwrap_or("-".into()),
            med(v, "warm").map(ms).unwrap_or("- (no warm path)".into()),
            format!("{:.1}", v["throughput_per_s"].as_f64().unwrap_or(f64::NAN)),
            v["rss_kib_per_sandbox"]
                .as_u64()
                .map(|k| format!("{:.1} MiB", k as f64 / 1024.0))
                .unwrap_or("-".into()),
            vs,
        ]);
    }
    for (name, v) in &results {
        let f = &v["isolation"];
        let g = |k: &str| f[k].as_str().unwrap_or("?").to_string();
        iso.row(vec![
            name.clone(),
            g("uid"),
            g("netifs"),
            match g("seccomp").as_str() {
                "2" => "filter".into(),
                "0" => "off".into(),
                o => o.into(),
            },
            g("nnp"),
            g("root"),
            g("pids"),
            describe_mem(&g("memlimit")),
        ]);
        if let Some(ph) = v["phases"].as_object().filter(|p| !p.is_empty()) {
            let c = |k: &str| {
                ph.get(k).and_then(|s| s["median"].as_f64()).map(ms).unwrap_or("-".into())
            };
            phase_t.row(vec![
                name.clone(),
                c("prepare"),
                c("runtime_create"),
                c("agent_ready"),
                c("exec"),
                c("destroy"),
            ]);
        }
    }
    main.note(format!("cold one-shot: a new sandbox per `echo hello`, process start to exit (hutch: `hutch run`; floor: the OCI runtime running hutch's own bundle with the command in place of the agent; docker/podman: `run --rm` with isol8's limits); warm: `echo hello` again in one live sandbox (hutch: the library; docker/podman: `exec`); throughput: {tput_n} one-shots, {} in flight; host RSS: the resident memory of every process in the live sandbox's memory cgroup plus its host-side keeper (containerd-shim for docker, conmon for podman; hutch has none: the agent is the sandbox's only process), after the warm execs.", a.concurrency));
    iso.note("visible pids: processes the sandbox can see in /proc (a private pid namespace shows a handful); root: the root mount's first option. hutch:process is the unisolated baseline and shows the host. The memory limit is what the sandbox's own cgroup mount shows: \"-\" where no cgroup filesystem is mounted inside (hutch sets 512 MiB, 1 CPU and 64 pids on the host side; `hutch bench` does not read them from inside). bwrap runs as root here because the benchmark does (no user namespace requested).");
    for (name, v) in &results {
        if let (Some(d), true) = (
            &docker,
            name.starts_with("hutch:container") || name == "hutch:crun" || name == "hutch:runc",
        ) {
            if let (Some(a), Some(b)) = (med(v, "cold"), med(d, "cold")) {
                report.finding(format!(
                    "{name}: cold one-shot {} ms, {} than docker run --rm ({} ms)",
                    ms(a),
                    compare(a, b),
                    ms(b)
                ));
            }
        }
    }
    for peer in ["bwrap", "crun-floor"] {
        if let (Some(p), Some(h)) = (results.get(peer), results.get("hutch:crun")) {
            if let (Some(a), Some(b)) = (med(p, "cold"), med(h, "cold")) {
                if a < b {
                    report.finding(format!("{peer} beats hutch:crun cold: {} ms vs {} ms ({})", ms(a), ms(b), if peer == "bwrap" { "bubblewrap sets up namespaces and binds only: no cgroup limits, no seccomp filter" } else { "the floor is the OCI runtime alone: no agent, no teardown" }));
                }
            }
        }
    }
    report.doc = json!({"config": {"iterations": n, "warmup": warmup, "throughput_sandboxes": tput_n, "concurrency": a.concurrency}, "results": results});
    let mut vs_docker = Vec::new();
    if let Some(d) = &docker {
        for name in ["hutch:crun", "hutch:runc"] {
            if let Some(h) = results.get(name) {
                for k in ["cold", "warm"] {
                    if let (Some(dv), Some(hv)) = (med(d, k), med(h, k)) {
                        vs_docker.push(dv / hv);
                    }
                }
            }
        }
    }
    let targets = vec![crate::report::faster_than_docker(
        "container backend, cold one-shot and warm exec",
        &vs_docker,
    )];
    let tt = crate::report::targets_table(&targets);
    if let Some(obj) = report.doc.as_object_mut() {
        obj.insert("targets".into(), json!(targets));
    }
    report.tables = vec![main, phase_t, iso, tt];
    Ok(report)
}

async fn measure(
    s: &Subj,
    name: &str,
    n: usize,
    warmup: usize,
    tput_n: usize,
    conc: usize,
) -> Result<Value> {
    let floor = match s {
        Subj::Floor(rt) => Some(Floor::new(*rt, &ECHO, "backends")?),
        _ => None,
    };
    // the floor's container id is fixed per bundle: one bundle per concurrent run
    let floors: Vec<Floor> = match s {
        Subj::Floor(rt) => (0..tput_n)
            .map(|i| Floor::new(*rt, &ECHO, &format!("tput{i}")))
            .collect::<Result<_>>()?,
        _ => Vec::new(),
    };
    let (mut cold, mut phases) = (Vec::new(), Vec::new());
    for i in 0..warmup + n {
        let (ms, out, ph) = s.oneshot(&ECHO, floor.as_ref()).await?;
        if out != "hello\n" {
            bail!("{name} printed {out:?}");
        }
        if i >= warmup {
            cold.push(ms);
            phases.push(ph);
        }
    }
    let (res, wall) =
        batch(tput_n, conc, |i| s.oneshot(&ECHO, floors.get(i).or(floor.as_ref()))).await;
    let ok = res.iter().filter(|r| r.is_ok()).count();
    if let Some(Err(e)) = res.into_iter().find(|r| r.is_err()) {
        bail!("throughput run: {e:#}");
    }
    let probe = match &floor {
        Some(_) => {
            let f = Floor::new(
                match s {
                    Subj::Floor(rt) => *rt,
                    _ => RuntimeKind::Crun,
                },
                &["sh", "-c", PROBE],
                "probe",
            )?;
            String::from_utf8_lossy(&f.run_once().await?.1).to_string()
        }
        None => s.oneshot(&["sh", "-c", PROBE], None).await?.1,
    };
    // warm: a live sandbox; its host memory read while it idles
    let mut warm = Vec::new();
    let mut rss: Option<u64> = None;
    match s {
        Subj::Hutch { backend, runtime, .. } => {
            let b: Box<dyn Backend> = match *backend {
                "process" => Box::new(ProcessBackend::new()?),
                _ => Box::new(ContainerBackend::new(ContainerConfig::new(RuntimeKind::parse(
                    runtime,
                )?))?),
            };
            let mut sb = b.create(SandboxSpec::default()).await?;
            let r = async {
                sb.start().await?;
                for i in 0..warmup.max(3) + n * 5 {
                    let m = exec_ms(sb.as_ref(), &ECHO, b"hello\n").await?;
                    if i >= warmup.max(3) {
                        warm.push(m);
                    }
                }
                if *backend != "process" {
                    let r = sb
                        .exec(
                            hutch_core::ExecRequest::argv(["cat", "/proc/self/cgroup"]),
                            Vec::new(),
                            &mut hutch_core::Discard,
                        )
                        .await?;
                    rss = rss_of_cgroup(&String::from_utf8_lossy(&r.stdout));
                }
                Ok::<_, anyhow::Error>(())
            }
            .await;
            sb.destroy().await?;
            r?;
        }
        Subj::Peer(e) => {
            let (_, c) = e.run_detached().await?;
            let r = async {
                for i in 0..warmup.max(1) + n {
                    let (m, out) = e.exec(&c, &ECHO).await?;
                    anyhow::ensure!(
                        out == b"hello\n",
                        "exec printed {:?}",
                        String::from_utf8_lossy(&out)
                    );
                    if i >= warmup.max(1) {
                        warm.push(m);
                    }
                }
                let (_, cg) = e.exec(&c, &["cat", "/proc/self/cgroup"]).await?;
                rss = rss_of_cgroup(&String::from_utf8_lossy(&cg));
                Ok(())
            }
            .await;
            e.remove(&c).await?;
            r?;
        }
        _ => {}
    }
    let mut by: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for p in &phases {
        for (k, v) in p {
            by.entry(k.clone()).or_default().push(*v);
        }
    }
    let phases: BTreeMap<String, crate::stats::Summary> =
        by.into_iter().map(|(k, v)| (k, summarize(&v))).collect();
    Ok(json!({
        "cold": summarize(&cold),
        "warm": if warm.is_empty() { Value::Null } else { json!(summarize(&warm)) },
        "throughput_per_s": ok as f64 / (wall / 1e3),
        "phases": phases,
        "isolation": probe_facts(&probe),
        "rss_kib_per_sandbox": rss,
        "probe_output": probe,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rss_is_read_from_the_memory_cgroup_line() {
        assert_eq!(rss_of_cgroup("12:pids:/x\n4:cpu,cpuacct:/y\n"), None);
        // this test's own cgroup holds at least this process
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        if own
            .lines()
            .any(|l| l.split(':').nth(1).is_some_and(|c| c.split(',').any(|c| c == "memory")))
            && std::path::Path::new("/sys/fs/cgroup/memory").is_dir()
        {
            assert!(rss_of_cgroup(&own).is_some_and(|k| k > 0), "{own}");
        }
    }

    #[test]
    fn the_probe_reads_as_facts() {
        let f = probe_facts("uid=1000\nnetifs=1\nseccomp=2\nroot=ro\nmemlimit=536870912\n");
        assert_eq!(f["uid"], "1000");
        assert_eq!(f["root"], "ro");
        assert_eq!(describe_mem(&f["memlimit"]), "512 MiB");
        assert_eq!(describe_mem("9223372036854771712"), "none");
        assert_eq!(describe_mem("max"), "none");
    }

    #[tokio::test]
    async fn the_probe_runs_on_this_host() {
        let out = tokio::process::Command::new("sh").args(["-c", PROBE]).output().await.unwrap();
        let f = probe_facts(&String::from_utf8_lossy(&out.stdout));
        for k in ["uid", "netifs", "seccomp", "nnp", "root", "pids", "memlimit"] {
            assert!(f.get(k).is_some_and(|v| !v.is_empty()), "{k} missing: {f:?}");
        }
        assert!(f["root"] == "rw" || f["root"] == "ro", "{f:?}");
    }
}
