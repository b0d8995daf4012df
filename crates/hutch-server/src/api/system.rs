//! Health, version, metrics, API keys, audit log.
use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::{Extension, Json};
use serde_json::{json, Value};

use super::types::{CreateKey, LimitQuery};
use super::{ApiJson, ApiPath, ApiQuery};
use crate::daemon::{Caller, Daemon};
use crate::error::ApiError;

pub async fn health() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

pub async fn version(State(d): State<Arc<Daemon>>) -> Json<Value> {
    let (available, unavailable) = d.backend_names();
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "agent_protocol": hutch_core::AGENT_PROTOCOL_VERSION,
        "backends": available,
        "unavailable_backends": unavailable,
    }))
}

pub async fn metrics(State(d): State<Arc<Daemon>>) -> Result<impl IntoResponse, ApiError> {
    let by_state = d.store.count_by_state()?;
    let states: BTreeMap<String, usize> =
        by_state.into_iter().map(|(k, v)| (k.as_str().to_string(), v)).collect();
    let text = crate::metrics::global().render(&states, d.cfg.max_sandboxes);
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text))
}

fn admin(caller: &Caller) -> Result<(), ApiError> {
    if caller.admin {
        Ok(())
    } else {
        Err(ApiError::forbidden("only admin keys may manage keys and read the audit log"))
    }
}

pub async fn create_key(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiJson(b): ApiJson<CreateKey>,
) -> Result<impl IntoResponse, ApiError> {
    admin(&caller)?;
    let (row, secret) =
        d.create_key(&b.name, b.admin, b.max_sandboxes, b.rate_per_minute, b.format)?;
    d.audit(
        &caller,
        "create_key",
        None,
        json!({"key": row.id, "name": row.name, "admin": row.admin}),
    );
    let mut v = serde_json::to_value(&row).unwrap_or_default();
    v["secret"] = Value::String(secret);
    Ok((StatusCode::CREATED, Json(v)))
}

pub async fn list_keys(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<Value>, ApiError> {
    admin(&caller)?;
    Ok(Json(json!({"keys": d.store.list_keys()?})))
}

pub async fn revoke_key(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    admin(&caller)?;
    if !d.store.revoke_key(&id, hutch_store::now_ms())? {
        return Err(ApiError::not_found(format!("no active key {id}")));
    }
    d.audit(&caller, "revoke_key", None, json!({"key": id}));
    Ok(StatusCode::NO_CONTENT)
}

pub async fn audit(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiQuery(q): ApiQuery<LimitQuery>,
) -> Result<Json<Value>, ApiError> {
    admin(&caller)?;
    Ok(Json(json!({"entries": d.store.recent_audit(q.limit.unwrap_or(100).min(10_000))?})))
}
