//! Where the time of a fresh Python instance goes: runs `python3 ARGS...` (default
//! `-c print(1)`) N times, each in a new `Store` with a new instance from the pool, and prints
//! the median of each step. `--empty` runs a `wasi:cli/run` component that does nothing, the
//! engine's own cost. Made for `perf record`; `hutch bench wasm` is the benchmark.
//!
//!   cargo run --release -p hutch-backend-wasm --example fresh_instance -- [N] [--empty | ARGS...]
use std::error::Error;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

use hutch_backend_wasm::state::{MemoryLimiter, P2State};
use hutch_backend_wasm::stdio::CappedOutput;
use hutch_backend_wasm::{guests, Prepared, WasmEngine};
use wasmtime::Store;
use wasmtime_wasi::{ResourceTable, WasiCtxBuilder};

const EMPTY_COMMAND: &str = r#"(component
  (core module $m (func (export "run") (result i32) i32.const 0))
  (core instance $i (instantiate $m))
  (func $run (result (result)) (canon lift (core func $i "run")))
  (instance $run_instance (export "run" (func $run)))
  (export "wasi:cli/run@0.2.0" (instance $run_instance)))"#;

fn median_ms(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN) * 1e3
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1).peekable();
    let n: usize = match args.peek().and_then(|a| a.parse().ok()) {
        Some(n) => {
            args.next();
            n
        }
        None => 300,
    };
    let mut argv: Vec<String> = args.collect();
    let empty = argv.first().is_some_and(|a| a == "--empty");
    if argv.is_empty() || empty {
        argv = vec!["-c".into(), "print(1)".into()];
    }
    argv.insert(0, "python3".into());

    let engine = WasmEngine::shared()?;
    let prepared = if empty {
        engine.prepare("empty command", &wat::parse_str(EMPTY_COMMAND)?)?
    } else {
        engine.prepare_file(&guests::default_guest_dir().join("python.wasm"))?
    };
    let Prepared::Component(pre) = prepared else {
        return Err("python.wasm is not a component".into());
    };

    let mut steps: [Vec<f64>; 5] = Default::default();
    for _ in 0..n {
        let t0 = Instant::now();
        let out = CappedOutput::buffer(1 << 20);
        let mut b = WasiCtxBuilder::new();
        b.args(&argv).stdout(out.clone()).stderr(out.clone());
        let limiter = MemoryLimiter::new(Arc::new(AtomicU64::new(0)), 1 << 30);
        let state = P2State { ctx: b.build(), table: ResourceTable::new(), limiter };
        let mut store = Store::new(engine.engine(), state);
        store.limiter(|s| &mut s.limiter);
        hutch_backend_wasm::run::arm_epoch(&mut store);
        let t1 = Instant::now();
        let cmd = pre.instantiate_async(&mut store).await?;
        let t2 = Instant::now();
        let r =
            cmd.wasi_cli_run().call_run(&mut store).await.map_err(|e| match e
                .downcast_ref::<wasmtime_wasi::I32Exit>()
            {
                Some(exit) => format!(
                    "{argv:?} exited with status {}: {}",
                    exit.0,
                    String::from_utf8_lossy(&out.take())
                ),
                None => format!("{e:?}"),
            })?;
        let t3 = Instant::now();
        drop(store);
        let t4 = Instant::now();
        if r.is_err() {
            return Err(format!("{argv:?} failed: {}", String::from_utf8_lossy(&out.take())).into());
        }
        for (v, d) in steps.iter_mut().zip([t1 - t0, t2 - t1, t3 - t2, t4 - t3, t4 - t0]) {
            v.push(d.as_secs_f64());
        }
    }
    let [ctx, instantiate, run, drop_store, total] = steps.map(median_ms);
    let what = if empty { "empty wasi:cli/run component".into() } else { argv.join(" ") };
    println!(
        "{what}, {n} fresh instances, median ms: wasi context + store {ctx:.3}, \
         instantiate {instantiate:.3}, run {run:.3}, drop (slot reset) {drop_store:.3}, total {total:.3}"
    );
    Ok(())
}
