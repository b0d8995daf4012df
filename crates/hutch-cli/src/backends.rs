//! Choosing and constructing a backend from CLI flags.
use clap::ValueEnum;
use hutch_backend_container::{ContainerBackend, ContainerConfig, RuntimeKind};
use hutch_backend_process::ProcessBackend;
use hutch_backend_wasm::{WasmBackend, WasmConfig};
use hutch_core::{Backend, SandboxError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendName {
    /// OCI containers (crun or runc)
    Container,
    /// WebAssembly guests in an embedded wasmtime (python3, node, or a .wasm file)
    Wasm,
    /// No isolation at all: the benchmark baseline only
    Process,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RuntimeName {
    Crun,
    Runc,
}

impl From<RuntimeName> for RuntimeKind {
    fn from(r: RuntimeName) -> Self {
        match r {
            RuntimeName::Crun => RuntimeKind::Crun,
            RuntimeName::Runc => RuntimeKind::Runc,
        }
    }
}

/// The backend `hutch run` asked for. For containers, first reaps what earlier `hutch run`s
/// killed before they could clean up left behind (their sandbox directories; live sandboxes and
/// the daemon's are not touched), warning on stderr about any it could not reap.
pub async fn make(
    backend: BackendName,
    runtime: RuntimeName,
) -> Result<Box<dyn Backend>, SandboxError> {
    Ok(match backend {
        BackendName::Container => {
            let b = ContainerBackend::new(ContainerConfig::new(runtime.into()))?;
            for (id, r) in b.sweep_orphans().await {
                if let Err(e) = r {
                    eprintln!("hutch: could not clean up sandbox {id}, left by a killed run: {e}");
                }
            }
            Box::new(b)
        }
        BackendName::Wasm => Box::new(WasmBackend::new(WasmConfig::default())?),
        BackendName::Process => Box::new(ProcessBackend::new()?),
    })
}
