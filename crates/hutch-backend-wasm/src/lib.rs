//! The `wasm` backend: guests are WebAssembly modules (WASI preview 1) and components (WASI
//! preview 2, `wasi:cli/command`) run by an embedded wasmtime. Each command is a fresh instance
//! from a pooling allocator; the sandbox is a workspace directory, the only one its guests see.
//! Python and JavaScript are guests the project builds (CPython as a component, QuickJS as a
//! module); a `.wasm` file in the workspace runs the same way.
//!
//! Isolation comes from WebAssembly itself (bounds-checked linear memory, no ambient host
//! access), WASI capabilities (one preopened directory, no sockets), the memory limiter and the
//! epoch deadline; there are no processes, signals handlers, shells or `fork`.
//!
//! Unsafe code lives in two modules only: `engine` (loading its own compiled artefacts) and
//! `workspace_mount` (mount syscalls).
#![deny(unsafe_code)]

mod contexts;
pub mod engine;
pub mod error;
mod files;
pub mod guests;
pub mod run;
mod sandbox;
pub mod state;
pub mod stdio;
mod workspace_mount;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use hutch_core::{
    Availability, Backend, Discard, ExecRequest, GuestKind, Image, Phase, PhaseTimings, Sandbox,
    SandboxError, SandboxSpec,
};

pub use engine::{PoolSizes, Prepared, WasmEngine};
pub use error::WasmError;
pub use files::WORKSPACE;
pub use sandbox::WasmSandbox;

pub(crate) fn next_id() -> u64 {
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// Where the backend keeps its workspaces and finds its guests.
#[derive(Debug, Clone)]
pub struct WasmConfig {
    /// Workspaces live in `state_dir/wasm/<id>`.
    pub state_dir: PathBuf,
    pub guest_dir: PathBuf,
}

impl Default for WasmConfig {
    fn default() -> Self {
        Self {
            state_dir: std::env::var_os("HUTCH_STATE_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/run/hutch")),
            guest_dir: guests::default_guest_dir(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct WasmBackend {
    config: WasmConfig,
    engine: Arc<WasmEngine>,
}

impl WasmBackend {
    pub fn new(config: WasmConfig) -> Result<Self, SandboxError> {
        let engine = WasmEngine::shared().map_err(|e| SandboxError::Unavailable {
            backend: "wasm".into(),
            reason: e.to_string(),
            fix: "check the address-space limit (ulimit -v) and HUTCH_WASM_CACHE".into(),
        })?;
        Ok(Self { config, engine })
    }

    pub fn engine(&self) -> &Arc<WasmEngine> {
        &self.engine
    }

    fn root(&self, id: &str) -> Result<PathBuf, SandboxError> {
        if !hutch_core::is_sandbox_id(id) {
            return Err(SandboxError::InvalidSpec(format!("not a sandbox id: {id:?}")));
        }
        Ok(self.config.state_dir.join("wasm").join(id))
    }
}

/// Unmounts (when mounted) and removes a workspace. Idempotent.
pub(crate) fn reap_dir(root: &std::path::Path) -> Result<(), SandboxError> {
    workspace_mount::unmount(root);
    match std::fs::remove_dir_all(root) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(SandboxError::io(format!("cannot remove {}", root.display()), e)),
    }
}

#[async_trait]
impl Backend for WasmBackend {
    fn name(&self) -> String {
        "wasm".into()
    }

    fn guest_kind(&self) -> GuestKind {
        GuestKind::Wasi
    }

    async fn availability(&self) -> Availability {
        // A tiny WASI command proves the engine, the allocator and the WASI linking work; the
        // language guests are reported separately (they are files that may be missing).
        let probe = async {
            let mut sb = self.create(SandboxSpec::default()).await?;
            let r = async {
                sb.start().await?;
                sb.write_file("probe.wasm", &probe_module()?, None).await?;
                sb.exec(ExecRequest::argv(["probe.wasm"]), Vec::new(), &mut Discard).await
            }
            .await;
            let _ = sb.destroy().await;
            r
        };
        let guests: Vec<String> = guests::GUESTS
            .iter()
            .map(|g| {
                let p = self.config.guest_dir.join(g.file);
                if p.exists() {
                    format!("{} ({})", g.commands[0], g.name)
                } else {
                    format!("{}: missing {}", g.commands[0], p.display())
                }
            })
            .collect();
        match probe.await {
            Ok(r) if r.stdout == b"ok\n" => Availability::yes(
                "wasm",
                format!(
                    "wasmtime 48, {} allocator; guests: {}",
                    self.engine.allocator,
                    guests.join(", ")
                ),
            ),
            Ok(r) => Availability::no(
                "wasm",
                format!(
                    "probe module printed {:?}, status {:?}",
                    String::from_utf8_lossy(&r.stdout),
                    r.status
                ),
                "report a bug",
            ),
            Err(e) => Availability::no("wasm", e.to_string(), "check HUTCH_STATE_DIR is writable"),
        }
    }

    async fn create(&self, spec: SandboxSpec) -> Result<Box<dyn Sandbox>, SandboxError> {
        let t = Instant::now();
        if spec.image != Image::Host {
            return Err(SandboxError::InvalidSpec(
                "the wasm backend has no root filesystem: --rootfs does not apply (guests see only /workspace)".into(),
            ));
        }
        if spec.workdir != WORKSPACE && !spec.workdir.starts_with("/workspace/") {
            return Err(SandboxError::InvalidSpec(format!(
                "workdir {} is outside {WORKSPACE}, the only directory of a wasm sandbox",
                spec.workdir
            )));
        }
        let id = hutch_core::new_sandbox_id();
        let root = self.root(&id)?;
        let mut timings = PhaseTimings::default();
        timings.add(Phase::Prepare, t.elapsed());
        Ok(Box::new(WasmSandbox {
            id,
            spec,
            engine: self.engine.clone(),
            guest_dir: self.config.guest_dir.clone(),
            root,
            files: None,
            running: Arc::new(Mutex::new(Default::default())),
            memory_used: Arc::new(AtomicU64::new(0)),
            next_pid: AtomicU32::new(0),
            timings: Arc::new(Mutex::new(timings)),
            stopped: AtomicBool::new(false),
            contexts: Default::default(),
        }))
    }

    async fn reap(&self, id: &str) -> Result<(), SandboxError> {
        reap_dir(&self.root(id)?)
    }

    async fn sandbox_ids(&self) -> Vec<String> {
        std::fs::read_dir(self.config.state_dir.join("wasm"))
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| e.file_name().into_string().ok())
                    .filter(|n| hutch_core::is_sandbox_id(n))
                    .collect()
            })
            .unwrap_or_default()
    }

    async fn host_resources(&self) -> Vec<String> {
        self.sandbox_ids()
            .await
            .into_iter()
            .map(|id| {
                format!("wasm-workspace:{}", self.config.state_dir.join("wasm").join(id).display())
            })
            .collect()
    }
}

/// A minimal WASI preview 1 command that prints `ok`: the availability probe, and the smallest
/// guest for measuring instance acquisition.
pub const PROBE_WAT: &str = r#"(module
  (import "wasi_snapshot_preview1" "fd_write" (func $w (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "ok\n")
  (func (export "_start")
    (i32.store (i32.const 0) (i32.const 16))
    (i32.store (i32.const 4) (i32.const 3))
    (drop (call $w (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))))"#;

pub fn probe_module() -> Result<Vec<u8>, WasmError> {
    wat::parse_str(PROBE_WAT)
        .map_err(|e| WasmError::Compile { what: "probe".into(), message: e.to_string() })
}
