//! The error every backend returns. [`SandboxError::kind`] gives the stable category the CLI maps
//! to exit codes and the API maps to `{code, message}`.
use hutch_proto::ErrorCode;

#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("invalid sandbox spec: {0}")]
    InvalidSpec(String),
    #[error("backend {backend} cannot run here: {reason}; {fix}")]
    Unavailable { backend: String, reason: String, fix: String },
    #[error("{what} failed: {message}")]
    Runtime { what: String, message: String },
    #[error("the guest agent did not become ready: {0}")]
    AgentNotReady(String),
    #[error("{message}")]
    Agent { code: ErrorCode, message: String },
    #[error("the guest agent connection closed (the sandbox stopped)")]
    AgentGone,
    #[error("the sandbox is not running")]
    NotRunning,
    #[error("{0} is not supported by this backend")]
    Unsupported(String),
    #[error("{context}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

/// Stable error categories.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    InvalidInput,
    Unavailable,
    NotFound,
    Runtime,
    Unsupported,
    Internal,
}

impl SandboxError {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        SandboxError::Io { context: context.into(), source }
    }

    pub fn runtime(what: impl Into<String>, message: impl Into<String>) -> Self {
        SandboxError::Runtime { what: what.into(), message: message.into() }
    }

    pub fn kind(&self) -> ErrorKind {
        match self {
            SandboxError::InvalidSpec(_) => ErrorKind::InvalidInput,
            SandboxError::Unavailable { .. } => ErrorKind::Unavailable,
            SandboxError::Agent { code: ErrorCode::NotFound, .. } => ErrorKind::NotFound,
            SandboxError::Agent { code: ErrorCode::Unsupported, .. } => ErrorKind::Unsupported,
            SandboxError::Agent {
                code: ErrorCode::InvalidRequest | ErrorCode::AlreadyExists,
                ..
            } => ErrorKind::InvalidInput,
            SandboxError::Agent { .. }
            | SandboxError::Runtime { .. }
            | SandboxError::AgentNotReady(_) => ErrorKind::Runtime,
            SandboxError::AgentGone | SandboxError::NotRunning => ErrorKind::Runtime,
            SandboxError::Unsupported(_) => ErrorKind::Unsupported,
            SandboxError::Io { .. } => ErrorKind::Internal,
        }
    }
}
