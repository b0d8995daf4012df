//! Runs one guest to completion in a fresh `Store`: WASI wired to the exec's arguments,
//! environment, stdio and workspace, memory capped, the epoch yielding every tick so that the
//! caller can drop the run at a timeout or a kill.
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use wasmtime::{Store, Trap};
use wasmtime_wasi::cli::AsyncStdinStream;
use wasmtime_wasi::p2::pipe::MemoryInputPipe;
use wasmtime_wasi::{FsPerms, I32Exit, ResourceTable, WasiCtxBuilder};

use crate::engine::{Prepared, WasmEngine};
use crate::state::{MemoryLimiter, P1State, P2State};
use crate::stdio::CappedOutput;

/// Where the guest's stdin comes from.
pub enum GuestStdin {
    Null,
    Bytes(Vec<u8>),
    Stream(tokio::io::DuplexStream),
}

/// A sandbox's directories as one run sees them.
pub struct Dirs {
    /// Host directory of the workspace, preopened as `/workspace` (the only preopen: guests
    /// resolve relative paths against `PWD`, which names the working directory).
    pub workspace: PathBuf,
    pub cwd_guest: String,
}

/// Everything one run needs.
pub struct Invocation {
    pub prepared: Prepared,
    /// The guest's argv, `argv[0]` included.
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// The directories the guest sees; none for a gateway handler.
    pub dirs: Option<Dirs>,
    pub stdin: GuestStdin,
    pub stdout: CappedOutput,
    pub stderr: CappedOutput,
    /// Linear memory the sandbox may still commit, shared by its concurrent runs.
    pub memory: Arc<AtomicU64>,
    pub memory_limit: u64,
}

/// How a run ended on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunEnd {
    Exited(i32),
    /// A trap (unreachable, stack overflow, out-of-bounds access...) or a host error.
    Trapped(String),
}

#[derive(Debug, Clone)]
pub struct RunResult {
    pub end: RunEnd,
    /// The memory limit refused a growth during the run.
    pub memory_refused: bool,
}

fn wasi_builder(inv: &mut Invocation) -> Result<WasiCtxBuilder, String> {
    let mut b = WasiCtxBuilder::new();
    b.args(&inv.args).envs(&inv.env).stdout(inv.stdout.clone()).stderr(inv.stderr.clone());
    match std::mem::replace(&mut inv.stdin, GuestStdin::Null) {
        GuestStdin::Null => {}
        GuestStdin::Bytes(v) => {
            b.stdin(MemoryInputPipe::new(v));
        }
        GuestStdin::Stream(r) => {
            b.stdin(AsyncStdinStream::new(r));
        }
    }
    if let Some(d) = &inv.dirs {
        b.initial_cwd(&d.cwd_guest);
        b.preopened_dir(&d.workspace, "/workspace", FsPerms::ReadWrite)
            .map_err(|e| format!("cannot open the workspace: {e:#}"))?;
    }
    Ok(b)
}

/// The exit code of a finished `_start` / `wasi:cli/run`, or why it trapped.
fn end_of(r: wasmtime::Result<()>) -> RunEnd {
    match r {
        Ok(()) => RunEnd::Exited(0),
        Err(e) => {
            if let Some(exit) = e.downcast_ref::<I32Exit>() {
                RunEnd::Exited(exit.0)
            } else if let Some(trap) = e.downcast_ref::<Trap>() {
                RunEnd::Trapped(format!("wasm trap: {trap}"))
            } else {
                RunEnd::Trapped(format!("{e:#}"))
            }
        }
    }
}

/// Makes a store's guest yield to the async runtime at every epoch tick (where a timeout or a
/// kill can drop it). The first deadline is the next tick: a new store's deadline is epoch 0,
/// already passed, so without it every run yielded once on its first call, which on the gateway
/// cost a trip through the scheduler and a timer registration per request. Start functions
/// run at instantiation and need the deadline too.
pub fn arm_epoch<T>(store: &mut Store<T>) {
    store.set_epoch_deadline(1);
    store.epoch_deadline_async_yield_and_update(1);
}

/// Runs the guest. Cancel-safe: dropping the future drops the store and its instance.
pub async fn run(engine: &WasmEngine, mut inv: Invocation) -> RunResult {
    let limiter = MemoryLimiter::new(inv.memory.clone(), inv.memory_limit);
    let mut builder = match wasi_builder(&mut inv) {
        Ok(b) => b,
        Err(m) => return RunResult { end: RunEnd::Trapped(m), memory_refused: false },
    };
    match &inv.prepared {
        Prepared::Module(pre) => {
            let mut store =
                Store::new(engine.engine(), P1State { wasi: builder.build_p1(), limiter });
            store.limiter(|s| &mut s.limiter);
            arm_epoch(&mut store);
            let r = async {
                let instance = pre.instantiate_async(&mut store).await?;
                let start = instance.get_typed_func::<(), ()>(&mut store, "_start")?;
                start.call_async(&mut store, ()).await
            }
            .await;
            RunResult { end: end_of(r), memory_refused: store.data().limiter.refused }
        }
        Prepared::Component(pre) => {
            let state = P2State { ctx: builder.build(), table: ResourceTable::new(), limiter };
            let mut store = Store::new(engine.engine(), state);
            store.limiter(|s| &mut s.limiter);
            arm_epoch(&mut store);
            let r = async {
                let cmd = pre.instantiate_async(&mut store).await?;
                match cmd.wasi_cli_run().call_run(&mut store).await? {
                    Ok(()) => Ok(()),
                    Err(()) => Err(wasmtime::Error::new(I32Exit(1))),
                }
            }
            .await;
            RunResult { end: end_of(r), memory_refused: store.data().limiter.refused }
        }
    }
}

/// Acquires a fresh instance of `prepared` from the pool and drops it, without running it:
/// returns the time from creating the `Store` to a live instance (WASI context built before).
/// What `hutch bench wasm` reports as instance acquisition.
pub async fn time_acquire(
    engine: &WasmEngine,
    prepared: &Prepared,
) -> Result<std::time::Duration, String> {
    let used = Arc::new(AtomicU64::new(0));
    let limiter = MemoryLimiter::new(used, u64::MAX);
    let mut b = WasiCtxBuilder::new();
    match prepared {
        Prepared::Module(pre) => {
            let state = P1State { wasi: b.build_p1(), limiter };
            let t = std::time::Instant::now();
            let mut store = Store::new(engine.engine(), state);
            store.limiter(|s| &mut s.limiter);
            arm_epoch(&mut store);
            pre.instantiate_async(&mut store).await.map_err(|e| format!("{e:#}"))?;
            Ok(t.elapsed())
        }
        Prepared::Component(pre) => {
            let state = P2State { ctx: b.build(), table: ResourceTable::new(), limiter };
            let t = std::time::Instant::now();
            let mut store = Store::new(engine.engine(), state);
            store.limiter(|s| &mut s.limiter);
            arm_epoch(&mut store);
            let _instance =
                pre.instantiate_async(&mut store).await.map_err(|e| format!("{e:#}"))?;
            Ok(t.elapsed())
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;

    use super::*;
    use crate::engine::PoolSizes;

    /// A short run must not yield to the runtime before it ends: on the gateway each yield was
    /// a timer registration and a trip through the scheduler per request.
    #[test]
    fn a_short_run_finishes_on_its_first_poll() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pool = PoolSizes { instances: 4, memories: 4, tables: 4, table_elements: 1000 };
        let engine = WasmEngine::new(dir.path().to_path_buf(), pool).expect("engine");
        let prepared =
            engine.prepare("probe", &crate::probe_module().expect("probe")).expect("prepare");
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
        // An epoch tick landing inside a run makes it yield, rightly; that is rare (a run takes
        // microseconds, a tick comes every 10 ms), so one of three runs finishing on its first
        // poll is enough. Without the first deadline every run yields.
        let polls: Vec<u32> = (0..3)
            .map(|_| {
                let out = CappedOutput::buffer(1 << 10);
                let inv = Invocation {
                    prepared: prepared.clone(),
                    args: vec!["probe".into()],
                    env: Vec::new(),
                    dirs: None,
                    stdin: GuestStdin::Null,
                    stdout: out.clone(),
                    stderr: out,
                    memory: Arc::new(AtomicU64::new(0)),
                    memory_limit: 64 << 20,
                };
                rt.block_on(async {
                    let mut n = 0;
                    let mut fut = std::pin::pin!(run(&engine, inv));
                    let r = std::future::poll_fn(|cx| {
                        n += 1;
                        fut.as_mut().poll(cx)
                    })
                    .await;
                    assert_eq!(r.end, RunEnd::Exited(0), "{r:?}");
                    n
                })
            })
            .collect();
        assert!(polls.contains(&1), "every run yielded before it ended: polls {polls:?}");
    }
}
