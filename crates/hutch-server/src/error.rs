//! The one error type of the API: an HTTP status, a stable machine code and a message for
//! people. Internal details (paths, library errors) go to the log, never into the response.
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hutch_core::{AgentErrorCode, ErrorKind, SandboxError};
use hutch_store::StoreError;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct ApiError {
    #[serde(skip)]
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into() }
    }
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }
    pub fn not_found(what: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", what)
    }
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }
    pub fn capacity(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "capacity_exceeded", message)
    }
    pub fn rate_limited(message: impl Into<String>) -> Self {
        Self::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", message)
    }
    pub fn internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error; the daemon log has the details",
        )
    }

    /// Logs the full error chain and returns the client-safe error.
    pub fn from_sandbox(e: SandboxError, context: &str) -> Self {
        let msg = e.to_string();
        match &e {
            SandboxError::InvalidSpec(m) => Self::bad_request(m.clone()),
            SandboxError::Unavailable { backend, reason, .. } => {
                tracing::warn!(error = %msg, context, "backend unavailable");
                Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "backend_unavailable",
                    format!("backend {backend} cannot run on this host: {reason}"),
                )
            }
            SandboxError::Agent { code, message } => match code {
                AgentErrorCode::NotFound => {
                    Self::new(StatusCode::NOT_FOUND, "not_found", message.clone())
                }
                AgentErrorCode::PermissionDenied => {
                    Self::new(StatusCode::FORBIDDEN, "path_forbidden", message.clone())
                }
                AgentErrorCode::AlreadyExists => Self::conflict(message.clone()),
                AgentErrorCode::InvalidRequest | AgentErrorCode::Unsupported => {
                    Self::bad_request(message.clone())
                }
                AgentErrorCode::NoSpace => Self::new(
                    StatusCode::INSUFFICIENT_STORAGE,
                    "insufficient_storage",
                    format!("{message} (the sandbox's workspace is full)"),
                ),
                AgentErrorCode::NoSuchProcess => {
                    Self::new(StatusCode::NOT_FOUND, "no_such_process", message.clone())
                }
                _ => {
                    tracing::warn!(error = %msg, context, "agent error");
                    Self::new(StatusCode::BAD_GATEWAY, "sandbox_error", message.clone())
                }
            },
            SandboxError::Unsupported(what) => Self::new(
                StatusCode::NOT_IMPLEMENTED,
                "not_supported",
                format!("{what} is not supported by this sandbox's backend"),
            ),
            SandboxError::AgentGone | SandboxError::NotRunning => Self::new(
                StatusCode::CONFLICT,
                "sandbox_stopped",
                "the sandbox is not running (it was deleted or stopped)",
            ),
            _ => {
                tracing::error!(error = %msg, kind = ?e.kind(), context, "sandbox operation failed");
                match e.kind() {
                    ErrorKind::InvalidInput => Self::bad_request(msg),
                    _ => Self::new(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "sandbox_error",
                        format!("{context} failed; the daemon log has the details"),
                    ),
                }
            }
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(id) => Self::not_found(format!("no sandbox {id}")),
            StoreError::InvalidTransition { .. } => Self::conflict(e.to_string()),
            StoreError::Duplicate(what) => Self::conflict(format!("{what} already exists")),
            other => {
                tracing::error!(error = %other, "state store failure");
                Self::internal()
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        crate::metrics::global().error(self.code);
        // only where waiting helps: a full daemon or a rate limit (not a missing backend)
        let retry = matches!(self.code, "capacity_exceeded" | "rate_limited");
        let mut resp = (self.status, axum::Json(self)).into_response();
        if retry {
            resp.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from_static("1"));
        }
        resp
    }
}
