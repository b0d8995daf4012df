//! The HTTP API: `router(daemon)` builds it; every handler returns JSON or an [`ApiError`].
//! The contract is `spec/openapi.yaml`; `tests/contract.rs` checks the two agree.
mod contexts;
mod exec;
mod files;
mod pools;
mod processes;
mod sandboxes;
mod system;
pub mod types;

pub use exec::spawn_on;

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{FromRequest, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use serde::de::DeserializeOwned;

use crate::daemon::{Caller, Daemon};
use crate::error::ApiError;

/// Whether requests arrive over a trusted local transport (the daemon's Unix socket, whose file
/// permissions are the access control) or over TCP (an API key is required).
#[derive(Debug, Clone, Copy)]
pub struct Trusted(pub bool);

/// The API's routes, for a transport. Tested in-process without a socket.
pub fn router(daemon: Arc<Daemon>, trusted: Trusted) -> Router {
    let upload_limit = daemon.cfg.max_upload;
    let json_limit = daemon.cfg.max_json;
    let api = Router::new()
        .route("/v1/version", get(system::version))
        .route("/metrics", get(system::metrics))
        .route("/v1/sandboxes", post(sandboxes::create).get(sandboxes::list))
        .route("/v1/sandboxes/{id}", get(sandboxes::get).delete(sandboxes::delete))
        .route("/v1/sandboxes/{id}/ttl", post(sandboxes::set_ttl))
        .route("/v1/sandboxes/{id}/exec", post(exec::exec))
        .route("/v1/sandboxes/{id}/exec/stream", post(exec::exec_stream))
        .route("/v1/sandboxes/{id}/exec/ws", get(exec::exec_ws))
        .route("/v1/sandboxes/{id}/processes", post(processes::start).get(processes::list))
        .route("/v1/sandboxes/{id}/processes/{pid}", get(processes::get))
        .route("/v1/sandboxes/{id}/processes/{pid}/signal", post(processes::signal))
        .route("/v1/sandboxes/{id}/processes/{pid}/stdin", post(processes::stdin))
        .route("/v1/sandboxes/{id}/processes/{pid}/stdin/close", post(processes::close_stdin))
        .route("/v1/sandboxes/{id}/processes/{pid}/logs", get(processes::logs))
        .route("/v1/sandboxes/{id}/processes/{pid}/attach", get(processes::attach))
        .route(
            "/v1/sandboxes/{id}/files",
            get(files::download)
                .put(files::upload)
                .delete(files::remove)
                .layer(axum::extract::DefaultBodyLimit::max(upload_limit)),
        )
        .route("/v1/sandboxes/{id}/files/list", get(files::list))
        .route("/v1/sandboxes/{id}/files/stat", get(files::stat))
        .route("/v1/sandboxes/{id}/files/mkdir", post(files::mkdir))
        .route("/v1/sandboxes/{id}/files/move", post(files::rename))
        .route("/v1/sandboxes/{id}/contexts", post(contexts::create).get(contexts::list))
        .route("/v1/sandboxes/{id}/contexts/{cid}", axum::routing::delete(contexts::delete))
        .route("/v1/sandboxes/{id}/contexts/{cid}/restart", post(contexts::restart))
        .route("/v1/sandboxes/{id}/contexts/{cid}/interrupt", post(contexts::interrupt))
        .route("/v1/sandboxes/{id}/contexts/{cid}/run", post(contexts::run))
        .route("/v1/sandboxes/{id}/contexts/{cid}/run/stream", post(contexts::run_stream))
        .route("/v1/pools", post(pools::create).get(pools::list))
        .route("/v1/pools/{name}", get(pools::get).delete(pools::delete))
        .route("/v1/keys", post(system::create_key).get(system::list_keys))
        .route("/v1/keys/{id}", axum::routing::delete(system::revoke_key))
        .route("/v1/audit", get(system::audit))
        .route_layer(middleware::from_fn_with_state(daemon.clone(), authenticate));
    Router::new()
        .route("/v1/health", get(system::health))
        .merge(api)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::extract::DefaultBodyLimit::max(json_limit))
        .layer(middleware::from_fn(log_requests))
        .layer(Extension(trusted))
        .with_state(daemon)
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such endpoint; see spec/openapi.yaml")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this endpoint does not take that method",
    )
}

fn key_from(headers: &HeaderMap) -> Option<String> {
    if let Some(v) = headers.get("x-api-key").and_then(|v| v.to_str().ok()) {
        return Some(v.trim().to_string());
    }
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(|v| v.trim().to_string())
}

/// Resolves the caller (API key, or the trusted local transport) and applies its rate limit.
async fn authenticate(
    State(d): State<Arc<Daemon>>,
    Extension(trusted): Extension<Trusted>,
    mut req: Request,
    next: Next,
) -> Response {
    let caller = match key_from(req.headers()) {
        Some(secret) => match d.authenticate(&secret) {
            Ok(Some((caller, rate))) => {
                if let (Some(id), Some(rate)) = (&caller.key_id, rate) {
                    if let Err(e) = d.check_rate(id, rate) {
                        return e.into_response();
                    }
                }
                caller
            }
            Ok(None) => return ApiError::unauthorized("invalid or revoked API key").into_response(),
            Err(e) => return e.into_response(),
        },
        None if trusted.0 && !d.cfg.require_keys_everywhere => Caller::local_admin(),
        None => {
            return ApiError::unauthorized("an API key is required: send Authorization: Bearer <key> (create one with `hutch key create`)")
                .into_response()
        }
    };
    req.extensions_mut().insert(caller);
    next.run(req).await
}

/// One structured log line per request, and the response counter.
async fn log_requests(req: Request, next: Next) -> Response {
    let t = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let resp = next.run(req).await;
    let status = resp.status().as_u16();
    crate::metrics::global().http(status);
    tracing::info!(%method, %path, status, ms = t.elapsed().as_secs_f64() * 1e3, "request");
    resp
}

/// `Json` whose rejections are [`ApiError`]s with the API's error shape.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        use axum::extract::rejection::JsonRejection;
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(ApiJson(v)),
            Err(JsonRejection::JsonDataError(e)) => {
                Err(ApiError::bad_request(format!("invalid request body: {}", e.body_text())))
            }
            Err(JsonRejection::JsonSyntaxError(e)) => {
                Err(ApiError::bad_request(format!("malformed JSON: {}", e.body_text())))
            }
            Err(JsonRejection::MissingJsonContentType(_)) => Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send the body as JSON with Content-Type: application/json",
            )),
            Err(JsonRejection::BytesRejection(e))
                if e.status() == StatusCode::PAYLOAD_TOO_LARGE =>
            {
                Err(ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "payload_too_large",
                    "request body too large",
                ))
            }
            Err(e) => Err(ApiError::bad_request(e.body_text())),
        }
    }
}

/// `Query` whose rejections are [`ApiError`]s.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(v)) => Ok(ApiQuery(v)),
            Err(e) => Err(ApiError::bad_request(format!("invalid query: {}", e.body_text()))),
        }
    }
}

/// `Path` whose rejections are [`ApiError`]s.
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(v)) => Ok(ApiPath(v)),
            Err(e) => {
                Err(ApiError::bad_request(format!("invalid path parameter: {}", e.body_text())))
            }
        }
    }
}

/// A raw body whose rejections (too large) are [`ApiError`]s.
pub struct ApiBytes(pub axum::body::Bytes);

impl<S: Send + Sync> FromRequest<S> for ApiBytes {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::body::Bytes::from_request(req, state).await {
            Ok(b) => Ok(ApiBytes(b)),
            Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                "request body too large for this endpoint",
            )),
            Err(e) => Err(ApiError::bad_request(e.body_text())),
        }
    }
}
