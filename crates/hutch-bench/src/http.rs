//! A minimal keep-alive HTTP/1.1 client over a Unix socket, as an SDK would hold one: enough
//! to time API calls without a client library's own overhead dominating.
use anyhow::{bail, Context, Result};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

pub struct Conn {
    io: BufReader<UnixStream>,
}

impl Conn {
    pub async fn connect(path: &std::path::Path) -> Result<Self> {
        Ok(Self {
            io: BufReader::new(
                UnixStream::connect(path)
                    .await
                    .with_context(|| format!("connect {}", path.display()))?,
            ),
        })
    }

    pub async fn call(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value)> {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: hutch\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        self.io.get_mut().write_all(req.as_bytes()).await?;
        let mut line = String::new();
        self.io.read_line(&mut line).await?;
        let status: u16 =
            line.split_whitespace().nth(1).and_then(|c| c.parse().ok()).context("status line")?;
        let mut len = 0usize;
        loop {
            line.clear();
            if self.io.read_line(&mut line).await? == 0 {
                bail!("connection closed in headers");
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse().context("content-length")?;
                } else if k.eq_ignore_ascii_case("transfer-encoding") {
                    bail!("chunked responses are not expected here");
                }
            }
        }
        let mut buf = vec![0u8; len];
        self.io.read_exact(&mut buf).await?;
        Ok((status, serde_json::from_slice(&buf).unwrap_or(Value::Null)))
    }
}

/// A daemon in this process, serving its API on a real Unix socket in a scratch directory (the
/// benchmarks measure the API as a client sees it, HTTP included).
pub struct LocalDaemon {
    pub daemon: std::sync::Arc<hutch_server::Daemon>,
    pub socket: std::path::PathBuf,
    dir: std::path::PathBuf,
    server: tokio::task::JoinHandle<()>,
}

impl LocalDaemon {
    pub async fn start(tag: &str) -> Result<Self> {
        let dir = std::env::temp_dir().join(format!("hutch-bench-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let mut cfg = hutch_server::ServerConfig::new(dir.join("state"));
        cfg.db_path = dir.join("hutch.db");
        let daemon = hutch_server::Daemon::start(cfg).await?;
        let socket = dir.join("h.sock");
        let listener = tokio::net::UnixListener::bind(&socket)?;
        let app = hutch_server::router(daemon.clone(), hutch_server::api::Trusted(true));
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { daemon, socket, dir, server })
    }

    pub async fn stop(self) {
        self.daemon.shutdown().await;
        self.server.abort();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
