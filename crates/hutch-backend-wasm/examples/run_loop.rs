//! Where the time of one short guest run goes: runs FILE (a module or component; a `.wat` file
//! is assembled first) N times through `run::run`, the path the gateway and `exec` take, and
//! prints the median, the CPU time per run and how often the run's future was polled (more than
//! once: it yielded to the runtime). Made for `perf record`; `hutch bench gateway` is the
//! benchmark.
//!
//!   cargo run --release -p hutch-backend-wasm --example run_loop -- N FILE [ARGS...]
use std::error::Error;
use std::future::Future;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Instant;

use hutch_backend_wasm::run::{self, GuestStdin, Invocation, RunEnd};
use hutch_backend_wasm::stdio::CappedOutput;
use hutch_backend_wasm::WasmEngine;

fn cpu_seconds() -> f64 {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes the struct it is given.
    let ru = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr());
        ru.assume_init()
    };
    let s = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    s(ru.ru_utime) + s(ru.ru_stime)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().ok_or("usage: run_loop N FILE [ARGS...]")?.parse()?;
    let file = args.next().ok_or("usage: run_loop N FILE [ARGS...]")?;
    let mut argv = vec![file.clone()];
    argv.extend(args);
    let engine = WasmEngine::shared()?;
    let prepared = if file.ends_with(".wat") {
        engine.prepare(&file, &wat::parse_file(&file)?)?
    } else {
        engine.prepare_file(file.as_ref())?
    };
    let mut times = Vec::with_capacity(n);
    let mut polls = 0usize;
    let cpu0 = cpu_seconds();
    let wall0 = Instant::now();
    for _ in 0..n {
        let out = CappedOutput::buffer(1 << 20);
        let t = Instant::now();
        let inv = Invocation {
            prepared: prepared.clone(),
            args: argv.clone(),
            env: Vec::new(),
            dirs: None,
            stdin: GuestStdin::Null,
            stdout: out.clone(),
            stderr: out.clone(),
            memory: Arc::new(AtomicU64::new(0)),
            memory_limit: 256 << 20,
        };
        let mut fut = std::pin::pin!(run::run(&engine, inv));
        let r = std::future::poll_fn(|cx| {
            polls += 1;
            fut.as_mut().poll(cx)
        })
        .await;
        times.push(t.elapsed().as_secs_f64());
        if r.end != RunEnd::Exited(0) {
            return Err(
                format!("{argv:?}: {:?}: {}", r.end, String::from_utf8_lossy(&out.take())).into()
            );
        }
    }
    let cpu = cpu_seconds() - cpu0;
    let wall = wall0.elapsed().as_secs_f64();
    times.sort_by(f64::total_cmp);
    println!(
        "{n} runs of {argv:?}: median {:.1} us, mean wall {:.1} us, CPU per run {:.1} us, polls per run {:.2}",
        times[n / 2] * 1e6,
        wall / n as f64 * 1e6,
        cpu / n as f64 * 1e6,
        polls as f64 / n as f64
    );
    Ok(())
}
