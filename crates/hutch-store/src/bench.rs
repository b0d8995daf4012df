//! Latency of the store's hot-path operations, the way the daemon uses them: a WAL database in
//! a file, a realistic population, one call at a time.
//!
//! [`store_ops`] reproduces the sandbox-pool overhead benchmark of the Ash sandbox server (whose
//! p50s were 0.028 ms for markRunning and 0.095 ms for evictOne), so the two can be compared.
use std::collections::BTreeMap;
use std::time::Instant;

use crate::error::StoreError;
use crate::model::{now_ms, SandboxRow, SandboxState};
use crate::Store;

/// How long a sandbox must wait unused before `sweep_idle` stops it, in the benchmark.
const IDLE_MS: i64 = 3_600_000;
/// How many rows the `sweep_idle_5` sample makes idle and sweeps.
const SWEEP: usize = 5;
/// The smallest `live` population: enough waiting rows for `sweep_idle_5` and the rest.
const MIN_LIVE: usize = 3 * SWEEP;

/// Why a benchmark run failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("cannot create a temporary directory for the benchmark database")]
    TempDir(#[source] std::io::Error),
    #[error("store operation failed during the benchmark")]
    Store(#[from] StoreError),
    #[error("the benchmark's population drifted: {0}")]
    Drift(String),
}

/// Per-call latencies in milliseconds, `rounds` samples per operation, keyed by operation:
/// `mark_running`, `mark_waiting`, `evict_one`, `count`, `stats`, `sweep_idle_5`,
/// `best_eviction_candidate`, `idle_list`.
///
/// The database is a WAL file in a temporary directory holding `live` sandboxes spread evenly
/// over warm, waiting and running (at least 15) across four pools, plus `cold` cold ones. The
/// population is kept constant: each evicted row is put back, each swept row re-seeded.
///
/// Panics if the store fails; [`try_store_ops`] returns the error instead.
pub fn store_ops(live: usize, cold: usize, rounds: usize) -> BTreeMap<&'static str, Vec<f64>> {
    match try_store_ops(live, cold, rounds) {
        Ok(samples) => samples,
        Err(e) => panic!("store benchmark failed: {}", error_chain(&e)),
    }
}

/// [`store_ops`], returning failures.
pub fn try_store_ops(
    live: usize,
    cold: usize,
    rounds: usize,
) -> Result<BTreeMap<&'static str, Vec<f64>>, BenchError> {
    let dir = tempfile::tempdir().map_err(BenchError::TempDir)?;
    let store = Store::open_exclusive(dir.path().join("state.db"))?;
    let live = live.max(MIN_LIVE);
    let base = now_ms();

    // Seed: live rows round-robin over warm/waiting/running, oldest first; cold rows older
    // still, so eviction always has a cold candidate while there are any.
    let mut waiting = Vec::new();
    for i in 0..live {
        let state = [SandboxState::Warm, SandboxState::Waiting, SandboxState::Running][i % 3];
        let id = format!("live-{i}");
        if state == SandboxState::Waiting {
            waiting.push(id.clone());
        }
        store.insert_sandbox(&row(&id, state, Some(i % 4), base + to_i64(i)))?;
    }
    for j in 0..cold {
        store.insert_sandbox(&row(
            &format!("cold-{j}"),
            SandboxState::Cold,
            None,
            base - 1_000_000 + to_i64(j),
        ))?;
    }

    let mut samples: BTreeMap<&'static str, Vec<f64>> = BTreeMap::new();
    let mut record = |name: &'static str, ms: f64| samples.entry(name).or_default().push(ms);
    let mut now = base + to_i64(live);
    for round in 0..rounds {
        now += 10;
        let id = &waiting[round % waiting.len()];
        record("mark_running", time(|| store.mark_running(id, now))?);
        record("mark_waiting", time(|| store.mark_waiting(id, now + 1))?);

        record("count", time(|| store.count_live())?);
        record("stats", time(|| store.stats())?);
        record("best_eviction_candidate", time(|| store.best_eviction_candidate())?);

        let (ms, evicted) = timed(|| store.evict_one(now))?;
        record("evict_one", ms);
        let (id, state) = evicted.ok_or_else(|| BenchError::Drift("nothing to evict".into()))?;
        reseed(&store, &id, state, now)?;

        // Make SWEEP waiting rows idle, list and sweep them, then put them back.
        let idle: Vec<&String> =
            (0..SWEEP).map(|k| &waiting[(round * SWEEP + k) % waiting.len()]).collect();
        for id in &idle {
            store.touch(id, now - 2 * IDLE_MS)?;
        }
        let (ms, listed) = timed(|| store.idle_list(now - IDLE_MS))?;
        record("idle_list", ms);
        let (ms, swept) = timed(|| store.sweep_idle(now, IDLE_MS, SWEEP))?;
        record("sweep_idle_5", ms);
        if listed.len() != SWEEP || swept.len() != SWEEP {
            return Err(BenchError::Drift(format!(
                "{} idle listed and {} swept, expected {SWEEP}",
                listed.len(),
                swept.len()
            )));
        }
        for id in swept {
            reseed(&store, &id, SandboxState::Waiting, now)?;
        }
    }
    Ok(samples)
}

fn row(id: &str, state: SandboxState, pool: Option<usize>, t: i64) -> SandboxRow {
    let mut row = SandboxRow::new(id, state, "process", r#"{"image":"host"}"#, t);
    row.pool = pool.map(|p| format!("pool-{p}"));
    row.owner_key = Some("bench".to_owned());
    row
}

/// Puts a stopped row back as it was before, in `state`, last used at `now` (a stopped row
/// cannot change state, so it is deleted and inserted again).
fn reseed(store: &Store, id: &str, state: SandboxState, now: i64) -> Result<(), BenchError> {
    let mut row = store.get(id)?.ok_or_else(|| BenchError::Drift(format!("{id} vanished")))?;
    row.state = state;
    row.last_used_at = now;
    row.stopped_at = None;
    row.stop_reason = None;
    store.delete_row(id)?;
    store.insert_sandbox(&row)?;
    Ok(())
}

fn timed<T>(f: impl FnOnce() -> Result<T, StoreError>) -> Result<(f64, T), BenchError> {
    let start = Instant::now();
    let out = f()?;
    Ok((start.elapsed().as_secs_f64() * 1e3, out))
}

fn time<T>(f: impl FnOnce() -> Result<T, StoreError>) -> Result<f64, BenchError> {
    timed(f).map(|(ms, _)| ms)
}

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiny_run_samples_every_op() {
        let samples = store_ops(6, 2, 4);
        let names: Vec<_> = samples.keys().copied().collect();
        assert_eq!(
            names,
            [
                "best_eviction_candidate",
                "count",
                "evict_one",
                "idle_list",
                "mark_running",
                "mark_waiting",
                "stats",
                "sweep_idle_5"
            ]
        );
        for (name, v) in &samples {
            assert_eq!(v.len(), 4, "{name}");
            assert!(v.iter().all(|ms| ms.is_finite() && *ms >= 0.0), "{name}: {v:?}");
        }
    }

    #[test]
    fn runs_without_cold_rows() {
        let samples = store_ops(30, 0, 3);
        assert_eq!(samples["evict_one"].len(), 3);
    }
}
