//! Sandboxes: create, get, list, delete, extend TTL.
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::{Extension, Json};
use hutch_store::{ListFilter, SandboxState};
use serde_json::{json, Value};

use super::types::{CreateSandbox, ListQuery, SandboxView, SetTtl};
use super::{ApiJson, ApiPath, ApiQuery};
use crate::daemon::{Caller, Daemon};
use crate::error::ApiError;

pub async fn create(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiJson(req): ApiJson<CreateSandbox>,
) -> Result<impl IntoResponse, ApiError> {
    let view = d.create(req, &caller).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

pub async fn get(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<SandboxView>, ApiError> {
    Ok(Json(SandboxView::from_row(d.row_for(&id, &caller)?)))
}

pub async fn list(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let mut f = ListFilter {
        pool: q.pool,
        backend: q.backend,
        include_stopped: q.include_stopped,
        limit: Some(q.limit.unwrap_or(1000).min(10_000)),
        ..Default::default()
    };
    if let Some(s) = q.state {
        f.state = Some(s.parse::<SandboxState>().map_err(|_| {
            ApiError::bad_request(format!(
                "unknown state {s:?}: use cold, warming, warm, running, waiting or stopped"
            ))
        })?);
    }
    if let Some(m) = q.metadata {
        for pair in m.split(',').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once(':').ok_or_else(|| {
                ApiError::bad_request(format!("metadata filter {pair:?}: use key:value"))
            })?;
            f.metadata.insert(k.to_string(), v.to_string());
        }
    }
    Ok(Json(json!({"sandboxes": d.list(f, &caller)?})))
}

pub async fn delete(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    d.delete(&id, &caller).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn set_ttl(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<String>,
    ApiJson(b): ApiJson<SetTtl>,
) -> Result<Json<SandboxView>, ApiError> {
    Ok(Json(d.set_ttl(&id, b.ttl_seconds, &caller)?))
}
