//! `hutch bench wasm`: the wasm backend's own costs, in-process. Instance acquisition from the
//! pooling allocator (a `Store` and a live instance of a prepared module: the Hyperlight seed's
//! "pool acquire"), a fresh Python instance running `print(1)` and a fresh JavaScript instance
//! running `console.log(1)` (whole exec through the backend, module already compiled), and in
//! the same run a container exec of the same commands for the ratio.
use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use hutch_backend_container::{ContainerBackend, ContainerConfig, RuntimeKind};
use hutch_backend_wasm::{guests, probe_module, run, WasmBackend, WasmConfig};
use hutch_core::{Backend, Discard, ExecRequest, Sandbox, SandboxSpec};
use serde_json::{json, Value};

use crate::report::{print_targets, table_header, table_row, write_json};
use crate::stats::{summarize, Summary};

#[derive(Debug, Args)]
pub struct WasmArgs {
    /// Instance acquisitions measured (default: 50 x iterations)
    #[arg(long)]
    pub acquisitions: Option<usize>,
}

const LANGS: [(&str, &[&str]); 2] =
    [("python", &["python3", "-c", "print(1)"]), ("javascript", &["node", "-e", "console.log(1)"])];

async fn timed_execs(sb: &dyn Sandbox, argv: &[&str], warmup: usize, n: usize) -> Result<Vec<f64>> {
    let mut v = Vec::with_capacity(n);
    for i in 0..warmup + n {
        let t = Instant::now();
        let r = sb.exec(ExecRequest::argv(argv.iter().copied()), Vec::new(), &mut Discard).await?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        if r.stdout != b"1\n" {
            bail!(
                "{argv:?} printed {:?} ({:?})",
                String::from_utf8_lossy(&r.stdout),
                String::from_utf8_lossy(&r.stderr)
            );
        }
        if i >= warmup {
            v.push(ms);
        }
    }
    Ok(v)
}

fn row(name: &str, s: &Summary) -> Value {
    table_row(name, s);
    json!({"scenario": name, "ms": s})
}

pub async fn run(
    a: &WasmArgs,
    iterations: usize,
    warmup: usize,
    smoke: bool,
    out: &Path,
) -> Result<()> {
    // a smoke run proves each step works; unoptimised wasmtime makes every instance slow
    let n_acq = if smoke { 2 } else { a.acquisitions.unwrap_or(iterations * 50).max(1) };
    let (n_wasm, n_container) =
        if smoke { (1, 1) } else { (iterations.max(1) * 20, iterations.max(1) * 10) };
    table_header();
    let backend = WasmBackend::new(WasmConfig::default()).context("wasm backend")?;
    let engine = backend.engine().clone();
    let mut rows = Vec::new();

    // instance acquisition: the smallest WASI command, then each language guest
    let probe = engine.prepare("probe", &probe_module()?)?;
    let mut acquire = serde_json::Map::new();
    let mut targets = Vec::new();
    let mut prepared = vec![("probe module", probe)];
    for g in guests::GUESTS {
        let p = guests::default_guest_dir().join(g.file);
        if !p.is_file() {
            bail!(
                "the {} guest is not built ({}): run scripts/build-wasm-guests.sh",
                g.name,
                p.display()
            );
        }
        let t = Instant::now();
        let pre = engine.prepare_file(&p)?;
        let load_ms = t.elapsed().as_secs_f64() * 1e3;
        rows.push(json!({"scenario": format!("{}: load compiled artefact from the disk cache (or compile)", g.name), "ms": load_ms}));
        prepared.push((g.name, pre));
    }
    for (name, pre) in &prepared {
        let mut us = Vec::with_capacity(n_acq);
        let skip = if smoke { 0 } else { warmup.max(5) };
        for i in 0..skip + n_acq {
            let d = run::time_acquire(&engine, pre).await.map_err(anyhow::Error::msg)?;
            if i >= skip {
                us.push(d.as_secs_f64() * 1e6);
            }
        }
        let s = summarize(&us);
        eprintln!(
            "{:<44} {:>6} {:>10.1} {:>10.1} {:>10.1}  (microseconds)",
            format!("acquire instance: {name}"),
            s.n,
            s.median,
            s.p90,
            s.min
        );
        acquire.insert(name.to_string(), json!(s));
    }
    let probe_us = acquire["probe module"]["median"].as_f64().unwrap_or(f64::NAN);
    targets.push(json!({
        "promise": "instance acquire from the pool: median under 10 us (in-process)",
        "value": format!("{probe_us:.1} us"),
        "met": probe_us < 10.0,
    }));

    // fresh instances through the backend, and the container backend in the same run
    let mut wasm_sb = backend.create(SandboxSpec::default()).await?;
    wasm_sb.start().await?;
    let container = ContainerBackend::new(ContainerConfig::new(RuntimeKind::Crun))
        .context("container backend")?;
    let mut c_sb = container.create(SandboxSpec::default()).await?;
    let measured = async {
        c_sb.start().await?;
        let mut fresh = serde_json::Map::new();
        for (lang, argv) in LANGS {
            let w = summarize(&timed_execs(&*wasm_sb, argv, warmup, n_wasm).await?);
            let c = summarize(&timed_execs(&*c_sb, argv, warmup, n_container).await?);
            rows.push(row(&format!("{lang}: fresh wasm instance, {}", argv.join(" ")), &w));
            rows.push(row(&format!("{lang}: container exec, {}", argv.join(" ")), &c));
            fresh.insert(lang.into(), json!({"wasm_ms": w, "container_ms": c, "container_over_wasm": c.median / w.median}));
        }
        anyhow::Ok(fresh)
    }
    .await;
    let _ = wasm_sb.destroy().await;
    let _ = c_sb.destroy().await;
    let fresh = measured?;
    let py = fresh["python"]["wasm_ms"]["median"].as_f64().unwrap_or(f64::NAN);
    targets.push(json!({
        "promise": "a fresh Python instance running print(1): median under 5 ms once the module is cached",
        "value": format!("{py:.2} ms"),
        "met": py < 5.0,
    }));
    print_targets(&targets);
    let doc = json!({
        "suite": "wasm",
        "machine": crate::snapshot::machine(),
        "allocator": engine.allocator,
        "acquire_us": acquire,
        "fresh": fresh,
        "rows": rows,
        "targets": targets,
    });
    let path = write_json(out, "wasm", &doc)?;
    eprintln!("results: {}", path.display());
    Ok(())
}
