//! The sandbox plane (`E2B_SANDBOX_URL`): requests routed by `E2b-Sandbox-Id` and
//! `E2b-Sandbox-Port` to a sandbox's envd (49983) or code interpreter (49999).
use std::sync::Arc;

use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use base64::Engine;
use hutch_core::Sandbox;
use hutch_server::daemon::Caller;
use hutch_server::live::LiveSandbox;
use serde_json::json;
use tower::ServiceExt;

use crate::error::E2bError;
use crate::model::{self, E2bSandbox};
use crate::{files, filesystem, process, E2b};

pub const SANDBOX_ID: &str = "e2b-sandbox-id";
const SANDBOX_PORT: &str = "e2b-sandbox-port";
pub const ENVD_PORT: u16 = 49983;
pub const INTERPRETER_PORT: u16 = 49999;

/// The sandbox a plane request is for, resolved once by the router.
#[derive(Clone)]
pub struct Target {
    pub sandbox: E2bSandbox,
    pub live: Arc<LiveSandbox>,
    /// The sandbox's owner, for the daemon's checks.
    pub caller: Caller,
}

impl Target {
    pub fn id(&self) -> &str {
        &self.sandbox.row.id
    }

    /// The running sandbox, held (a read lock: it is not destroyed meanwhile).
    pub async fn open(&self) -> Result<Held<'_>, E2bError> {
        Held::new(&self.live).await
    }
}

/// A sandbox held for an operation: a read lock on its handle, known to be there.
pub struct Held<'a>(tokio::sync::RwLockReadGuard<'a, Option<Box<dyn Sandbox>>>);

impl<'a> Held<'a> {
    pub async fn new(live: &'a LiveSandbox) -> Result<Self, E2bError> {
        let g = live.sandbox.read().await;
        if g.is_none() {
            return Err(E2bError::SandboxGone(model::e2b_id(&live.id)));
        }
        Ok(Self(g))
    }
}

impl std::ops::Deref for Held<'_> {
    type Target = dyn Sandbox;

    fn deref(&self) -> &Self::Target {
        match self.0.as_deref() {
            Some(sb) => sb,
            // checked in `new`, and the read lock keeps it so
            None => unreachable!("a held sandbox is present"),
        }
    }
}

pub fn router(state: Arc<E2b>) -> Router {
    let envd = envd_router(state.clone());
    let interpreter = crate::interpreter::router(state.clone());
    Router::new().fallback_service(tower::service_fn(move |mut req: Request| {
        let (envd, interpreter, state) = (envd.clone(), interpreter.clone(), state.clone());
        async move {
            let found = if req.headers().contains_key(SANDBOX_ID) {
                resolve(&state, req.headers())
            } else {
                signed_target(&state, &req)
            };
            let target = match found {
                Ok(t) => t,
                Err(e) => return Ok(e.into_response()),
            };
            let port = req
                .headers()
                .get(SANDBOX_PORT)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u16>().ok())
                .unwrap_or(ENVD_PORT);
            req.extensions_mut().insert(target);
            match port {
                ENVD_PORT => envd.oneshot(req).await,
                INTERPRETER_PORT => interpreter.oneshot(req).await,
                other => Ok(port_closed(other)),
            }
        }
    }))
}

/// The SDK turns "port is not open" into `SandboxUnreachableException`.
fn port_closed(port: u16) -> Response {
    (
        StatusCode::BAD_GATEWAY,
        Json(json!({
            "code": 502,
            "message": format!(
                "The sandbox is running but port is not open: hutch does not forward sandbox port {port} (see docs/e2b.md)"
            ),
        })),
    )
        .into_response()
}

fn resolve(state: &E2b, headers: &HeaderMap) -> Result<Target, E2bError> {
    let id = headers.get(SANDBOX_ID).and_then(|v| v.to_str().ok()).unwrap_or_default().trim();
    let gone = || E2bError::SandboxGone(id.to_string());
    let hid = model::hutch_id(id).ok_or_else(gone)?;
    let row = state.daemon.store.get(&hid).map_err(|_| gone())?.ok_or_else(gone)?;
    target(state, E2bSandbox::from_row(row).ok_or_else(gone)?)
}

/// A signed `/files` URL (`download_url()`, `upload_url()`) carries no sandbox id: the
/// sandbox is the one whose access token made the signature.
pub fn is_signed_file_request(req: &Request) -> bool {
    req.uri().path() == "/files" && req.uri().query().is_some_and(|q| q.contains("signature="))
}

fn signed_target(state: &E2b, req: &Request) -> Result<Target, E2bError> {
    let q: files::FilesQuery = req
        .uri()
        .query()
        .and_then(query_of)
        .ok_or_else(|| E2bError::BadRequest("invalid query".into()))?;
    let op = if req.method() == axum::http::Method::GET { "read" } else { "write" };
    let rows = state
        .daemon
        .store
        .list(&hutch_store::ListFilter::default())
        .map_err(hutch_server::ApiError::from)?;
    for row in rows {
        let Some(sb) = E2bSandbox::from_row(row) else { continue };
        if q.signed_by(op, sb.token()) {
            return target(state, sb);
        }
    }
    Err(E2bError::Unauthorized("the signature matches no running sandbox".into()))
}

fn query_of(q: &str) -> Option<files::FilesQuery> {
    let pairs: Vec<(String, String)> = form_urlencoded::parse(q.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    files::FilesQuery::from_pairs(&pairs)
}

fn target(state: &E2b, sandbox: E2bSandbox) -> Result<Target, E2bError> {
    let hid = sandbox.row.id.clone();
    let gone = || E2bError::SandboxGone(model::e2b_id(&hid));
    let caller = Caller {
        admin: sandbox.row.owner_key.is_none(),
        key_id: sandbox.row.owner_key.clone(),
        max_sandboxes: None,
    };
    let live = state.daemon.live_for(&hid, &caller).map_err(|_| gone())?;
    Ok(Target { sandbox, live, caller })
}

fn envd_router(state: Arc<E2b>) -> Router {
    let upload_limit = state.daemon.cfg.max_upload;
    let rpc = Router::new()
        .route("/process.Process/Start", post(process::start))
        .route("/process.Process/Connect", post(process::connect))
        .route("/process.Process/List", post(process::list))
        .route("/process.Process/SendSignal", post(process::send_signal))
        .route("/process.Process/SendInput", post(process::send_input))
        .route("/process.Process/CloseStdin", post(process::close_stdin))
        .route("/process.Process/StreamInput", post(process::stream_input))
        .route("/process.Process/Update", post(process::update))
        .route("/filesystem.Filesystem/Stat", post(filesystem::stat))
        .route("/filesystem.Filesystem/ListDir", post(filesystem::list_dir))
        .route("/filesystem.Filesystem/MakeDir", post(filesystem::make_dir))
        .route("/filesystem.Filesystem/Remove", post(filesystem::remove))
        .route("/filesystem.Filesystem/Move", post(filesystem::rename))
        .route("/filesystem.Filesystem/CreateWatcher", post(filesystem::create_watcher))
        .route("/filesystem.Filesystem/GetWatcherEvents", post(filesystem::watcher_events))
        .route("/filesystem.Filesystem/RemoveWatcher", post(filesystem::remove_watcher))
        .route("/filesystem.Filesystem/WatchDir", post(filesystem::watch_dir))
        .route("/envs", get(envs))
        .fallback(rpc_unknown)
        .route_layer(middleware::from_fn(require_token));
    Router::new()
        .route("/health", get(|| async { StatusCode::NO_CONTENT }))
        .route(
            "/files",
            get(files::download)
                .post(files::upload)
                .layer(axum::extract::DefaultBodyLimit::max(upload_limit)),
        )
        .merge(rpc)
        .with_state(state)
}

async fn rpc_unknown(uri: axum::http::Uri) -> Response {
    E2bError::unimplemented(&format!("the envd call {}", uri.path())).rpc()
}

/// envd's access token on everything but `/health` and `/files` (which take the token or a
/// signed URL).
async fn require_token(Extension(t): Extension<Target>, req: Request, next: Next) -> Response {
    if !token_ok(&t, req.headers()) {
        return E2bError::Unauthorized(
            "unauthorized access, please provide a valid access token or method signing if supported"
                .into(),
        )
        .rpc();
    }
    next.run(req).await
}

pub fn token_ok(t: &Target, headers: &HeaderMap) -> bool {
    let given = headers.get("x-access-token").map(|v| v.as_bytes()).unwrap_or_default();
    constant_time_eq(given, t.sandbox.token().as_bytes())
}

pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The user a call runs as: `Authorization: Basic base64("<user>:")`, or the template's user.
/// hutch's templates have one account.
pub fn check_user(headers: &HeaderMap) -> Result<(), E2bError> {
    let Some(v) = headers.get("authorization").and_then(|v| v.to_str().ok()) else {
        return Ok(());
    };
    let Some(b64) = v.strip_prefix("Basic ") else { return Ok(()) };
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .map_err(|_| E2bError::Unauthorized("invalid Basic authorization".into()))?;
    let user = String::from_utf8_lossy(&decoded);
    let user = user.split(':').next().unwrap_or_default();
    user_allowed(user)
}

pub fn user_allowed(user: &str) -> Result<(), E2bError> {
    if user.is_empty() || user == model::USER {
        Ok(())
    } else {
        Err(E2bError::Unauthorized(format!(
            "user '{user}': hutch sandboxes run everything as '{}' (running as another user, root included, is not supported)",
            model::USER
        )))
    }
}

/// The sandbox's environment variables (what create set), as upstream envd's `/envs`.
async fn envs(Extension(t): Extension<Target>) -> Json<serde_json::Value> {
    Json(json!(t.sandbox.spec().env))
}
