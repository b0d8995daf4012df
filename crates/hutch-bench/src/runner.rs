//! `hutch bench runner`: code contexts (resident interpreters), the secure-exec resident-runner
//! study on hutch. Warm snippet `1+1` in an existing context, in-process (library) and over the
//! daemon's API; cold context creation with its phases; and in the same sandbox and run, a fresh
//! `python3 -c` / `node -e` exec, the cost a runner saves.
use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use hutch_backend_container::{ContainerBackend, ContainerConfig, RuntimeKind};
use hutch_core::{Backend, Discard, ExecRequest, SandboxSpec};
use serde_json::{json, Value};

use crate::http::{Conn, LocalDaemon};
use crate::report::{print_targets, table_header, table_row, write_json};
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

pub async fn run(a: &RunnerArgs, iterations: usize, warmup: usize, out: &Path) -> Result<()> {
    let n = a.snippets.unwrap_or(iterations * 20).max(1);
    let warm_n = warmup.max(5);
    table_header();
    let backend = ContainerBackend::new(ContainerConfig::new(RuntimeKind::Crun))
        .context("container backend")?;
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
            table_row(&format!("{lang}: warm 1+1 in a context (in-process)"), &ws);
            table_row(&format!("{lang}: fresh {} in the same sandbox", argv[0]), &fs);
            table_row(&format!("{lang}: cold context create (total)"), &cs);
            table_row(&format!("{lang}:   of which interpreter start to ready"), &ss);
            eprintln!("{:<44} {:>6} {:>10.1}x", format!("  {lang}: fresh process / warm snippet"), "", fs.median / ws.median);
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
            table_row(&format!("{lang}: warm 1+1 over the daemon API"), &su);
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
    print_targets(&targets);
    let doc = json!({
        "suite": "runner",
        "machine": crate::snapshot::machine(),
        "config": {"iterations": iterations, "warmup": warmup, "snippets": n},
        "in_process": in_process,
        "over_api": api,
        "targets": targets,
        "reference": {"secure_exec_resident_runner_warm_ms": 1.27, "note": "secure-exec's own number from its benchmark on other hardware; not measured here"},
    });
    let path = write_json(out, "runner", &doc)?;
    eprintln!("results: {}", path.display());
    Ok(())
}
