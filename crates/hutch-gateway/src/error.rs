//! Gateway errors: each becomes a JSON `{code, message}` response with a fitting status.
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// The gateway cannot start as configured.
    #[error("gateway setup: {0}")]
    Setup(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    NotFound(String),
    /// The variant cannot run on this host (e.g. no wasmtime CLI).
    #[error("{0}")]
    Unavailable(String),
    #[error("{0}")]
    Timeout(String),
    /// The handler failed: nonzero exit, trap, out of memory, output limit.
    #[error("{0}")]
    HandlerFailed(String),
    #[error("upstream: {0}")]
    Upstream(String),
}

impl GatewayError {
    fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            GatewayError::Setup(_) => (StatusCode::INTERNAL_SERVER_ERROR, "setup"),
            GatewayError::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            GatewayError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            GatewayError::Unavailable(_) => (StatusCode::NOT_IMPLEMENTED, "unavailable"),
            GatewayError::Timeout(_) => (StatusCode::GATEWAY_TIMEOUT, "timeout"),
            GatewayError::HandlerFailed(_) => (StatusCode::INTERNAL_SERVER_ERROR, "handler_failed"),
            GatewayError::Upstream(_) => (StatusCode::BAD_GATEWAY, "upstream"),
        }
    }
}

impl IntoResponse for GatewayError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        (status, axum::Json(serde_json::json!({"code": code, "message": self.to_string()})))
            .into_response()
    }
}
