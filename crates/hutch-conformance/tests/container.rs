//! The conformance suite against the container backend, once per OCI runtime.
use hutch_backend_container::{ContainerBackend, ContainerConfig, RuntimeKind};
use hutch_conformance::conformance_suite;

fn backend(kind: RuntimeKind) -> anyhow::Result<Box<dyn hutch_core::Backend>> {
    Ok(Box::new(ContainerBackend::new(ContainerConfig::new(kind))?))
}

conformance_suite!(crun, || backend(RuntimeKind::Crun));
conformance_suite!(runc, || backend(RuntimeKind::Runc));
