//! The errors of the E2B-compatible API, rendered in the shape each SDK code path parses: the
//! control plane's `{code: <int>, message}`, Connect-RPC's `{code: "<name>", message}`, and the
//! sandbox proxy's 502 for a sandbox that is gone.
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use hutch_server::ApiError;
use serde_json::json;

#[derive(Debug, thiserror::Error)]
pub enum E2bError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    AlreadyExists(String),
    /// A feature of E2B that hutch does not implement; the message names it.
    #[error("{0}")]
    Unimplemented(String),
    #[error("{0}")]
    DeadlineExceeded(String),
    /// The sandbox in the routing header does not exist (any more).
    #[error("The sandbox was not found")]
    SandboxGone(String),
    /// An error of hutch's own API (its status and message are kept).
    #[error("{}", .0.message)]
    Hutch(ApiError),
}

impl From<ApiError> for E2bError {
    fn from(e: ApiError) -> Self {
        E2bError::Hutch(e)
    }
}

impl E2bError {
    pub fn unimplemented(feature: &str) -> Self {
        E2bError::Unimplemented(format!("{feature} is not supported by hutch (see docs/e2b.md)"))
    }

    pub fn status(&self) -> StatusCode {
        match self {
            E2bError::BadRequest(_) => StatusCode::BAD_REQUEST,
            E2bError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            E2bError::Forbidden(_) => StatusCode::FORBIDDEN,
            E2bError::NotFound(_) => StatusCode::NOT_FOUND,
            E2bError::AlreadyExists(_) => StatusCode::CONFLICT,
            E2bError::Unimplemented(_) => StatusCode::NOT_IMPLEMENTED,
            E2bError::DeadlineExceeded(_) => StatusCode::GATEWAY_TIMEOUT,
            E2bError::SandboxGone(_) => StatusCode::BAD_GATEWAY,
            E2bError::Hutch(e) => e.status,
        }
    }

    /// The Connect-RPC code name.
    pub fn rpc_code(&self) -> &'static str {
        match self {
            E2bError::BadRequest(_) => "invalid_argument",
            E2bError::Unauthorized(_) => "unauthenticated",
            E2bError::Forbidden(_) => "permission_denied",
            E2bError::NotFound(_) => "not_found",
            E2bError::AlreadyExists(_) => "already_exists",
            E2bError::Unimplemented(_) => "unimplemented",
            E2bError::DeadlineExceeded(_) => "deadline_exceeded",
            E2bError::SandboxGone(_) => "unavailable",
            E2bError::Hutch(e) => match e.status.as_u16() {
                400 | 413 | 415 => "invalid_argument",
                401 => "unauthenticated",
                403 => "permission_denied",
                404 => "not_found",
                409 if e.code == "already_exists" => "already_exists",
                409 => "failed_precondition",
                429 => "resource_exhausted",
                501 => "unimplemented",
                503 => "unavailable",
                504 => "deadline_exceeded",
                507 => "resource_exhausted",
                _ => "internal",
            },
        }
    }

    /// The error as a Connect-RPC error (unary response, or before a stream starts).
    pub fn rpc(self) -> Response {
        if let E2bError::SandboxGone(_) = self {
            return self.into_response();
        }
        let status = match self.rpc_code() {
            "invalid_argument" => StatusCode::BAD_REQUEST,
            "failed_precondition" => StatusCode::BAD_REQUEST,
            "unauthenticated" => StatusCode::UNAUTHORIZED,
            "permission_denied" => StatusCode::FORBIDDEN,
            "not_found" => StatusCode::NOT_FOUND,
            "already_exists" => StatusCode::CONFLICT,
            "resource_exhausted" => StatusCode::TOO_MANY_REQUESTS,
            "unimplemented" => StatusCode::NOT_IMPLEMENTED,
            "unavailable" => StatusCode::SERVICE_UNAVAILABLE,
            "deadline_exceeded" => StatusCode::GATEWAY_TIMEOUT,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        (status, Json(self.rpc_json())).into_response()
    }

    /// `{"code": "<name>", "message": ...}`, also used in a stream's end frame.
    pub fn rpc_json(&self) -> serde_json::Value {
        json!({"code": self.rpc_code(), "message": self.to_string()})
    }
}

/// The control plane's shape: `{"code": <status>, "message": ...}`. Server errors say they are
/// not worth retrying, so the SDK does not repeat a create that failed for good.
impl IntoResponse for E2bError {
    fn into_response(self) -> Response {
        let status = self.status();
        let body = match &self {
            E2bError::SandboxGone(id) => json!({
                "sandboxId": id,
                "message": "The sandbox was not found",
                "code": 502,
            }),
            other => json!({"code": status.as_u16(), "message": other.to_string()}),
        };
        let mut r = (status, Json(body)).into_response();
        if status.is_server_error() && !matches!(status.as_u16(), 502 | 503) {
            r.headers_mut().insert("should-retry", HeaderValue::from_static("false"));
        }
        r
    }
}

/// A Connect-RPC handler result: errors render as Connect errors.
pub struct Rpc<T>(pub Result<T, E2bError>);

impl<T: IntoResponse> IntoResponse for Rpc<T> {
    fn into_response(self) -> Response {
        match self.0 {
            Ok(v) => v.into_response(),
            Err(e) => e.rpc(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hutch_errors_keep_their_status_and_map_to_connect_codes() {
        let e = E2bError::from(ApiError::not_found("no such file"));
        assert_eq!(e.status(), StatusCode::NOT_FOUND);
        assert_eq!(e.rpc_code(), "not_found");
        assert_eq!(e.rpc_json()["message"], "no such file");
        let e = E2bError::unimplemented("PTY");
        assert_eq!(e.rpc_code(), "unimplemented");
        assert!(e.to_string().contains("PTY"));
    }

    #[test]
    fn server_errors_tell_the_sdk_not_to_retry() {
        let r = E2bError::unimplemented("pausing a sandbox").into_response();
        assert_eq!(r.status(), StatusCode::NOT_IMPLEMENTED);
        assert_eq!(r.headers()["should-retry"], "false");
    }
}
