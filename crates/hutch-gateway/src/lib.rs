//! `hutch serve --gateway`: an HTTP gateway that answers every request by running a handler in
//! a fresh isolated instance, with the isolation chosen per request by the path:
//!
//! | path prefix      | how the handler runs                                                   |
//! |------------------|------------------------------------------------------------------------|
//! | `/native/`       | in the gateway process (no isolation: the baseline)                    |
//! | `/process/`      | a new host process per request (the native handler binary)             |
//! | `/wasm/`         | a fresh WebAssembly instance per request, wasmtime embedded            |
//! | `/wasmtime-cli/` | a `wasmtime run` process per request, when a wasmtime CLI is installed |
//! | `/container/`    | a new process per request in a warm container sandbox (crun or runc)   |
//!
//! then the workload: `hello`, `compute?iters=N` (a SHA-256 chain), `state` (a counter shared by
//! all requests, kept by the gateway), `proxy` (the gateway fetches its upstream and the handler
//! wraps the body). Every variant runs the same handler code (crate `hutch-gateway-handler`).
//! User handlers (`--handler NAME=FILE.wasm`) are WASI commands served at `/wasm/NAME`: the
//! request body on stdin, the response body on stdout.
#![forbid(unsafe_code)]

mod error;
mod handlers;
mod upstream;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::Router;
use bytes::Bytes;
use hutch_backend_wasm::{Prepared, WasmEngine};
use hutch_core::Sandbox;

pub use error::GatewayError;
pub use handlers::Variant;

/// What the gateway runs and with which limits.
#[derive(Debug, Clone)]
pub struct GatewayConfig {
    pub listen: SocketAddr,
    /// The handler built for the host (`/process/`, `/container/`).
    pub native_handler: Option<PathBuf>,
    /// The handler built for wasm32-wasip1 (`/wasm/`, `/wasmtime-cli/`).
    pub wasm_handler: Option<PathBuf>,
    /// Extra WASI command handlers, served at `/wasm/NAME`.
    pub user_handlers: BTreeMap<String, PathBuf>,
    /// Base URL the proxy workload fetches, e.g. `http://127.0.0.1:9000/`.
    pub upstream: Option<String>,
    /// Start a container sandbox for `/container/`.
    pub container: bool,
    /// A `wasmtime` executable for `/wasmtime-cli/`; found on PATH when not given.
    pub wasmtime_cli: Option<PathBuf>,
    /// Per request: wall clock, linear memory, response bytes.
    pub timeout: Duration,
    pub memory_bytes: u64,
    pub output_bytes: u64,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8088)),
            native_handler: None,
            wasm_handler: None,
            user_handlers: BTreeMap::new(),
            upstream: None,
            container: false,
            wasmtime_cli: None,
            timeout: Duration::from_secs(10),
            memory_bytes: 64 << 20,
            output_bytes: 1 << 20,
        }
    }
}

/// Shared by all requests.
pub struct Gateway {
    config: GatewayConfig,
    counter: AtomicU64,
    engine: Arc<WasmEngine>,
    wasm: Option<Prepared>,
    user: BTreeMap<String, Prepared>,
    container: Option<Box<dyn Sandbox>>,
    wasmtime_cli: Option<PathBuf>,
    upstream: upstream::Upstream,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway").field("config", &self.config).finish()
    }
}

impl Gateway {
    /// Compiles the wasm handlers, starts the container sandbox; fails with what is wrong.
    pub async fn start(config: GatewayConfig) -> Result<Arc<Self>, GatewayError> {
        let engine = WasmEngine::shared().map_err(|e| GatewayError::Setup(e.to_string()))?;
        let wasm = match &config.wasm_handler {
            Some(p) => {
                Some(engine.prepare_file(p).map_err(|e| GatewayError::Setup(e.to_string()))?)
            }
            None => None,
        };
        let mut user = BTreeMap::new();
        for (name, path) in &config.user_handlers {
            if Variant::workload_is_builtin(name) {
                return Err(GatewayError::Setup(format!(
                    "handler name {name:?} is a built-in workload; choose another"
                )));
            }
            let p = engine.prepare_file(path).map_err(|e| GatewayError::Setup(e.to_string()))?;
            user.insert(name.clone(), p);
        }
        let container = if config.container {
            let bin = config.native_handler.as_ref().ok_or_else(|| {
                GatewayError::Setup(
                    "--container needs the native handler (--native-handler)".into(),
                )
            })?;
            Some(handlers::start_container(bin).await?)
        } else {
            None
        };
        let wasmtime_cli = config.wasmtime_cli.clone().or_else(|| find_on_path("wasmtime"));
        let upstream = upstream::Upstream::new(config.upstream.clone())?;
        Ok(Arc::new(Self {
            config,
            counter: AtomicU64::new(0),
            engine,
            wasm,
            user,
            container,
            wasmtime_cli,
            upstream,
        }))
    }

    /// Which variants can answer, and why the others cannot.
    pub fn variants(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        for v in Variant::ALL {
            let why = handlers::unavailable(self, v);
            m.insert(
                v.as_str().into(),
                match why {
                    None => serde_json::json!({"available": true}),
                    Some(r) => serde_json::json!({"available": false, "reason": r}),
                },
            );
        }
        serde_json::Value::Object(m)
    }

    /// Stops the container sandbox, if any.
    pub async fn shutdown(self: Arc<Self>) {
        if let Ok(mut g) = Arc::try_unwrap(self) {
            if let Some(sb) = g.container.take() {
                let _ = sb.destroy().await;
            }
        }
    }
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(name)).find(|p| p.is_file()))
}

pub fn router(gw: Arc<Gateway>) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/health", get(|| async { "ok\n" }))
        .route("/{variant}/{workload}", any(handle))
        .with_state(gw)
}

async fn index(State(gw): State<Arc<Gateway>>) -> Response {
    axum::Json(serde_json::json!({
        "variants": gw.variants(),
        "workloads": ["hello", "compute", "state", "proxy"],
        "user_handlers": gw.user.keys().collect::<Vec<_>>(),
    }))
    .into_response()
}

async fn handle(
    State(gw): State<Arc<Gateway>>,
    Path((variant, workload)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Response {
    match handlers::handle(&gw, &variant, &workload, query.as_deref().unwrap_or(""), body).await {
        Ok(b) => (axum::http::StatusCode::OK, b).into_response(),
        Err(e) => e.into_response(),
    }
}

/// Serves until `shutdown` resolves.
pub async fn serve(
    config: GatewayConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), GatewayError> {
    let listen = config.listen;
    let gw = Gateway::start(config).await?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| GatewayError::Setup(format!("cannot listen on {listen}: {e}")))?;
    tracing::info!(%listen, variants = %gw.variants(), "gateway listening");
    let r = axum::serve(listener, router(gw.clone()))
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|e| GatewayError::Setup(format!("serving failed: {e}")));
    gw.shutdown().await;
    r
}
