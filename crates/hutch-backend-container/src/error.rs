use std::path::PathBuf;

use hutch_core::SandboxError;

#[derive(Debug, thiserror::Error)]
pub enum ContainerError {
    #[error("unknown OCI runtime {0:?}: choose crun or runc")]
    UnknownRuntime(String),
    #[error("OCI runtime {0} is not installed")]
    RuntimeMissing(&'static str),
    #[error("cannot start {0}")]
    Spawn(PathBuf, #[source] std::io::Error),
    #[error("{runtime} {op} failed: {message}")]
    RuntimeFailed { runtime: &'static str, op: &'static str, message: String },
    #[error("invalid seccomp profile: {0}")]
    Seccomp(String),
    #[error("cannot build the OCI bundle: {0}")]
    Bundle(String),
    #[error("{0}")]
    Io(String, #[source] std::io::Error),
}

impl ContainerError {
    /// What to do about it, when there is something to do.
    pub fn fix(&self) -> Option<String> {
        match self {
            ContainerError::RuntimeMissing(name) => Some(format!("install it (Debian/Ubuntu: apt-get install {name}) or pick the other one with --runtime")),
            ContainerError::UnknownRuntime(_) => Some("use --runtime crun or --runtime runc".into()),
            _ => None,
        }
    }
}

impl From<ContainerError> for SandboxError {
    fn from(e: ContainerError) -> Self {
        match e {
            ContainerError::RuntimeMissing(name) => SandboxError::Unavailable {
                backend: format!("container:{name}"),
                reason: format!("{name} is not installed"),
                fix: e.fix().unwrap_or_default(),
            },
            ContainerError::UnknownRuntime(r) => {
                SandboxError::InvalidSpec(format!("unknown OCI runtime {r:?}: choose crun or runc"))
            }
            ContainerError::Io(ctx, source) => SandboxError::Io { context: ctx, source },
            other => SandboxError::runtime("container", other.to_string()),
        }
    }
}
