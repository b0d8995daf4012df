//! `hutch bench runner`: code contexts (resident interpreters), the secure-exec resident-runner
//! study on hutch. Warm snippet `1+1` in an existing context, in-process (library) and over the
//! daemon's API; cold context creation with its phases; and in the same sandbox and run, a fresh
//! `python3 -c` / `node -e` exec, the cost a runner saves.
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use hutch_core::{Backend, Discard, ExecRequest, SandboxSpec};
use serde_json::{json, Value};

use crate::http::{Conn, LocalDaemon};
use crate::report::{ms, targets_table, SuiteReport, Table};
use crate::stats::summarize;

#[derive(Debug, Args)]
pub struct RunnerArgs {
    /// Warm snippets measured per language (default: 20 x iterations)
    #[arg(long)]
    pub snippets: Option<usize>,
}

const LANGS: [(&str, &[&str]); 2] = [
    ("python", &["python3", "-c", "print(1+1)"]),
    ("javascript", &["node", "-e", "console.log(1+1)"]),
];

pub async fn run(a: &RunnerArgs, ctx: &crate::Ctx) -> Result<SuiteReport> {
    let (iterations, warmup) = (ctx.iterations_or(20), ctx.warmup);
    let n = a.snippets.unwrap_or(iterations * 20).max(1);
    let warm_n = warmup.max(5);
    let mut t =
        Table::latency("code contexts in one sandbox (the secure-exec resident-runner scenario)");
    let t_ref = &mut t;
    let backend = crate::subject::crun_backend()?;
    let mut sb = backend.create(SandboxSpec::default()).await?;
    sb.start().await?;
    let mut in_process = serde_json::Map::new();
    let result = async {
        let c = sb.contexts()?;
        for (lang, argv) in LANGS {
            // cold context creation, a few times
            let (mut create_ms, mut startup_ms) = (Vec::new(), Vec::new());
            let mut ctx = None;
            for _ in 0..iterations.clamp(1, 10) {
                let t = Instant::now();
                let info = c.create_context(lang, None, Default::default()).await?;
                create_ms.push(t.elapsed().as_secs_f64() * 1e3);
                startup_ms.push(info.startup_us as f64 / 1e3);
                if let Some(old) = ctx.replace(info.context_id.clone()) {
                    c.delete_context(&old).await?;
                }
            }
            let ctx = ctx.context("a context")?;
            let mut warm = Vec::with_capacity(n);
            for i in 0..warm_n + n {
                let t = Instant::now();
                let o = c.run_code(&ctx, "1+1", Some(30_000), 1 << 20, &mut |_| {}).await?;
                let ms = t.elapsed().as_secs_f64() * 1e3;
                if o.text() != Some("2") {
                    bail!("{lang}: 1+1 gave {o:?}");
                }
                if i >= warm_n {
                    warm.push(ms);
                }
            }
            let mut fresh = Vec::new();
            for i in 0..warmup + iterations.max(3) {
                let t = Instant::now();
                let r = sb.exec(ExecRequest::argv(argv.iter().copied()), Vec::new(), &mut Discard).await?;
                let ms = t.elapsed().as_secs_f64() * 1e3;
                if r.stdout != b"2\n" {
                    bail!("{lang}: fresh exec printed {:?}", String::from_utf8_lossy(&r.stdout));
                }
                if i >= warmup {
                    fresh.push(ms);
                }
            }
            let (ws, fs, cs, ss) = (summarize(&warm), summarize(&fresh), summarize(&create_ms), summarize(&startup_ms));
            t_ref.summary(&format!("{lang}: warm 1+1 in a context (in-process)"), &ws);
            t_ref.summary(&format!("{lang}: fresh {} in the same sandbox", argv[0]), &fs);
            t_ref.summary(&format!("{lang}: cold context create (total)"), &cs);
            t_ref.summary(&format!("{lang}:   of which interpreter start to ready"), &ss);
            t_ref.note(format!("{lang}: fresh process / warm snippet {:.1}x", fs.median / ws.median));
            in_process.insert(lang.to_string(), json!({
                "warm_snippet": {"summary": ws, "samples_ms": warm},
                "fresh_exec": {"argv": argv, "summary": fs},
                "cold_create": {"total": cs, "phases": {"interpreter_start_to_ready": ss, "agent_and_transport": summarize(&create_ms.iter().zip(&startup_ms).map(|(t, s)| t - s).collect::<Vec<_>>())}},
                "ratio_fresh_over_warm": fs.median / ws.median,
            }));
        }
        Ok::<_, anyhow::Error>(())
    }
    .await;
    let _ = sb.destroy().await;
    result?;

    // Over the API: a daemon in this process on a real Unix socket, one keep-alive connection.
    let local = LocalDaemon::start("runner").await?;
    let sock = local.socket.clone();
    let mut at = Table::latency("code contexts over the daemon API (one keep-alive connection)");
    let at_ref = &mut at;
    let api = async {
        let mut conn = Conn::connect(&sock).await?;
        let (s, v) = conn
            .call("POST", "/v1/sandboxes", Some(&json!({"contexts": ["python", "javascript"]})))
            .await?;
        if s != 201 {
            bail!("create failed ({s}): {v}");
        }
        let id = v["id"].as_str().context("id")?.to_string();
        let mut res = serde_json::Map::new();
        for ctx in v["contexts"].as_array().context("contexts")? {
            let (cid, lang) = (
                ctx["context_id"].as_str().context("cid")?,
                ctx["language"].as_str().context("lang")?,
            );
            let path = format!("/v1/sandboxes/{id}/contexts/{cid}/run");
            let mut samples = Vec::with_capacity(n);
            for i in 0..warm_n + n {
                let t = Instant::now();
                let (s, r) = conn.call("POST", &path, Some(&json!({"code": "1+1"}))).await?;
                let ms = t.elapsed().as_secs_f64() * 1e3;
                let text = r["results"]
                    .as_array()
                    .and_then(|a| a.iter().find(|x| x["main"] == true))
                    .and_then(|x| x["data"]["text/plain"].as_str());
                if s != 200 || text != Some("2") {
                    bail!("{lang} over the API: ({s}) {r}");
                }
                if i >= warm_n {
                    samples.push(ms);
                }
            }
            let su = summarize(&samples);
            at_ref.summary(&format!("{lang}: warm 1+1 over the daemon API"), &su);
            res.insert(lang.to_string(), json!({"summary": su, "samples_ms": samples}));
        }
        conn.call("DELETE", &format!("/v1/sandboxes/{id}"), None).await?;
        Ok::<_, anyhow::Error>(Value::Object(res))
    }
    .await;
    local.stop().await;
    let api = api?;
    let median = |v: &Value| v["summary"]["median"].as_f64();
    let mut targets = Vec::new();
    for lang in ["python", "javascript"] {
        let inp = median(&in_process[lang]["warm_snippet"]);
        let over = median(&api[lang]);
        targets.push(json!({"promise": format!("{lang}: warm 1+1 in-process median <= 0.3 ms"), "value": inp, "limit": 0.3, "met": inp.map(|m| m <= 0.3)}));
        targets.push(json!({"promise": format!("{lang}: warm 1+1 over the daemon API median <= 1 ms"), "value": over, "limit": 1.0, "met": over.map(|m| m <= 1.0)}));
    }
    // The peer: secure-exec's resident runner (one live NodeRuntime, exec after exec)
    let mut report = SuiteReport::new("runner", Value::Null);
    let se = match crate::peers::secure_exec_prefix() {
        Ok(prefix) => match secure_exec_resident(&prefix, n).await {
            Ok(samples) => {
                let su = summarize(&samples);
                t.summary("peer: secure-exec, warm exec in one live NodeRuntime", &su);
                if let Some(h) = median(&in_process["javascript"]["warm_snippet"]) {
                    report.finding(format!(
                        "javascript warm snippet: hutch {} ms in-process is {} than secure-exec's resident runtime ({} ms, `console.log(1+1)` via exec)",
                        ms(h), crate::subject::compare(h, su.median), ms(su.median)
                    ));
                }
                json!({"summary": su, "samples_ms": samples})
            }
            Err(e) => {
                report.skip("secure-exec", &format!("{e:#}"), true);
                json!({"not_measured": format!("{e:#}")})
            }
        },
        Err(why) => {
            report.skip("secure-exec", &why, false);
            json!({"not_measured": why})
        }
    };
    let tt = targets_table(&targets);
    let doc = json!({
        "secure_exec_resident": se,
        "config": {"iterations": iterations, "warmup": warmup, "snippets": n},
        "in_process": in_process,
        "over_api": api,
        "targets": targets,
        "reference": {"secure_exec_resident_runner_warm_ms": 1.27, "note": "secure-exec's own number from its benchmark on other hardware (its sidecar-era resident runner)"},
    });
    report.doc = doc;
    report.tables = vec![t, at, tt];
    Ok(report)
}

/// secure-exec's warm path measured here: `n` execs in one live NodeRuntime.
async fn secure_exec_resident(prefix: &std::path::Path, n: usize) -> Result<Vec<f64>> {
    let script = crate::assets::secure_exec_harness()?;
    let cfg = json!({"resident": n, "code": "console.log(1+1)"});
    let mut cmd = tokio::process::Command::new("node");
    cmd.arg(script).arg(cfg.to_string()).env("HUTCH_BENCH_NPM_PREFIX", prefix);
    let (_, out) = crate::peers::timed(&mut cmd).await?;
    let mut v = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let j: Value =
            serde_json::from_str(line).with_context(|| format!("harness printed {line:?}"))?;
        if let Some(e) = j["error"].as_str() {
            bail!("secure-exec: {e}");
        }
        v.push(j["warm_ms"].as_f64().context("warm_ms")?);
    }
    if v.len() != n {
        bail!("secure-exec: {} of {n} samples", v.len());
    }
    Ok(v)
}
