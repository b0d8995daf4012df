//! Running the daemon: listeners (a Unix socket, and TCP when asked), graceful shutdown.
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::watch;

use crate::api::{router, Trusted};
use crate::daemon::{Daemon, DaemonError};
use crate::ServerConfig;

/// Builds a router for an extra listener once the daemon is up.
pub type ExtraRouter = Box<dyn FnOnce(Arc<Daemon>) -> axum::Router + Send>;

pub struct Listen {
    /// Unix socket path (trusted: its file mode, 0600, is the access control).
    pub socket: Option<PathBuf>,
    /// TCP address (every request needs an API key).
    pub tcp: Option<SocketAddr>,
    /// Further TCP listeners with their own routers (e.g. the E2B-compatible API), which do
    /// their own authentication.
    pub extra: Vec<(SocketAddr, ExtraRouter)>,
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(transparent)]
    Daemon(#[from] DaemonError),
    #[error("another hutch daemon is already listening on {0}")]
    InUse(String),
    #[error("cannot listen on {0}")]
    Bind(String, #[source] std::io::Error),
    #[error("nothing to listen on: give a socket path or a TCP address")]
    NoListener,
}

/// Removes a socket file left by a daemon that died; refuses when one is still answering.
fn prepare_socket(path: &PathBuf) -> Result<(), ServeError> {
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(ServeError::InUse(path.display().to_string()));
        }
        let _ = std::fs::remove_file(path);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| ServeError::Bind(dir.display().to_string(), e))?;
    }
    Ok(())
}

/// Serves `app` on `listener` until `stop` turns true (requests in flight finish).
fn spawn_server<L>(
    servers: &mut tokio::task::JoinSet<()>,
    listener: L,
    app: axum::Router,
    mut stop: watch::Receiver<bool>,
) where
    L: axum::serve::Listener,
    L::Addr: std::fmt::Debug,
{
    servers.spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stop.wait_for(|s| *s).await;
            })
            .await;
    });
}

async fn signalled() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// Starts the daemon and serves until SIGTERM or Ctrl-C; `ready` is called with the daemon once
/// every listener is bound.
pub async fn run(
    cfg: ServerConfig,
    listen: Listen,
    ready: impl FnOnce(&Arc<Daemon>),
) -> Result<(), ServeError> {
    if listen.socket.is_none() && listen.tcp.is_none() && listen.extra.is_empty() {
        return Err(ServeError::NoListener);
    }
    if let Some(p) = &listen.socket {
        prepare_socket(p)?;
    }
    let daemon = Daemon::start(cfg).await?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut servers = tokio::task::JoinSet::new();
    if let Some(path) = &listen.socket {
        let l = tokio::net::UnixListener::bind(path)
            .map_err(|e| ServeError::Bind(path.display().to_string(), e))?;
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
        spawn_server(&mut servers, l, router(daemon.clone(), Trusted(true)), stop_rx.clone());
    }
    if let Some(addr) = listen.tcp {
        let l = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| ServeError::Bind(addr.to_string(), e))?;
        spawn_server(&mut servers, l, router(daemon.clone(), Trusted(false)), stop_rx.clone());
    }
    for (addr, make) in listen.extra {
        let l = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| ServeError::Bind(addr.to_string(), e))?;
        spawn_server(&mut servers, l, make(daemon.clone()), stop_rx.clone());
    }
    ready(&daemon);
    tracing::info!(socket = ?listen.socket, tcp = ?listen.tcp, "hutch daemon ready");
    signalled().await;
    tracing::info!("shutting down");
    let _ = stop_tx.send(true);
    daemon.shutdown().await;
    while servers.join_next().await.is_some() {}
    if let Some(p) = &listen.socket {
        let _ = std::fs::remove_file(p);
    }
    Ok(())
}
