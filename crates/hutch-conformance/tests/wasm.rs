//! The conformance suite against the wasm backend (wasmtime embedded; Python and JavaScript
//! guests from scripts/build-wasm-guests.sh). Cases that cannot apply to WebAssembly say why
//! (`hutch_conformance::NOT_APPLICABLE_TO_WASI`).
use hutch_backend_wasm::{WasmBackend, WasmConfig};
use hutch_conformance::conformance_suite;

fn backend() -> anyhow::Result<Box<dyn hutch_core::Backend>> {
    Ok(Box::new(WasmBackend::new(WasmConfig::default())?))
}

conformance_suite!(wasm, backend);
