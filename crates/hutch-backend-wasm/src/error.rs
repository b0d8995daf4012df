//! Errors of the wasm backend.
use hutch_core::SandboxError;

#[derive(Debug, thiserror::Error)]
pub enum WasmError {
    #[error("cannot configure the wasmtime engine: {0}")]
    Engine(String),
    #[error("{path} is not a WebAssembly module or component: {reason}")]
    NotWasm { path: String, reason: String },
    #[error("cannot compile {what}: {message}")]
    Compile { what: String, message: String },
    #[error("cannot link {what}: {message}")]
    Link { what: String, message: String },
    #[error("{context}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{command}: command not found in the wasm sandbox; {hint}")]
    UnknownCommand { command: String, hint: String },
    #[error("the {guest} guest is not installed ({path}); run scripts/build-wasm-guests.sh")]
    GuestMissing { guest: String, path: String },
}

impl WasmError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        WasmError::Io { context: context.into(), source }
    }
}

impl From<WasmError> for SandboxError {
    fn from(e: WasmError) -> Self {
        match e {
            WasmError::Io { context, source } => SandboxError::Io { context, source },
            WasmError::UnknownCommand { .. } | WasmError::NotWasm { .. } => SandboxError::Agent {
                code: hutch_proto::ErrorCode::NotFound,
                message: e.to_string(),
            },
            WasmError::GuestMissing { .. } => SandboxError::Unavailable {
                backend: "wasm".into(),
                reason: e.to_string(),
                fix: "run scripts/build-wasm-guests.sh".into(),
            },
            other => SandboxError::runtime("wasm", other.to_string()),
        }
    }
}
