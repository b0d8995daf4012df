//! `hutch-agent`: runs as PID 1 inside a sandbox and serves the host over the agent protocol.
//!
//! Usage: `hutch-agent [--fd N] [--listen PATH] [--workdir DIR]`
//! - `--fd N`: serve the already-connected socket on file descriptor N (passed by the runtime).
//! - `--listen PATH`: also accept connections on a Unix socket (lets a restarted daemon reattach).
//! - `--workdir DIR`: default working directory of commands.
//!
//! Without `--listen` the agent exits (and so the sandbox stops) when its `--fd` connection closes,
//! so a host that dies cannot leave a sandbox running unnoticed.
mod contexts;
mod exec;
mod files;
mod reaper;
mod serve;
mod sys;

use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::Arc;

fn usage() -> ! {
    eprintln!("usage: hutch-agent [--fd N] [--listen PATH] [--workdir DIR]");
    std::process::exit(2)
}

fn main() {
    let mut fd: Option<i32> = None;
    let mut listen: Option<String> = None;
    let mut workdir = String::from("/");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--fd" => fd = args.next().and_then(|v| v.parse().ok()).or_else(|| usage()),
            "--listen" => listen = Some(args.next().unwrap_or_else(|| usage())),
            "--workdir" => workdir = args.next().unwrap_or_else(|| usage()),
            "--version" => {
                println!(
                    "hutch-agent {} (protocol {})",
                    env!("CARGO_PKG_VERSION"),
                    hutch_proto::PROTOCOL_VERSION
                );
                return;
            }
            _ => usage(),
        }
    }
    if fd.is_none() && listen.is_none() {
        usage();
    }
    sys::ignore_sigpipe();
    let state = Arc::new(serve::Agent::new(workdir, listen.as_ref().map(std::path::PathBuf::from)));
    reaper::start();

    if let Some(path) = listen {
        let _ = std::fs::remove_file(&path);
        match UnixListener::bind(&path) {
            Ok(l) => {
                let st = state.clone();
                std::thread::spawn(move || {
                    for conn in l.incoming().flatten() {
                        let st = st.clone();
                        std::thread::spawn(move || serve::serve(st, conn));
                    }
                });
            }
            Err(e) => {
                eprintln!("hutch-agent: cannot listen on {path}: {e}");
                std::process::exit(1);
            }
        }
        if let Some(fd) = fd {
            let stream = sys::stream_from_fd(fd);
            let st = state.clone();
            std::thread::spawn(move || serve::serve(st, stream));
        }
        loop {
            std::thread::park();
        }
    }
    let stream: UnixStream = match fd {
        Some(fd) => sys::stream_from_fd(fd),
        None => usage(),
    };
    serve::serve(state.clone(), stream);
    // The only connection is gone: stop everything we started.
    state.kill_everything();
}
