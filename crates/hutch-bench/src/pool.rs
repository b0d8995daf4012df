//! `hutch bench pool`: the daemon's pool against the Ash sandbox-pool study.
//!
//! 1. Store operations on a real SQLite file (WAL), at 100 live + 10 cold and 1,000 live + 100
//!    cold sandboxes: per-call p50 of mark_running, mark_waiting, evict_one (at capacity),
//!    count, stats, sweep_idle of 5, best eviction candidate, idle list (Ash's operations).
//! 2. Over the API (a keep-alive HTTP connection on the daemon's Unix socket): a sandbox taken
//!    warm from a pool to the result of its first exec, against creating one cold and running
//!    the same exec, in the same run.
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::{json, Value};

use crate::http::{Conn, LocalDaemon};
use crate::report::{targets_table, SuiteReport, Table};
use crate::stats::summarize;

/// Ash's published p50s (ms) for the operations it names (docs/benchmarks/2026-02-18-pool-overhead.md).
const ASH_P50_MS: [(&str, f64); 2] = [("mark_running", 0.028), ("evict_one", 0.095)];

#[derive(Debug, Args)]
pub struct PoolArgs {
    /// Samples per store operation
    #[arg(long, default_value_t = 500)]
    pub rounds: usize,
}

async fn wait_warm(conn: &mut Conn, pool: &str, want: u64) -> Result<()> {
    let t = Instant::now();
    loop {
        let (_, p) = conn.call("GET", &format!("/v1/pools/{pool}"), None).await?;
        if p["members"]["warm"].as_u64().unwrap_or(0) >= want {
            return Ok(());
        }
        if t.elapsed() > Duration::from_secs(60) {
            bail!("pool {pool} did not refill: {p}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn first_exec(conn: &mut Conn, create: &Value) -> Result<(f64, String)> {
    let t = Instant::now();
    let (s, v) = conn.call("POST", "/v1/sandboxes", Some(create)).await?;
    if s != 201 {
        bail!("create failed ({s}): {v}");
    }
    let id = v["id"].as_str().context("id")?.to_string();
    let (s, r) = conn
        .call(
            "POST",
            &format!("/v1/sandboxes/{id}/exec"),
            Some(&json!({"command": ["echo", "hi"]})),
        )
        .await?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    if s != 200 || r["stdout"] != "hi\n" {
        bail!("first exec failed ({s}): {r}");
    }
    Ok((ms, id))
}

pub async fn run(a: &PoolArgs, ctx: &crate::Ctx) -> Result<SuiteReport> {
    let (iterations, warmup) = (ctx.iterations_or(20), ctx.warmup);
    let rounds = if iterations <= 1 { 20 } else { a.rounds };
    let mut st = Table::latency("store operations on real SQLite (Ash's pool-overhead shape)");
    let mut store_results = serde_json::Map::new();
    for (live, cold) in [(100usize, 10usize), (1000, 100)] {
        let ops = tokio::task::spawn_blocking(move || {
            hutch_store::bench::try_store_ops(live, cold, rounds)
        })
        .await?
        .map_err(|e| anyhow::anyhow!("store benchmark: {e}"))?;
        let mut m = serde_json::Map::new();
        for (op, samples) in ops {
            let s = summarize(&samples);
            st.summary(&format!("store {op} ({live} live + {cold} cold)"), &s);
            let ash = ASH_P50_MS.iter().find(|(n, _)| *n == op).map(|(_, v)| *v);
            m.insert(
                op.to_string(),
                json!({"summary": s, "ash_p50_ms": ash, "at_most_ash": ash.map(|a| s.median <= a)}),
            );
        }
        store_results.insert(format!("{live}_live_{cold}_cold"), Value::Object(m));
    }

    // The daemon, in this process, on a real Unix socket.
    let local = LocalDaemon::start("pool").await?;
    let sock = local.socket.clone();
    let mut at = Table::latency("over the daemon API (one keep-alive connection)");
    let at_ref = &mut at;
    let result = async {
        let mut conn = Conn::connect(&sock).await?;
        let (s, v) =
            conn.call("POST", "/v1/pools", Some(&json!({"name": "bench", "size": 2}))).await?;
        if s != 201 {
            bail!("pool create failed ({s}): {v}");
        }
        let (mut warm, mut cold) = (Vec::new(), Vec::new());
        for i in 0..warmup + iterations {
            wait_warm(&mut conn, "bench", 2).await?;
            let (w, wid) = first_exec(&mut conn, &json!({"pool": "bench"})).await?;
            let (c, cid) = first_exec(&mut conn, &json!({})).await?;
            for id in [wid, cid] {
                conn.call("DELETE", &format!("/v1/sandboxes/{id}"), None).await?;
            }
            if i >= warmup {
                warm.push(w);
                cold.push(c);
            }
        }
        let (ws, cs) = (summarize(&warm), summarize(&cold));
        at_ref.summary("api: pool acquire -> first exec result", &ws);
        at_ref.summary("api: cold create -> first exec result", &cs);
        // and the parts: acquire alone, and warm execs in a held sandbox
        wait_warm(&mut conn, "bench", 2).await?;
        let (mut acq, mut execs) = (Vec::new(), Vec::new());
        let t = Instant::now();
        let (_, v) = conn.call("POST", "/v1/sandboxes", Some(&json!({"pool": "bench"}))).await?;
        acq.push(t.elapsed().as_secs_f64() * 1e3);
        let id = v["id"].as_str().context("id")?.to_string();
        for i in 0..warmup.max(3) + iterations * 5 {
            let t = Instant::now();
            let (s, r) = conn
                .call(
                    "POST",
                    &format!("/v1/sandboxes/{id}/exec"),
                    Some(&json!({"command": ["echo", "hi"]})),
                )
                .await?;
            if s != 200 || r["stdout"] != "hi\n" {
                bail!("warm exec failed ({s}): {r}");
            }
            if i >= warmup.max(3) {
                execs.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        conn.call("DELETE", &format!("/v1/sandboxes/{id}"), None).await?;
        let es = summarize(&execs);
        at_ref.summary("api: warm exec in a held sandbox", &es);
        Ok::<_, anyhow::Error>(json!({
            "pool_acquire_to_first_exec": {"summary": ws, "samples_ms": warm},
            "cold_create_to_first_exec": {"summary": cs, "samples_ms": cold},
            "speedup": cs.median / ws.median,
            "warm_exec_held_sandbox": {"summary": es},
            "first_acquire_ms": acq,
        }))
    }
    .await;
    local.stop().await;
    let api = result?;
    let store_ok = ["100_live_10_cold", "1000_live_100_cold"].iter().all(|k| {
        ["mark_running", "evict_one"].iter().all(|op| store_results[*k][*op]["at_most_ash"] == true)
    });
    let targets = json!([
        {"promise": "pool acquire to first exec result, median over the API < 5 ms",
         "value": api["pool_acquire_to_first_exec"]["summary"]["median"], "limit": 5.0,
         "met": api["pool_acquire_to_first_exec"]["summary"]["median"].as_f64().map(|m| m < 5.0)},
        {"promise": "store mark_running and evict_one p50 no slower than Ash's (0.028 ms, 0.095 ms), at both sizes",
         "met": store_ok},
    ]);
    let tt = targets_table(targets.as_array().into_iter().flatten());
    let doc = json!({
        "config": {"iterations": iterations, "warmup": warmup, "store_rounds": rounds},
        "store_ops": store_results,
        "api": api,
        "targets": targets,
        "ash_reference_p50_ms": BTreeMap::from(ASH_P50_MS),
    });
    let mut report = SuiteReport::new("pool", doc);
    st.note("Ash's published p50s: mark_running 0.028 ms, evict_one 0.095 ms (its own hardware: a reference, not a same-run measurement).");
    report.tables = vec![st, at, tt];
    Ok(report)
}
