//! `hutch serve`: flags and environment mapped onto the daemon's configuration.
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};
use hutch_core::units::{parse_duration, parse_size};
use hutch_server::serve::{run, Listen};
use hutch_server::{OnShutdown, ServerConfig};

/// The daemon's default Unix socket.
pub const DEFAULT_SOCKET: &str = "/run/hutch/hutch.sock";

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ShutdownMode {
    /// Destroy every sandbox when the daemon stops
    Destroy,
    /// Leave sandboxes running; the next start adopts them
    Keep,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Json,
    Text,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Unix socket to serve on (local, trusted: file mode 0600)
    #[arg(long, env = "HUTCH_SOCKET", default_value = DEFAULT_SOCKET)]
    pub socket: PathBuf,
    /// Also serve on TCP (every request then needs an API key), e.g. 127.0.0.1:7070
    #[arg(long, env = "HUTCH_TCP")]
    pub tcp: Option<SocketAddr>,
    /// Also serve the E2B-compatible API (REST and sandbox traffic on one port, API keys
    /// required; see docs/e2b.md), e.g. 127.0.0.1:3000
    #[arg(long, env = "HUTCH_E2B")]
    pub e2b: Option<SocketAddr>,
    /// Bundles and runtime state
    #[arg(long, env = "HUTCH_STATE_DIR", default_value = "/run/hutch")]
    pub state_dir: PathBuf,
    /// SQLite database (sandboxes, pools, API keys, audit log)
    #[arg(long, env = "HUTCH_DB", default_value = "/var/lib/hutch/hutch.db")]
    pub db: PathBuf,
    /// Live sandboxes at most, pool members included
    #[arg(long, env = "HUTCH_MAX_SANDBOXES", default_value_t = 100)]
    pub max_sandboxes: usize,
    /// TTL of sandboxes whose request names none (0: no expiry)
    #[arg(long, env = "HUTCH_DEFAULT_TTL", default_value = "300s")]
    pub default_ttl: String,
    /// Longest TTL a request may ask for
    #[arg(long, default_value = "24h")]
    pub max_ttl: String,
    /// Stop sandboxes idle this long
    #[arg(long, env = "HUTCH_IDLE_TIMEOUT", default_value = "30m")]
    pub idle_timeout: String,
    /// What happens to sandboxes when the daemon stops
    #[arg(long, value_enum, default_value = "destroy")]
    pub on_shutdown: ShutdownMode,
    /// Largest file transfer
    #[arg(long, default_value = "256m")]
    pub max_upload: String,
    /// Require an API key on the Unix socket too
    #[arg(long)]
    pub require_keys: bool,
    #[arg(long, value_enum, env = "HUTCH_LOG_FORMAT", default_value = "json")]
    pub log_format: LogFormat,
    #[command(flatten)]
    pub gateway: crate::gateway::GatewayArgs,
}

fn config(a: &ServeArgs) -> Result<ServerConfig, String> {
    let mut c = ServerConfig::new(a.state_dir.clone());
    c.db_path = a.db.clone();
    c.max_sandboxes = a.max_sandboxes;
    if c.max_sandboxes == 0 {
        return Err("--max-sandboxes must be at least 1".into());
    }
    let ttl = parse_duration(&a.default_ttl).map_err(|e| format!("--default-ttl: {e}"))?;
    c.default_ttl = (!ttl.is_zero()).then_some(ttl);
    c.max_ttl = parse_duration(&a.max_ttl).map_err(|e| format!("--max-ttl: {e}"))?;
    c.idle_timeout = parse_duration(&a.idle_timeout).map_err(|e| format!("--idle-timeout: {e}"))?;
    c.max_upload = parse_size(&a.max_upload).map_err(|e| format!("--max-upload: {e}"))? as usize;
    c.on_shutdown = match a.on_shutdown {
        ShutdownMode::Destroy => OnShutdown::Destroy,
        ShutdownMode::Keep => OnShutdown::Keep,
    };
    c.require_keys_everywhere = a.require_keys;
    Ok(c)
}

/// What is logged unless `HUTCH_LOG` says otherwise. wasmtime-wasi opens an info-level span
/// around every WASI call a guest makes: logging those would let any guest drive the log (and
/// formatting them cost a fresh-instance gateway request a few percent of its CPU).
const DEFAULT_LOG_FILTER: &str = "info,wasmtime_wasi=warn";

pub async fn serve(a: ServeArgs) -> ExitCode {
    let sub = tracing_subscriber::fmt().with_writer(std::io::stderr).with_env_filter(
        tracing_subscriber::EnvFilter::try_from_env("HUTCH_LOG")
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER)),
    );
    match a.log_format {
        LogFormat::Json => sub.json().init(),
        LogFormat::Text => sub.init(),
    }
    if a.gateway.gateway {
        return crate::gateway::serve(&a.gateway).await;
    }
    let cfg = match config(&a) {
        Ok(c) => c,
        Err(m) => {
            eprintln!("hutch: {m}");
            return ExitCode::from(crate::exit::USAGE);
        }
    };
    let mut extra: Vec<(SocketAddr, hutch_server::serve::ExtraRouter)> = Vec::new();
    if let Some(addr) = a.e2b {
        extra.push((addr, Box::new(hutch_e2b::router)));
    }
    let listen = Listen { socket: Some(a.socket.clone()), tcp: a.tcp, extra };
    let result = run(cfg, listen, |d| {
        let (ok, bad) = d.backend_names();
        eprintln!(
            "hutch: serving on {}{} (backends: {}{})",
            a.socket.display(),
            a.tcp.map(|t| format!(" and http://{t}")).unwrap_or_default()
                + &a.e2b.map(|t| format!(", E2B API on http://{t}")).unwrap_or_default(),
            ok.join(", "),
            if bad.is_empty() {
                String::new()
            } else {
                format!("; unavailable: {}", bad.keys().cloned().collect::<Vec<_>>().join(", "))
            }
        );
    })
    .await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let mut msg = e.to_string();
            let mut src = std::error::Error::source(&e);
            while let Some(s) = src {
                msg.push_str(&format!(": {s}"));
                src = s.source();
            }
            eprintln!("hutch: {msg}");
            ExitCode::from(crate::exit::HUTCH)
        }
    }
}
