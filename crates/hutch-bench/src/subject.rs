//! hutch's side of every comparison: a `hutch run` process, a sandbox through the library, and
//! a bounded-concurrency driver the suites share with the peers.
use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use futures_util::stream::{self, StreamExt};
use hutch_core::{Backend, Discard, ExecRequest, SandboxSpec};
use serde_json::Value;

use crate::stats::summarize;

/// The hutch binary running this benchmark (so `hutch run` is the same build).
pub fn hutch_bin() -> Result<PathBuf> {
    std::env::current_exe().context("locate the hutch binary")
}

/// hutch's container backend on crun, the default.
pub fn crun_backend() -> Result<hutch_backend_container::ContainerBackend> {
    use hutch_backend_container::{ContainerBackend, ContainerConfig, RuntimeKind};
    ContainerBackend::new(ContainerConfig::new(RuntimeKind::Crun))
        .context("container backend on crun")
}

/// One `hutch run --json` process; returns wall ms, the phase timings it reported and stdout.
pub async fn hutch_run_once(
    hutch: &Path,
    backend: &str,
    runtime: &str,
    argv: &[&str],
) -> Result<(f64, BTreeMap<String, f64>, String)> {
    let mut cmd = tokio::process::Command::new(hutch);
    cmd.args(["run", "--json", "--backend", backend, "--runtime", runtime, "--"]).args(argv);
    let (ms, out) = crate::peers::timed(&mut cmd).await.context("hutch run")?;
    let j: Value = serde_json::from_slice(&out.stdout).context("parse hutch run --json")?;
    let phases = j["timings"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.trim_end_matches("_ms").to_string(), v.as_f64()?)))
                .collect()
        })
        .unwrap_or_default();
    if j["exit_code"] != 0 {
        bail!("hutch run {argv:?}: {j}");
    }
    Ok((ms, phases, j["stdout"].as_str().unwrap_or_default().to_string()))
}

/// Runs `argv` in a live sandbox and checks it printed `want`; returns ms.
pub async fn exec_ms(sb: &dyn hutch_core::Sandbox, argv: &[&str], want: &[u8]) -> Result<f64> {
    let t = Instant::now();
    let r = sb.exec(ExecRequest::argv(argv.iter().copied()), Vec::new(), &mut Discard).await?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    if r.stdout != want {
        bail!(
            "{argv:?} printed {:?}, expected {:?}",
            String::from_utf8_lossy(&r.stdout),
            String::from_utf8_lossy(want)
        );
    }
    Ok(ms)
}

/// A cold sandbox through the library: create, start, first exec (cold), second exec (warm),
/// destroy. Phases are hutch's own (prepare, runtime_create, agent_ready, first_exec, destroy).
pub async fn library_cold_warm(
    backend: &dyn Backend,
    argv: &[&str],
    want: &[u8],
) -> Result<Sample> {
    let t = Instant::now();
    let mut sb = backend.create(SandboxSpec::default()).await?;
    let run = async {
        sb.start().await?;
        let first = exec_ms(sb.as_ref(), argv, want).await?;
        let cold = t.elapsed().as_secs_f64() * 1e3;
        let warm = exec_ms(sb.as_ref(), argv, want).await?;
        Ok::<_, anyhow::Error>((cold, warm, first))
    }
    .await;
    let timings = sb.destroy().await;
    let (cold, warm, first) = run?;
    let timings = timings?;
    let mut phases = BTreeMap::new();
    for (p, d) in timings.iter() {
        if p != hutch_core::Phase::Exec {
            phases.insert(p.name().to_string(), d.as_secs_f64() * 1e3);
        }
    }
    phases.insert("first_exec".into(), first);
    Ok(Sample { cold, warm: Some(warm), phases })
}

/// One sandbox's measurements.
#[derive(Debug, Clone, Default)]
pub struct Sample {
    pub cold: f64,
    pub warm: Option<f64>,
    pub phases: BTreeMap<String, f64>,
}

/// Runs `n` jobs, at most `concurrency` at a time; returns every result in completion order and
/// the wall time of the whole batch.
pub async fn batch<T, F, Fut>(n: usize, concurrency: usize, job: F) -> (Vec<Result<T>>, f64)
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let t = Instant::now();
    let out = stream::iter(0..n).map(job).buffer_unordered(concurrency.max(1)).collect().await;
    (out, t.elapsed().as_secs_f64() * 1e3)
}

/// Per-phase summaries of many samples.
pub fn phase_summaries(samples: &[Sample]) -> BTreeMap<String, crate::stats::Summary> {
    let mut by: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for s in samples {
        for (k, v) in &s.phases {
            by.entry(k.clone()).or_default().push(*v);
        }
    }
    by.into_iter().map(|(k, v)| (k, summarize(&v))).collect()
}

/// "3.2x faster" / "1.4x slower": how `a` compares with `b` (both medians).
pub fn compare(a: f64, b: f64) -> String {
    if a <= b {
        format!("{:.1}x faster", b / a)
    } else {
        format!("{:.1}x slower", a / b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_batch_keeps_its_concurrency_bound_and_every_result() {
        let live = std::sync::atomic::AtomicUsize::new(0);
        let peak = std::sync::atomic::AtomicUsize::new(0);
        let (res, _) = batch(10, 3, |i| {
            let (live, peak) = (&live, &peak);
            async move {
                let now = live.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                peak.fetch_max(now, std::sync::atomic::Ordering::SeqCst);
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                live.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                if i == 7 {
                    bail!("job 7 fails")
                } else {
                    Ok(i)
                }
            }
        })
        .await;
        assert_eq!(res.len(), 10);
        assert_eq!(res.iter().filter(|r| r.is_err()).count(), 1);
        assert_eq!(peak.load(std::sync::atomic::Ordering::SeqCst), 3);
    }

    #[test]
    fn comparisons_read_both_ways() {
        assert_eq!(compare(10.0, 35.0), "3.5x faster");
        assert_eq!(compare(20.0, 10.0), "2.0x slower");
    }
}
