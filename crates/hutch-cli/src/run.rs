//! `hutch run`: one command in a fresh sandbox.
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use hutch_core::units::{parse_duration, parse_size};
use hutch_core::{
    ErrorKind, ExecOutcome, ExecRequest, ExecResult, HostCapacity, Image, Limits, OutputEvent,
    ProcessControl, Sandbox, SandboxError, SandboxSpec, StdinMode,
};
use tokio::io::AsyncReadExt;

use crate::backends::{self, BackendName, RuntimeName};
use crate::exit;

#[derive(Debug, Args)]
#[command(trailing_var_arg = true)]
pub struct RunArgs {
    /// Isolation backend
    #[arg(long, value_enum, default_value = "container")]
    pub backend: BackendName,
    /// OCI runtime for the container backend
    #[arg(long, value_enum, default_value = "crun")]
    pub runtime: RuntimeName,
    /// Image: `host` (the host's /usr read-only with a minimal /etc)
    #[arg(long, default_value = "host", conflicts_with = "rootfs")]
    pub image: String,
    /// A directory holding a root filesystem to use instead of an image
    #[arg(long)]
    pub rootfs: Option<PathBuf>,
    /// Memory limit (e.g. 512m, 1g)
    #[arg(long, default_value = "512m")]
    pub memory: String,
    /// CPU limit in CPUs (e.g. 0.5, 1, 2)
    #[arg(long, default_value_t = 1.0)]
    pub cpus: f64,
    /// Maximum number of processes and threads
    #[arg(long, default_value_t = 64)]
    pub pids: u64,
    /// Wall-clock limit of the command (e.g. 30s, 500ms, 2m)
    #[arg(long, default_value = "30s")]
    pub timeout: String,
    /// Output kept per stream before it is cut with a marker
    #[arg(long, default_value = "1m")]
    pub output_limit: String,
    /// Size of the tmpfs workspace (and /tmp)
    #[arg(long, default_value = "256m")]
    pub workspace_size: String,
    /// Environment variable for the command, KEY=VALUE (repeatable)
    #[arg(short, long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// Run CMD as one shell string with /bin/sh -c
    #[arg(long)]
    pub shell: bool,
    /// Print one JSON object (stdout, stderr, exit code, phase timings) instead of live output
    #[arg(long)]
    pub json: bool,
    /// Print the phase timings to stderr at the end
    #[arg(long)]
    pub timings: bool,
    /// The command and its arguments
    #[arg(required = true, value_name = "CMD")]
    pub cmd: Vec<String>,
}

fn fail(code: u8, msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("hutch: {msg}");
    ExitCode::from(code)
}

fn code_for(e: &SandboxError) -> u8 {
    match e.kind() {
        ErrorKind::InvalidInput => exit::USAGE,
        ErrorKind::NotFound => exit::NOT_FOUND,
        _ => exit::HUTCH,
    }
}

/// Turns the flags into a spec; errors are one line naming the flag and the fix.
pub fn spec_from(a: &RunArgs) -> Result<SandboxSpec, String> {
    let image = match (&a.rootfs, a.image.as_str()) {
        (Some(p), _) => Image::Rootfs(p.clone()),
        (None, "host") => Image::Host,
        (None, other) => {
            return Err(format!("unknown image {other:?}: use --image host or --rootfs DIR"))
        }
    };
    let limits = Limits {
        memory_bytes: parse_size(&a.memory).map_err(|e| format!("--memory: {e}"))?,
        cpus: a.cpus,
        pids: a.pids,
        timeout_ms: parse_duration(&a.timeout).map_err(|e| format!("--timeout: {e}"))?.as_millis()
            as u64,
        output_bytes: parse_size(&a.output_limit).map_err(|e| format!("--output-limit: {e}"))?,
        workspace_bytes: parse_size(&a.workspace_size)
            .map_err(|e| format!("--workspace-size: {e}"))?,
    };
    let mut spec = SandboxSpec { image, limits, ..Default::default() };
    for kv in &a.env {
        let (k, v) = kv.split_once('=').ok_or_else(|| format!("--env {kv:?}: use KEY=VALUE"))?;
        spec.env.insert(k.to_string(), v.to_string());
    }
    Ok(spec)
}

pub async fn run(a: RunArgs) -> ExitCode {
    let spec = match spec_from(&a) {
        Ok(s) => s,
        Err(m) => return fail(exit::USAGE, m),
    };
    if let Err(e) = spec.validate(HostCapacity::probe()) {
        return fail(code_for(&e), e);
    }
    let backend = match backends::make(a.backend, a.runtime).await {
        Ok(b) => b,
        Err(e) => return fail(code_for(&e), e),
    };
    let mut sb = match backend.create(spec).await {
        Ok(s) => s,
        Err(e) => return fail(code_for(&e), e),
    };
    let outcome = run_in(&mut *sb, &a).await;
    let destroyed = sb.destroy().await;
    let timings = match &destroyed {
        Ok(t) => t.clone(),
        Err(_) => Default::default(),
    };
    let res = match outcome {
        Ok(r) => r,
        Err(e) => {
            if let Err(d) = destroyed {
                eprintln!("hutch: cleanup also failed: {d}");
            }
            return fail(code_for(&e), e);
        }
    };
    if let Err(e) = destroyed {
        eprintln!("hutch: warning: cleanup failed: {e}");
    }
    if a.json {
        let mut j = serde_json::to_value(&res).unwrap_or_default();
        j["backend"] = serde_json::Value::String(backend.name());
        j["outcome"] = serde_json::Value::String(res.outcome().to_string());
        j["timings"] = timings.to_json();
        println!("{j}");
    } else {
        match res.outcome() {
            ExecOutcome::TimedOut => eprintln!(
                "hutch: command timed out after {}; the process tree was killed",
                a.timeout
            ),
            ExecOutcome::OutOfMemory => {
                eprintln!("hutch: command ran out of memory (limit {}) and was killed", a.memory)
            }
            _ => {}
        }
    }
    if a.timings {
        eprintln!("hutch: timings: {}", timings.human());
    }
    ExitCode::from(res.shell_code().clamp(0, 255) as u8)
}

/// `hutch run --backend wasm -- ./app.wasm`: the module is a file of the user's on the host;
/// it is copied into the workspace, the only place a wasm sandbox runs modules from.
async fn upload_host_module(sb: &dyn Sandbox, cmd: &mut [String]) -> Result<(), SandboxError> {
    let Some(first) = cmd.first_mut() else { return Ok(()) };
    let host = std::path::Path::new(first.as_str());
    if !first.ends_with(".wasm") || first.starts_with("/workspace/") || !host.is_file() {
        return Ok(());
    }
    let data = std::fs::read(host)
        .map_err(|e| SandboxError::io(format!("cannot read {}", host.display()), e))?;
    let name = host.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let guest = format!("/workspace/{name}");
    sb.write_file(&guest, &data, Some(0o644)).await?;
    *first = guest;
    Ok(())
}

async fn run_in(sb: &mut dyn Sandbox, a: &RunArgs) -> Result<ExecResult, SandboxError> {
    sb.start().await?;
    let mut cmd = a.cmd.clone();
    if a.backend == BackendName::Wasm && !a.shell {
        upload_host_module(sb, &mut cmd).await?;
    }
    let mut req = if a.shell { ExecRequest::shell(cmd.join(" ")) } else { ExecRequest::argv(cmd) };
    let stream_stdin = !std::io::stdin().is_terminal();
    req.stdin = if stream_stdin { StdinMode::Stream } else { StdinMode::Null };
    let mut p = sb.spawn(req, Vec::new()).await?;
    let feeder = stream_stdin.then(|| tokio::spawn(forward_stdin(p.control())));
    let mut res = ExecResult::default();
    let mut out = std::io::stdout().lock();
    let mut err = std::io::stderr().lock();
    let status = loop {
        tokio::select! {
            ev = p.next_event() => match ev? {
                OutputEvent::Stdout(d) => {
                    if !a.json {
                        let _ = out.write_all(&d);
                        let _ = out.flush();
                    }
                    res.stdout.extend_from_slice(&d);
                }
                OutputEvent::Stderr(d) => {
                    if !a.json {
                        let _ = err.write_all(&d);
                        let _ = err.flush();
                    }
                    res.stderr.extend_from_slice(&d);
                }
                OutputEvent::Exited(st) => break st,
            },
            _ = tokio::signal::ctrl_c() => {
                let _ = p.control().signal(libc::SIGKILL).await;
            }
        }
    };
    if let Some(f) = feeder {
        f.abort();
    }
    res.status = status;
    Ok(res)
}

async fn forward_stdin(ctl: Arc<dyn ProcessControl>) {
    let mut stdin = tokio::io::stdin();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match stdin.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if ctl.write_stdin(&buf[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
    let _ = ctl.close_stdin().await;
}
