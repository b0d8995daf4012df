//! Warm pools.
use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::{Extension, Json};
use serde_json::{json, Value};

use super::{ApiJson, ApiPath};
use crate::daemon::{Caller, Daemon};
use crate::error::ApiError;
use crate::pool::{PoolConfig, PoolStatus};

pub async fn create(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiJson(cfg): ApiJson<PoolConfig>,
) -> Result<impl IntoResponse, ApiError> {
    Ok((StatusCode::CREATED, Json(d.create_pool(cfg, &caller)?)))
}

pub async fn list(State(d): State<Arc<Daemon>>) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!({"pools": d.list_pools()?})))
}

pub async fn get(
    State(d): State<Arc<Daemon>>,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<PoolStatus>, ApiError> {
    Ok(Json(d.pool_status(&name)?))
}

pub async fn delete(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    ApiPath(name): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    d.delete_pool(&name, &caller).await?;
    Ok(StatusCode::NO_CONTENT)
}
