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

pub fn make(backend: BackendName, runtime: RuntimeName) -> Result<Box<dyn Backend>, SandboxError> {
    Ok(match backend {
        BackendName::Container => {
            Box::new(ContainerBackend::new(ContainerConfig::new(runtime.into()))?)
        }
        BackendName::Wasm => Box::new(WasmBackend::new(WasmConfig::default())?),
        BackendName::Process => Box::new(ProcessBackend::new()?),
    })
}
