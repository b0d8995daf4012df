//! `hutch bench gateway`: the WebAssembly-vs-Docker gateway study on hutch. Starts `hutch serve
//! --gateway` as a child process and an upstream echo server, then drives every variant and
//! workload with wrk at each connection count, sampling the gateway's RSS and CPU (its reaped
//! children included). Also the gateway's cold start: spawn to the first HTTP 200 of a wasm
//! handler. Writes JSON, CSV and a Markdown table.
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::report::{print_targets, write_json};
use crate::stats::summarize;

#[derive(Debug, Args)]
pub struct GatewayArgs {
    /// Concurrent connections, one wrk run each (env BENCH_CONNECTIONS)
    #[arg(
        long,
        env = "BENCH_CONNECTIONS",
        value_delimiter = ',',
        default_value = "10,50,100,200,400,800"
    )]
    pub connections: Vec<u32>,
    /// Seconds per wrk run
    #[arg(long, default_value_t = 3)]
    pub duration: u64,
    /// Variants to drive (default: every one the gateway can run here)
    #[arg(long, value_delimiter = ',')]
    pub variants: Option<Vec<String>>,
    /// Workloads to drive
    #[arg(long, value_delimiter = ',', default_value = "hello,compute,state,proxy")]
    pub workloads: Vec<String>,
    /// SHA-256 rounds of the compute workload
    #[arg(long, default_value_t = 20_000)]
    pub iters: u64,
    /// The native handler (scripts/build-gateway-handler.sh, first line)
    #[arg(long, env = "HUTCH_GATEWAY_NATIVE")]
    pub native_handler: Option<PathBuf>,
    /// The wasm handler (scripts/build-gateway-handler.sh, second line)
    #[arg(long, env = "HUTCH_GATEWAY_WASM")]
    pub wasm_handler: Option<PathBuf>,
    /// Scheduling policy of wrk: `batch` (SCHED_BATCH, through chrt) or `normal`. wrk shares
    /// the machine's cores with the gateway; as a normal task every response it is woken by
    /// preempts the gateway thread that wrote it, which costs a slow server far more than a
    /// fast one. As a batch task it takes its turn instead. Same for every variant.
    #[arg(long, default_value = "batch", value_parser = ["batch", "normal"])]
    pub wrk_policy: String,
}

const ALL_VARIANTS: [&str; 5] = ["native", "process", "wasm", "wasmtime-cli", "container"];

/// The upstream of the proxy workload: a fixed 64-byte answer on a keep-alive HTTP/1.1 socket.
async fn upstream() -> Result<SocketAddr> {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = l.local_addr()?;
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let body = "upstream says hello to the hutch gateway benchmark, 64 bytes..\n";
                let resp =
                    format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}", body.len());
                let mut buf = vec![0u8; 8192];
                let mut have = Vec::new();
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => have.extend_from_slice(&buf[..n]),
                    }
                    while let Some(end) = have.windows(4).position(|w| w == b"\r\n\r\n") {
                        have.drain(..end + 4);
                        if s.write_all(resp.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    Ok(addr)
}

fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// One HTTP/1.1 GET on a fresh connection: status and body.
async fn http_get(addr: SocketAddr, path: &str) -> Result<(u16, String)> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n").as_bytes())
        .await?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Ok((status, body))
}

struct Child {
    child: tokio::process::Child,
    addr: SocketAddr,
}

impl Child {
    /// Stops the gateway the way an operator would: SIGTERM, on which it drains its requests
    /// (a container request still running cleans up its sandbox), then SIGKILL if it has not
    /// exited within 30 s. A SIGKILL alone leaves the bundles of in-flight container requests.
    async fn stop(&mut self) {
        if let Some(pid) = self.child.id() {
            if crate::peers::sigterm(pid)
                && tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await.is_ok()
            {
                return;
            }
        }
        let _ = self.child.kill().await;
    }
}

async fn start_gateway(
    a: &GatewayArgs,
    up: SocketAddr,
    container: bool,
) -> Result<(Child, Duration)> {
    let port = free_port()?;
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
    let exe = std::env::current_exe()?;
    let mut cmd = tokio::process::Command::new(exe);
    cmd.args(["serve", "--gateway", "--log-format", "text"])
        .arg("--gateway-listen")
        .arg(addr.to_string())
        .arg("--upstream")
        .arg(format!("http://{up}/"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(p) = &a.native_handler {
        cmd.arg("--native-handler").arg(p);
    }
    if let Some(p) = &a.wasm_handler {
        cmd.arg("--wasm-handler").arg(p);
    }
    if container {
        cmd.arg("--container");
    }
    let t = Instant::now();
    let mut child = cmd.spawn().context("starting hutch serve --gateway")?;
    // the gateway's log is drained (and kept in memory) so that a gateway that cannot start
    // says why instead of leaving the benchmark to time out
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    if let Some(mut err) = child.stderr.take() {
        let log = log.clone();
        tokio::spawn(async move {
            use tokio::io::AsyncReadExt;
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let mut l = log.lock().unwrap_or_else(|p| p.into_inner());
                if l.len() < 64 * 1024 {
                    l.extend_from_slice(&buf[..n]);
                }
            }
        });
    }
    let probe = if a.wasm_handler.is_some() { "/wasm/hello" } else { "/native/hello" };
    loop {
        if let Ok((200, _)) = http_get(addr, probe).await {
            return Ok((Child { child, addr }, t.elapsed()));
        }
        if let Ok(Some(st)) = child.try_wait() {
            tokio::time::sleep(Duration::from_millis(50)).await;
            let text = String::from_utf8_lossy(&log.lock().unwrap_or_else(|p| p.into_inner()))
                .trim()
                .to_string();
            bail!("hutch serve --gateway exited ({st}) before answering {probe}: {text}");
        }
        if t.elapsed() > Duration::from_secs(120) {
            bail!("the gateway did not answer {probe} within 120 s");
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// CPU seconds of a process and its reaped children, and the RSS of it and its live children.
fn sample(pid: u32) -> (f64, u64) {
    let tick = 100.0; // USER_HZ on Linux
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> =
        stat.rsplit_once(')').map(|(_, r)| r.split_whitespace().collect()).unwrap_or_default();
    let num = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // after the comm: state=0 ppid=1 ... utime=11 stime=12 cutime=13 cstime=14
    let cpu = (num(11) + num(12) + num(13) + num(14)) / tick;
    let mut rss = rss_kib(pid);
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Some(child) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            if descends_from(child, pid) {
                rss += rss_kib(child);
            }
        }
    }
    (cpu, rss)
}

fn ppid(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

fn descends_from(mut pid: u32, root: u32) -> bool {
    for _ in 0..16 {
        match ppid(pid) {
            Some(p) if p == root => return true,
            Some(p) if p > 1 => pid = p,
            _ => return false,
        }
    }
    false
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// What wrk reports.
#[derive(Debug, Default, Clone)]
struct Wrk {
    requests: u64,
    rps: f64,
    p50_ms: f64,
    p90_ms: f64,
    p99_ms: f64,
    errors: u64,
}

fn ms(v: &str) -> f64 {
    let (num, unit) = v.split_at(v.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(v.len()));
    let n: f64 = num.parse().unwrap_or(f64::NAN);
    match unit {
        "us" => n / 1e3,
        "ms" => n,
        "s" => n * 1e3,
        "m" => n * 60e3,
        _ => f64::NAN,
    }
}

fn parse_wrk(text: &str) -> Wrk {
    let mut w = Wrk::default();
    for line in text.lines().map(str::trim) {
        let parts: Vec<&str> = line.split_whitespace().collect();
        match parts.as_slice() {
            ["Requests/sec:", v] => w.rps = v.parse().unwrap_or(0.0),
            [n, "requests", "in", ..] => w.requests = n.parse().unwrap_or(0),
            ["50%", v] => w.p50_ms = ms(v),
            ["90%", v] => w.p90_ms = ms(v),
            ["99%", v] => w.p99_ms = ms(v),
            ["Non-2xx", "or", "3xx", "responses:", n] => w.errors += n.parse::<u64>().unwrap_or(0),
            ["Socket", "errors:", rest @ ..] => {
                w.errors += rest
                    .iter()
                    .filter_map(|t| t.trim_end_matches(',').parse::<u64>().ok())
                    .sum::<u64>()
            }
            _ => {}
        }
    }
    w
}

/// How wrk is started: `["wrk"]`, or under `chrt --batch 0` (see `GatewayArgs::wrk_policy`).
fn wrk_command(policy: &str) -> Result<Vec<&'static str>> {
    if policy == "normal" {
        return Ok(vec!["wrk"]);
    }
    if std::process::Command::new("chrt").arg("--version").output().is_err() {
        bail!("--wrk-policy batch needs chrt (util-linux); or pass --wrk-policy normal");
    }
    Ok(vec!["chrt", "--batch", "0", "wrk"])
}

async fn wrk(cmd: &[&str], url: &str, connections: u32, secs: u64) -> Result<Wrk> {
    let threads = connections.min(2);
    let out = tokio::process::Command::new(cmd[0])
        .args(&cmd[1..])
        .args(["--latency", "--timeout", "10s"])
        .arg(format!("-t{threads}"))
        .arg(format!("-c{connections}"))
        .arg(format!("-d{secs}s"))
        .arg(url)
        .output()
        .await
        .context("running wrk (apt-get install wrk)")?;
    if !out.status.success() {
        bail!("wrk failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(parse_wrk(&String::from_utf8_lossy(&out.stdout)))
}

pub async fn run(a: &GatewayArgs, iterations: usize, smoke: bool, out: &Path) -> Result<()> {
    if std::process::Command::new("wrk").arg("--version").output().is_err() {
        bail!("wrk is not installed: apt-get install wrk (scripts/deps.sh installs it)");
    }
    if a.native_handler.is_none() || a.wasm_handler.is_none() {
        bail!(
            "the gateway suite needs its handlers: build them with scripts/build-gateway-handler.sh \
             and pass them as --native-handler and --wasm-handler (or HUTCH_GATEWAY_NATIVE and \
             HUTCH_GATEWAY_WASM: the script prints the two paths in that order)"
        );
    }
    let wrk_cmd = wrk_command(&a.wrk_policy)?;
    // the container variant needs root
    let container = is_root();
    let up = upstream().await?;
    let (connections, secs) =
        if smoke { (vec![10], 1) } else { (a.connections.clone(), a.duration) };

    // cold start, a few times
    let mut cold_ms = Vec::new();
    for _ in 0..iterations.clamp(1, 5) {
        let (mut g, d) = start_gateway(a, up, false).await?;
        cold_ms.push(d.as_secs_f64() * 1e3);
        g.stop().await;
    }
    let cold = summarize(&cold_ms);
    eprintln!("gateway cold start (spawn to first 200): median {:.1} ms", cold.median);

    let (mut g, _) = start_gateway(a, up, container).await?;
    let pid = g.child.id().context("gateway pid")?;
    let (_, index) = http_get(g.addr, "/").await?;
    let index: Value = serde_json::from_str(&index).unwrap_or(Value::Null);
    let wanted: Vec<String> = match &a.variants {
        Some(v) => v.clone(),
        None => ALL_VARIANTS.iter().map(|s| s.to_string()).collect(),
    };
    let mut skipped = serde_json::Map::new();
    let mut variants = Vec::new();
    for v in &wanted {
        let info = &index["variants"][v];
        if info["available"].as_bool() == Some(true) {
            variants.push(v.clone());
        } else {
            let why = info["reason"].as_str().unwrap_or("unknown variant").to_string();
            eprintln!("gateway variant {v}: skipped: {why}");
            skipped.insert(v.clone(), json!(why));
        }
    }
    let mut rows = Vec::new();
    let total = variants.len() * a.workloads.len() * connections.len();
    let mut done = 0;
    let result = async {
        for w in &a.workloads {
            let query = if w == "compute" { format!("?iters={}", a.iters) } else { String::new() };
            for v in &variants {
                let path = format!("/{v}/{w}{query}");
                let (status, body) = http_get(g.addr, &path).await?;
                if status != 200 {
                    bail!("{path} answered {status}: {body}");
                }
                for &c in &connections {
                    done += 1;
                    eprint!("\r[{done}/{total}] {path} c={c}          ");
                    let (cpu0, _) = sample(pid);
                    let sampler = {
                        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
                        let s2 = stop.clone();
                        let h = tokio::task::spawn_blocking(move || {
                            let mut rss = Vec::new();
                            while !s2.load(std::sync::atomic::Ordering::Relaxed) {
                                rss.push(sample(pid).1);
                                std::thread::sleep(Duration::from_millis(200));
                            }
                            rss
                        });
                        (stop, h)
                    };
                    let r = wrk(&wrk_cmd, &format!("http://{}{path}", g.addr), c, secs).await;
                    sampler.0.store(true, std::sync::atomic::Ordering::Relaxed);
                    let rss = sampler.1.await.unwrap_or_default();
                    let r = r?;
                    let (cpu1, _) = sample(pid);
                    let cpu_ms = (cpu1 - cpu0) * 1e3;
                    let rss_max = rss.iter().copied().max().unwrap_or(0) as f64 / 1024.0;
                    let rss_mean = if rss.is_empty() { 0.0 } else { rss.iter().sum::<u64>() as f64 / rss.len() as f64 / 1024.0 };
                    rows.push(json!({
                        "variant": v, "workload": w, "connections": c,
                        "requests": r.requests, "rps": r.rps, "errors": r.errors,
                        "p50_ms": r.p50_ms, "p90_ms": r.p90_ms, "p99_ms": r.p99_ms,
                        "rss_max_mib": rss_max, "rss_mean_mib": rss_mean,
                        "cpu_ms_per_1k": if r.requests > 0 { cpu_ms / r.requests as f64 * 1000.0 } else { f64::NAN },
                    }));
                }
            }
        }
        eprintln!();
        anyhow::Ok(())
    }
    .await;
    g.stop().await;
    result?;

    // the study's two ratios: wasm against native at each connection count (both measured
    // back to back under the same load), summarised by the median; the peak ratio is shown too
    let mut targets = Vec::new();
    for (w, want, promise) in [
        ("hello", 0.5, "fresh-instance wasm hello throughput at least 50% of native (median over connection counts of the same-count ratio)"),
        ("compute", 0.9, "fresh-instance wasm compute throughput within 10% of native (median over connection counts of the same-count ratio)"),
    ] {
        let r = ratios(&rows, "wasm", "native", w);
        let value = format!("{:.0}% (peak {:.0}%)", r.median * 100.0, r.peak * 100.0);
        let met = if r.median.is_finite() { Value::Bool(r.median >= want) } else { Value::Null };
        targets.push(json!({"promise": promise, "value": value, "met": met, "per_connection_count": r.per_count}));
    }
    print_targets(&targets);
    let doc = json!({
        "suite": "gateway",
        "machine": crate::snapshot::machine(),
        "wrk_seconds": secs,
        "wrk_policy": a.wrk_policy,
        "compute_iters": a.iters,
        "cold_start_ms": cold,
        "skipped_variants": skipped,
        "rows": rows,
        "targets": targets,
    });
    let path = write_json(out, "gateway", &doc)?;
    std::fs::write(out.join("gateway-latest.csv"), csv(&rows))?;
    std::fs::write(out.join("gateway-latest.md"), markdown(&doc))?;
    eprintln!("results: {} (+ gateway-latest.csv, gateway-latest.md)", path.display());
    Ok(())
}

/// Throughput of `variant` against `baseline` on one workload.
#[derive(Debug)]
struct Ratios {
    /// `(connections, variant rps / baseline rps)` for every count both were measured at.
    per_count: Vec<(u64, f64)>,
    /// Median of `per_count`: what the promises are checked on. A flat curve (compute) has no
    /// real peak, and the peak of each side was then decided by its one luckiest run.
    median: f64,
    /// Peak variant rps over peak baseline rps, as the study reported it.
    peak: f64,
}

fn ratios(rows: &[Value], variant: &str, baseline: &str, workload: &str) -> Ratios {
    let rps = |v: &str| -> Vec<(u64, f64)> {
        rows.iter()
            .filter(|r| r["variant"] == v && r["workload"] == workload)
            .filter_map(|r| Some((r["connections"].as_u64()?, r["rps"].as_f64()?)))
            .collect()
    };
    let (x, n) = (rps(variant), rps(baseline));
    let per_count: Vec<(u64, f64)> = x
        .iter()
        .filter_map(|&(c, xr)| n.iter().find(|(nc, _)| *nc == c).map(|&(_, nr)| (c, xr / nr)))
        .filter(|(_, r)| r.is_finite())
        .collect();
    let peak_of = |v: &[(u64, f64)]| v.iter().map(|&(_, r)| r).fold(f64::NAN, f64::max);
    let median = summarize(&per_count.iter().map(|&(_, r)| r).collect::<Vec<_>>()).median;
    Ratios { per_count, median, peak: peak_of(&x) / peak_of(&n) }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

const COLUMNS: [&str; 12] = [
    "variant",
    "workload",
    "connections",
    "requests",
    "rps",
    "errors",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "rss_max_mib",
    "rss_mean_mib",
    "cpu_ms_per_1k",
];

fn cell(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() => format!("{f:.2}"),
            _ => n.to_string(),
        },
        other => other.to_string(),
    }
}

fn csv(rows: &[Value]) -> String {
    let mut s = COLUMNS.join(",") + "\n";
    for r in rows {
        let line: Vec<String> = COLUMNS.iter().map(|c| cell(&r[*c])).collect();
        s.push_str(&line.join(","));
        s.push('\n');
    }
    s
}

fn markdown(doc: &Value) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Gateway: throughput vs connections\n");
    let _ = writeln!(
        s,
        "Cold start (spawn to first 200 of a wasm handler): median {:.1} ms.\n",
        doc["cold_start_ms"]["median"].as_f64().unwrap_or(f64::NAN)
    );
    let _ = writeln!(
        s,
        "wrk ran {} s per row with scheduling policy `{}` (`--wrk-policy`).\n",
        doc["wrk_seconds"],
        doc["wrk_policy"].as_str().unwrap_or("normal")
    );
    for (v, why) in doc["skipped_variants"].as_object().into_iter().flatten() {
        let _ = writeln!(s, "- `{v}` not measured: {}", why.as_str().unwrap_or(""));
    }
    let _ = writeln!(s, "\n| variant | workload | conns | req/s | p50 ms | p99 ms | errors | RSS max MiB | CPU ms / 1k req |");
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in doc["rows"].as_array().into_iter().flatten() {
        let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.0} | {:.2} | {:.2} | {} | {:.1} | {:.1} |",
            cell(&r["variant"]),
            cell(&r["workload"]),
            r["connections"],
            f("rps"),
            f("p50_ms"),
            f("p99_ms"),
            r["errors"],
            f("rss_max_mib"),
            f("cpu_ms_per_1k")
        );
    }
    let _ = writeln!(s);
    for t in doc["targets"].as_array().into_iter().flatten() {
        let met = match t["met"].as_bool() {
            Some(true) => "met",
            Some(false) => "NOT met",
            None => "not measured",
        };
        let _ = writeln!(
            s,
            "- {}: {} ({met})",
            t["promise"].as_str().unwrap_or(""),
            t["value"].as_str().unwrap_or("")
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_pair_each_connection_count_with_its_baseline() {
        let row = |v: &str, c: u64, rps: f64| json!({"variant": v, "workload": "compute", "connections": c, "rps": rps});
        let rows = vec![
            row("native", 10, 450.0),
            row("native", 50, 460.0),
            row("native", 400, 516.0),
            row("wasm", 10, 441.0),
            row("wasm", 50, 460.0),
            row("wasm", 400, 437.0),
            row("wasm", 800, 450.0),
            json!({"variant": "native", "workload": "hello", "connections": 800, "rps": 1e5}),
        ];
        let r = ratios(&rows, "wasm", "native", "compute");
        // 800 has no native row on this workload: left out
        assert_eq!(r.per_count.iter().map(|&(c, _)| c).collect::<Vec<_>>(), vec![10, 50, 400]);
        assert!((r.median - 0.98).abs() < 1e-9, "{r:?}");
        // the peaks come from different counts: 460 / 516
        assert!((r.peak - 460.0 / 516.0).abs() < 1e-9, "{r:?}");
        let none = ratios(&rows, "wasm", "native", "proxy");
        assert!(none.per_count.is_empty() && none.median.is_nan());
    }

    #[test]
    fn wrk_output_is_parsed() {
        let text = "Running 1s test @ http://127.0.0.1:1/native/hello
  2 threads and 10 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   152.31us  100.12us   3.21ms   95.00%
  Latency Distribution
     50%  130.00us
     75%  160.00us
     90%  200.00us
     99%    1.20ms
  61234 requests in 1.00s, 7.55MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 4
Requests/sec:  61234.50
Transfer/sec:      7.55MB
";
        let w = parse_wrk(text);
        assert_eq!(w.requests, 61234);
        assert!((w.rps - 61234.5).abs() < 1e-6);
        assert!((w.p50_ms - 0.13).abs() < 1e-9 && (w.p99_ms - 1.2).abs() < 1e-9);
        assert_eq!(w.errors, 7);
    }
}
