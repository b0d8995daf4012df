//! `hutch serve --gateway`: flags mapped onto the gateway's configuration.
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use hutch_core::units::{parse_duration, parse_size};
use hutch_gateway::GatewayConfig;

#[derive(Debug, Args)]
pub struct GatewayArgs {
    /// Serve the HTTP gateway instead of the daemon: a handler per request in a fresh instance
    #[arg(long)]
    pub gateway: bool,
    /// Gateway address
    #[arg(long, env = "HUTCH_GATEWAY_LISTEN", default_value = "127.0.0.1:8088")]
    pub gateway_listen: SocketAddr,
    /// The handler built for the host (scripts/build-gateway-handler.sh), for /process/ and /container/
    #[arg(long, env = "HUTCH_GATEWAY_NATIVE")]
    pub native_handler: Option<PathBuf>,
    /// The handler built for wasm32-wasip1, for /wasm/ and /wasmtime-cli/
    #[arg(long, env = "HUTCH_GATEWAY_WASM")]
    pub wasm_handler: Option<PathBuf>,
    /// A WASI command served at /wasm/NAME (request body on stdin, response on stdout); repeatable
    #[arg(long = "handler", value_name = "NAME=FILE.wasm")]
    pub handlers: Vec<String>,
    /// Upstream the proxy workload fetches, e.g. http://127.0.0.1:9000/
    #[arg(long)]
    pub upstream: Option<String>,
    /// Also serve /container/ from a warm container sandbox (needs root and crun)
    #[arg(long)]
    pub container: bool,
    /// wasmtime executable for /wasmtime-cli/ (default: found on PATH)
    #[arg(long)]
    pub wasmtime_cli: Option<PathBuf>,
    /// Per-request wall-clock limit of a handler
    #[arg(long, default_value = "10s")]
    pub handler_timeout: String,
    /// Per-request memory limit of a wasm handler
    #[arg(long, default_value = "64m")]
    pub handler_memory: String,
    /// Largest response a handler may write
    #[arg(long, default_value = "1m")]
    pub handler_output: String,
}

fn config(a: &GatewayArgs) -> Result<GatewayConfig, String> {
    let mut user_handlers = BTreeMap::new();
    for h in &a.handlers {
        let (name, file) =
            h.split_once('=').ok_or_else(|| format!("--handler {h:?}: use NAME=FILE.wasm"))?;
        if name.is_empty()
            || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(format!("--handler {h:?}: NAME must be letters, digits, - or _"));
        }
        user_handlers.insert(name.to_string(), PathBuf::from(file));
    }
    Ok(GatewayConfig {
        listen: a.gateway_listen,
        native_handler: a.native_handler.clone(),
        wasm_handler: a.wasm_handler.clone(),
        user_handlers,
        upstream: a.upstream.clone(),
        container: a.container,
        wasmtime_cli: a.wasmtime_cli.clone(),
        timeout: parse_duration(&a.handler_timeout)
            .map_err(|e| format!("--handler-timeout: {e}"))?,
        memory_bytes: parse_size(&a.handler_memory)
            .map_err(|e| format!("--handler-memory: {e}"))?,
        output_bytes: parse_size(&a.handler_output)
            .map_err(|e| format!("--handler-output: {e}"))?,
    })
}

pub async fn serve(a: &GatewayArgs) -> ExitCode {
    let cfg = match config(a) {
        Ok(c) => c,
        Err(m) => {
            eprintln!("hutch: {m}");
            return ExitCode::from(crate::exit::USAGE);
        }
    };
    eprintln!("hutch: gateway on http://{}", cfg.listen);
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
        }
    };
    let stop = async move {
        tokio::select! { _ = shutdown => {}, _ = term => {} }
    };
    match hutch_gateway::serve(cfg, stop).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hutch: {e}");
            ExitCode::from(crate::exit::HUTCH)
        }
    }
}
