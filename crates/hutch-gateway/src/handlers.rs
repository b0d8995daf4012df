//! Running one request's handler in the variant the path asked for.
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use hutch_backend_container::{ContainerBackend, ContainerConfig, RuntimeKind};
use hutch_backend_wasm::run::{self, GuestStdin, Invocation, RunEnd};
use hutch_backend_wasm::stdio::CappedOutput;
use hutch_backend_wasm::Prepared;
use hutch_core::{Backend, Discard, ExecRequest, Sandbox, SandboxSpec, StdinMode};
use hutch_gateway_handler::{iters_from_query, Request, MAX_ITERS};
use tokio::io::AsyncWriteExt;

use crate::{Gateway, GatewayError};

/// Where the handler binary lives inside the container sandbox.
const CONTAINER_HANDLER: &str = "/workspace/hutch-gateway-handler";
/// Stderr kept from a failing handler for the error message.
const STDERR_KEPT: u64 = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    Native,
    Process,
    Wasm,
    WasmtimeCli,
    Container,
}

const WORKLOADS: [&str; 4] = ["hello", "compute", "state", "proxy"];

impl Variant {
    pub const ALL: [Variant; 5] = [
        Variant::Native,
        Variant::Process,
        Variant::Wasm,
        Variant::WasmtimeCli,
        Variant::Container,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Variant::Native => "native",
            Variant::Process => "process",
            Variant::Wasm => "wasm",
            Variant::WasmtimeCli => "wasmtime-cli",
            Variant::Container => "container",
        }
    }

    pub fn parse(s: &str) -> Option<Variant> {
        Variant::ALL.into_iter().find(|v| v.as_str() == s)
    }

    pub fn workload_is_builtin(name: &str) -> bool {
        WORKLOADS.contains(&name)
    }
}

/// Why a variant cannot answer here, or `None` when it can.
pub(crate) fn unavailable(gw: &Gateway, v: Variant) -> Option<String> {
    match v {
        Variant::Native => None,
        Variant::Process => gw
            .config
            .native_handler
            .is_none()
            .then(|| "no native handler configured (--native-handler)".into()),
        Variant::Wasm => None,
        Variant::WasmtimeCli => {
            if gw.config.wasm_handler.is_none() {
                Some("no wasm handler configured (--wasm-handler)".into())
            } else if gw.wasmtime_cli.is_none() {
                Some("no wasmtime CLI installed (not on PATH; Debian has no package for it)".into())
            } else {
                None
            }
        }
        Variant::Container => {
            gw.container.is_none().then(|| "the gateway was started without --container".into())
        }
    }
}

pub(crate) async fn start_container(bin: &Path) -> Result<Box<dyn Sandbox>, GatewayError> {
    let setup =
        |e: hutch_core::SandboxError| GatewayError::Setup(format!("container variant: {e}"));
    let data = std::fs::read(bin)
        .map_err(|e| GatewayError::Setup(format!("cannot read {}: {e}", bin.display())))?;
    let backend = ContainerBackend::new(ContainerConfig::new(RuntimeKind::Crun)).map_err(setup)?;
    let mut sb = backend.create(SandboxSpec::default()).await.map_err(setup)?;
    let r = async {
        sb.start().await?;
        sb.write_file(CONTAINER_HANDLER, &data, Some(0o755)).await
    }
    .await;
    if let Err(e) = r {
        let _ = sb.destroy().await;
        return Err(setup(e));
    }
    Ok(sb)
}

fn failed(code: Option<i32>, stderr: &[u8]) -> GatewayError {
    let msg = String::from_utf8_lossy(stderr).trim().to_string();
    match code {
        Some(2) => GatewayError::BadRequest(msg),
        Some(c) => GatewayError::HandlerFailed(format!("handler exited with code {c}: {msg}")),
        None => GatewayError::HandlerFailed(format!("handler was killed: {msg}")),
    }
}

pub(crate) async fn handle(
    gw: &Gateway,
    variant: &str,
    workload: &str,
    query: &str,
    body: Bytes,
) -> Result<Bytes, GatewayError> {
    let v = Variant::parse(variant).ok_or_else(|| {
        GatewayError::NotFound(format!(
            "no variant {variant:?}: native, process, wasm, wasmtime-cli or container"
        ))
    })?;
    if let Some(why) = unavailable(gw, v) {
        return Err(GatewayError::Unavailable(format!("{variant}: {why}")));
    }
    if v == Variant::Wasm {
        if let Some(p) = gw.user.get(workload) {
            return run_wasm(gw, p, vec![workload.to_string()], body).await;
        }
    }
    if !Variant::workload_is_builtin(workload) {
        return Err(GatewayError::NotFound(format!(
            "no workload {workload:?}: hello, compute, state, proxy{}",
            if gw.user.is_empty() {
                String::new()
            } else {
                " or a user handler under /wasm/".into()
            }
        )));
    }
    let iters = if workload == "compute" {
        let n = iters_from_query(query).map_err(GatewayError::BadRequest)?;
        if n == 0 || n > MAX_ITERS {
            return Err(GatewayError::BadRequest(format!("iters must be 1..={MAX_ITERS}")));
        }
        n
    } else {
        0
    };
    let counter =
        if workload == "state" { gw.counter.fetch_add(1, Ordering::AcqRel) + 1 } else { 0 };
    let upstream = if workload == "proxy" { gw.upstream.fetch().await? } else { Bytes::new() };
    let args = vec![workload.to_string(), iters.to_string(), counter.to_string()];
    match v {
        Variant::Native => {
            let req = Request { workload, iters, counter, upstream: &upstream };
            hutch_gateway_handler::handle(&req).map(Bytes::from).map_err(GatewayError::BadRequest)
        }
        Variant::Process => {
            let bin = gw.config.native_handler.as_deref().unwrap_or(Path::new(""));
            run_process(gw, bin.as_os_str(), &args, upstream).await
        }
        Variant::Wasm => {
            let p = gw.wasm.as_ref().ok_or_else(|| {
                GatewayError::Unavailable(
                    "wasm: no wasm handler configured (--wasm-handler)".into(),
                )
            })?;
            let mut argv = vec!["hutch-gateway-handler".to_string()];
            argv.extend(args);
            run_wasm(gw, p, argv, upstream).await
        }
        Variant::WasmtimeCli => {
            let cli = gw.wasmtime_cli.as_deref().unwrap_or(Path::new("wasmtime"));
            let module = gw.config.wasm_handler.as_deref().unwrap_or(Path::new(""));
            let mut full = vec!["run".to_string(), module.display().to_string()];
            full.extend(args);
            run_process(gw, cli.as_os_str(), &full, upstream).await
        }
        Variant::Container => {
            let sb = gw
                .container
                .as_deref()
                .ok_or_else(|| GatewayError::Unavailable("container: not started".into()))?;
            run_container(gw, sb, args, upstream).await
        }
    }
}

async fn run_process(
    gw: &Gateway,
    program: &std::ffi::OsStr,
    args: &[String],
    stdin: Bytes,
) -> Result<Bytes, GatewayError> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .stdin(if stdin.is_empty() { Stdio::null() } else { Stdio::piped() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| {
        GatewayError::HandlerFailed(format!("cannot start {}: {e}", program.to_string_lossy()))
    })?;
    if let Some(mut w) = child.stdin.take() {
        // a handler that does not read its input is its own business
        let _ = w.write_all(&stdin).await;
    }
    let out = tokio::time::timeout(gw.config.timeout, child.wait_with_output())
        .await
        .map_err(|_| timeout(gw))?
        .map_err(|e| GatewayError::HandlerFailed(format!("waiting for the handler: {e}")))?;
    if !out.status.success() {
        return Err(failed(out.status.code(), &out.stderr));
    }
    if out.stdout.len() as u64 > gw.config.output_bytes {
        return Err(output_exceeded(gw));
    }
    Ok(Bytes::from(out.stdout))
}

async fn run_container(
    gw: &Gateway,
    sb: &dyn Sandbox,
    mut args: Vec<String>,
    stdin: Bytes,
) -> Result<Bytes, GatewayError> {
    args.insert(0, CONTAINER_HANDLER.to_string());
    let mut req = ExecRequest::argv(args);
    req.stdin = StdinMode::Inline;
    req.timeout_ms = Some(gw.config.timeout.as_millis() as u64);
    req.output_limit = gw.config.output_bytes;
    let r = sb
        .exec(req, stdin.to_vec(), &mut Discard)
        .await
        .map_err(|e| GatewayError::HandlerFailed(format!("container exec: {e}")))?;
    if r.status.timed_out {
        return Err(timeout(gw));
    }
    if r.status.stdout_truncated {
        return Err(output_exceeded(gw));
    }
    if r.status.exit_code != Some(0) {
        return Err(failed(r.status.exit_code, &r.stderr));
    }
    Ok(Bytes::from(r.stdout))
}

fn timeout(gw: &Gateway) -> GatewayError {
    GatewayError::Timeout(format!(
        "the handler ran past the {} ms limit and was stopped",
        gw.config.timeout.as_millis()
    ))
}

fn output_exceeded(gw: &Gateway) -> GatewayError {
    GatewayError::HandlerFailed(format!(
        "the handler wrote more than {} bytes and was stopped",
        gw.config.output_bytes
    ))
}

/// A fresh instance from the pool, run to completion, dropped.
async fn run_wasm(
    gw: &Gateway,
    prepared: &Prepared,
    args: Vec<String>,
    stdin: Bytes,
) -> Result<Bytes, GatewayError> {
    let stdout = CappedOutput::buffer(gw.config.output_bytes);
    let stderr = CappedOutput::buffer(STDERR_KEPT);
    let inv = Invocation {
        prepared: prepared.clone(),
        args,
        env: Vec::new(),
        dirs: None,
        stdin: if stdin.is_empty() { GuestStdin::Null } else { GuestStdin::Bytes(stdin.to_vec()) },
        stdout: stdout.clone(),
        stderr: stderr.clone(),
        memory: Arc::new(AtomicU64::new(0)),
        memory_limit: gw.config.memory_bytes,
    };
    let r = match tokio::time::timeout(gw.config.timeout, run::run(&gw.engine, inv)).await {
        Ok(r) => r,
        // a guest that ignores write errors keeps flooding until the deadline
        Err(_) if stdout.totals().truncated => return Err(output_exceeded(gw)),
        Err(_) => return Err(timeout(gw)),
    };
    match r.end {
        RunEnd::Exited(0) => Ok(Bytes::from(stdout.take())),
        _ if stdout.totals().truncated => Err(output_exceeded(gw)),
        _ if r.memory_refused => Err(GatewayError::HandlerFailed(format!(
            "the handler ran out of memory at its {} MiB limit",
            gw.config.memory_bytes >> 20
        ))),
        RunEnd::Exited(c) => Err(failed(Some(c), &stderr.take())),
        RunEnd::Trapped(m) => Err(GatewayError::HandlerFailed(format!("the handler crashed: {m}"))),
    }
}
