//! `hutch bench`: benchmarks that measure hutch against a baseline in the same run and write
//! JSON with a snapshot of the machine. Numbers are medians and ratios; nothing here asserts a
//! timing (the promises live in docs/SPECIFICATION.md and are checked by reading the results).
#![forbid(unsafe_code)]

mod cold;
mod gateway;
mod http;
mod pool;
mod report;
mod runner;
mod snapshot;
pub mod stats;
mod wasm;

use std::path::PathBuf;

use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub suite: Suite,
    /// Measured iterations per scenario (env BENCH_ITERATIONS)
    #[arg(long, global = true, env = "BENCH_ITERATIONS")]
    pub iterations: Option<usize>,
    /// Unmeasured warm-up iterations per scenario (env BENCH_WARMUP)
    #[arg(long, global = true, env = "BENCH_WARMUP", default_value_t = 2)]
    pub warmup: usize,
    /// Directory for the JSON results
    #[arg(long, global = true, default_value = "bench-results")]
    pub out: PathBuf,
    /// One iteration of everything: checks that each suite runs at all, not how fast
    #[arg(long, global = true)]
    pub smoke: bool,
}

#[derive(Debug, Subcommand)]
pub enum Suite {
    /// Cold one-shot `hutch run` against the raw OCI runtime floor, plus warm exec in one live sandbox
    Cold(cold::ColdArgs),
    /// The daemon's pool: store operations (vs. the Ash pool) and pool acquire to first exec over the API
    Pool(pool::PoolArgs),
    /// Code contexts: warm snippets in-process and over the API, cold context creation, fresh exec
    Runner(runner::RunnerArgs),
    /// The wasm backend: instance acquisition from the pool, fresh Python/JavaScript instances vs container exec
    Wasm(wasm::WasmArgs),
    /// HTTP gateway with wrk: native, process, wasm, wasmtime CLI and container handlers per request
    Gateway(gateway::GatewayArgs),
}

pub async fn main(a: BenchArgs) -> anyhow::Result<()> {
    let iterations = if a.smoke { 1 } else { a.iterations.unwrap_or(20) };
    let warmup = if a.smoke { 0 } else { a.warmup };
    match &a.suite {
        Suite::Cold(c) => cold::run(c, iterations, warmup, &a.out).await,
        Suite::Pool(p) => pool::run(p, iterations, warmup, &a.out).await,
        Suite::Runner(r) => runner::run(r, iterations, warmup, &a.out).await,
        Suite::Wasm(w) => wasm::run(w, iterations, warmup, a.smoke, &a.out).await,
        Suite::Gateway(g) => gateway::run(g, iterations, a.smoke, &a.out).await,
    }
}
