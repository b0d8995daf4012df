//! Files inside a sandbox. Paths are the guest's, confined to its workdir and /tmp (the agent
//! resolves symlinks and refuses anything that leads out); transfers are binary-safe.
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::{json, Value};

use super::types::{MkdirBody, MoveBody, PathQuery};
use super::{ApiBytes, ApiJson, ApiPath, ApiQuery};
use crate::daemon::{Caller, Daemon};
use crate::error::ApiError;
use crate::live::LiveSandbox;
use hutch_core::Sandbox;
use tokio::sync::RwLockReadGuard;

/// Rejects paths that are malformed or climb with `..` before they reach the sandbox.
pub fn check_path(p: &str) -> Result<(), ApiError> {
    if p.is_empty() || p.len() > 4096 || p.contains('\0') {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_path",
            "path must be 1-4096 bytes without NUL",
        ));
    }
    if p.split('/').any(|c| c == "..") {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_path",
            format!("path {p:?} must not contain '..'"),
        ));
    }
    Ok(())
}

/// The running sandbox, held (read-locked) for one operation.
async fn sandbox(live: &LiveSandbox) -> Result<RwLockReadGuard<'_, Box<dyn Sandbox>>, ApiError> {
    RwLockReadGuard::try_map(live.sandbox.read().await, |o| o.as_ref())
        .map_err(|_| ApiError::from_sandbox(hutch_core::SandboxError::NotRunning, "file operation"))
}

fn fail(what: &'static str) -> impl Fn(hutch_core::SandboxError) -> ApiError {
    move |e| ApiError::from_sandbox(e, what)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UploadQuery {
    pub path: String,
    /// Octal permission bits, e.g. "755".
    #[serde(default)]
    pub mode: Option<String>,
}

pub async fn upload(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<UploadQuery>,
    ApiBytes(body): ApiBytes,
) -> Result<Json<Value>, ApiError> {
    check_path(&q.path)?;
    let mode = match &q.mode {
        Some(m) => {
            Some(u32::from_str_radix(m, 8).ok().filter(|v| *v <= 0o7777).ok_or_else(|| {
                ApiError::bad_request(format!("mode {m:?} is not octal permission bits"))
            })?)
        }
        None => None,
    };
    let live = d.live_for(&id, &caller)?;
    sandbox(&live)
        .await?
        .write_file(&q.path, &body, mode)
        .await
        .map_err(fail("writing the file"))?;
    d.audit(&caller, "upload", Some(&id), json!({"path": q.path, "bytes": body.len()}));
    Ok(Json(json!({"path": q.path, "size": body.len()})))
}

pub async fn download(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<PathQuery>,
) -> Result<impl IntoResponse, ApiError> {
    check_path(&q.path)?;
    let live = d.live_for(&id, &caller)?;
    let st = sandbox(&live).await?.stat(&q.path).await.map_err(fail("reading the file"))?;
    if st.size as usize > d.cfg.max_upload {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!(
                "file is {} bytes, more than the {} byte transfer limit",
                st.size, d.cfg.max_upload
            ),
        ));
    }
    let data = sandbox(&live).await?.read_file(&q.path).await.map_err(fail("reading the file"))?;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], data))
}

pub async fn remove(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<PathQuery>,
) -> Result<StatusCode, ApiError> {
    check_path(&q.path)?;
    let live = d.live_for(&id, &caller)?;
    sandbox(&live).await?.remove(&q.path, q.recursive).await.map_err(fail("removing the file"))?;
    d.audit(&caller, "remove_file", Some(&id), json!({"path": q.path}));
    Ok(StatusCode::NO_CONTENT)
}

pub async fn list(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<PathQuery>,
) -> Result<Json<Value>, ApiError> {
    check_path(&q.path)?;
    let live = d.live_for(&id, &caller)?;
    let entries =
        sandbox(&live).await?.list_dir(&q.path).await.map_err(fail("listing the directory"))?;
    Ok(Json(json!({"path": q.path, "entries": entries})))
}

pub async fn stat(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<PathQuery>,
) -> Result<Json<Value>, ApiError> {
    check_path(&q.path)?;
    let live = d.live_for(&id, &caller)?;
    let st = sandbox(&live).await?.stat(&q.path).await.map_err(fail("stat"))?;
    Ok(Json(serde_json::to_value(st).unwrap_or_default()))
}

pub async fn mkdir(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<String>,
    ApiJson(b): ApiJson<MkdirBody>,
) -> Result<StatusCode, ApiError> {
    check_path(&b.path)?;
    let live = d.live_for(&id, &caller)?;
    sandbox(&live)
        .await?
        .make_dir(&b.path, b.parents)
        .await
        .map_err(fail("making the directory"))?;
    Ok(StatusCode::CREATED)
}

pub async fn rename(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<String>,
    ApiJson(b): ApiJson<MoveBody>,
) -> Result<StatusCode, ApiError> {
    check_path(&b.from)?;
    check_path(&b.to)?;
    let live = d.live_for(&id, &caller)?;
    sandbox(&live).await?.rename(&b.from, &b.to).await.map_err(fail("moving the file"))?;
    d.audit(&caller, "move_file", Some(&id), json!({"from": b.from, "to": b.to}));
    Ok(StatusCode::NO_CONTENT)
}
