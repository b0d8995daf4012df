//! The process-wide wasmtime engine: a pooling instance allocator, epoch interruption driven by
//! one ticker thread, async support (so a timeout or a kill drops a running guest at its next
//! epoch tick, even inside a blocking WASI call), compiled artefacts cached on disk and
//! pre-linked instances cached in memory.
#![allow(unsafe_code)]
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, Linker as ComponentLinker};
use wasmtime::{
    Config, Enabled, Engine, InstanceAllocationStrategy, Linker, Module, PoolingAllocationConfig,
};
use wasmtime_wasi::p2::bindings::CommandPre;

use crate::error::WasmError;
use crate::state::{P1State, P2State};

/// How often the epoch advances: the resolution of timeouts and kills.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Written bytes of a freed memory or table slot restored in place rather than decommitted,
/// where the kernel can say which pages were written (`PAGEMAP_SCAN`).
const KEEP_RESIDENT_SCANNED: usize = 1 << 20;
/// Without `PAGEMAP_SCAN` the budget is a prefix that is zeroed whether written or not.
const KEEP_RESIDENT_PREFIX: usize = 64 << 10;

/// Whether the kernel has the `PAGEMAP_SCAN` ioctl (Linux 6.7), which wasmtime then uses.
fn has_pagemap_scan() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut nums = release.split(|c: char| !c.is_ascii_digit()).map(|n| n.parse::<u32>());
    matches!((nums.next(), nums.next()), (Some(Ok(major)), Some(Ok(minor))) if (major, minor) >= (6, 7))
}

/// Sizes of the pooling allocator. Every slot is reserved address space, not memory: a linear
/// memory slot reserves 4 GiB plus guards, committed only as the guest touches pages.
#[derive(Debug, Clone)]
pub struct PoolSizes {
    pub instances: u32,
    pub memories: u32,
    pub tables: u32,
    pub table_elements: usize,
}

impl Default for PoolSizes {
    fn default() -> Self {
        Self { instances: 1000, memories: 1000, tables: 1000, table_elements: 100_000 }
    }
}

/// What a compiled artefact is.
#[derive(Clone)]
pub enum Prepared {
    /// A core module linked against WASI preview 1.
    Module(wasmtime::InstancePre<P1State>),
    /// A component of the `wasi:cli/command` world, linked against WASI preview 2.
    Component(CommandPre<P2State>),
}

impl Prepared {
    pub fn kind(&self) -> &'static str {
        match self {
            Prepared::Module(_) => "module",
            Prepared::Component(_) => "component",
        }
    }
}

pub struct WasmEngine {
    engine: Engine,
    p1: Linker<P1State>,
    p2: ComponentLinker<P2State>,
    cache_dir: PathBuf,
    /// Compiled and linked artefacts by the SHA-256 of their bytes.
    prepared: Mutex<HashMap<[u8; 32], Prepared>>,
    /// Host files already prepared, by path, with the identity of the file they were read from:
    /// a language guest (24 MB for Python) is not read and hashed again on every run.
    files: Mutex<HashMap<PathBuf, (FileStamp, Prepared)>>,
    /// Whether the pooling allocator is in use (else the on-demand one, with the reason).
    pub allocator: String,
}

impl std::fmt::Debug for WasmEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmEngine")
            .field("cache_dir", &self.cache_dir)
            .field("allocator", &self.allocator)
            .finish()
    }
}

fn config(pool: Option<&PoolSizes>) -> Config {
    let mut c = Config::new();
    c.epoch_interruption(true);
    c.wasm_component_model(true);
    c.parallel_compilation(true);
    // Linear memories start from a copy-on-write image of their data segments.
    c.memory_init_cow(true);
    // A guest's deep recursion ends in a trap, not a host crash.
    c.max_wasm_stack(2 << 20);
    // The fiber a guest runs on also holds the host calls it makes at its deepest: with too
    // little room above the wasm stack, a guest recursing to its limit and then calling WASI
    // overflowed the fiber and aborted the whole process.
    c.async_stack_size(4 << 20);
    if let Some(p) = pool {
        let keep_resident =
            if has_pagemap_scan() { KEEP_RESIDENT_SCANNED } else { KEEP_RESIDENT_PREFIX };
        let mut pc = PoolingAllocationConfig::default();
        pc.total_core_instances(p.instances)
            .total_component_instances(p.instances)
            .total_memories(p.memories)
            .total_tables(p.tables)
            .total_stacks(p.instances)
            .table_elements(p.table_elements)
            .max_memory_size(4 << 30)
            .max_core_instances_per_component(64)
            .max_memories_per_component(16)
            .max_tables_per_component(16)
            .max_core_instance_size(4 << 20)
            .max_component_instance_size(4 << 20)
            // A freed slot is reset by finding the pages its instance wrote (the PAGEMAP_SCAN
            // ioctl, Linux 6.7+) and restoring only those with memset/memcpy, up to this
            // many bytes; they stay resident, so the next instance takes no page faults and
            // the reset needs no madvise (whose TLB shootdown interrupts every core running
            // one of our threads). Written pages past the budget are decommitted with madvise;
            // on an older kernel the budget is a prefix zeroed whether written or not, so it
            // stays small.
            .pagemap_scan(Enabled::Auto)
            .linear_memory_keep_resident(keep_resident)
            .table_keep_resident(keep_resident);
        c.allocation_strategy(InstanceAllocationStrategy::Pooling(pc));
    }
    c
}

impl WasmEngine {
    /// The process-wide engine (one ticker thread, one artefact cache), created on first use.
    pub fn shared() -> Result<Arc<WasmEngine>, WasmError> {
        static SHARED: OnceLock<Result<Arc<WasmEngine>, String>> = OnceLock::new();
        SHARED
            .get_or_init(|| {
                WasmEngine::new(default_cache_dir(), PoolSizes::default())
                    .map(Arc::new)
                    .map_err(|e| e.to_string())
            })
            .clone()
            .map_err(WasmError::Engine)
    }

    pub fn new(cache_dir: PathBuf, pool: PoolSizes) -> Result<Self, WasmError> {
        // The pooling allocator reserves its address space up front; where that is refused
        // (a small `ulimit -v`), fall back to on-demand allocation and say so.
        let (engine, allocator) = match Engine::new(&config(Some(&pool))) {
            Ok(e) => (e, format!("pooling ({} instance slots)", pool.instances)),
            Err(pool_err) => {
                let e =
                    Engine::new(&config(None)).map_err(|e| WasmError::Engine(format!("{e:#}")))?;
                (e, format!("on-demand (pooling refused: {pool_err})"))
            }
        };
        let weak = engine.weak();
        std::thread::Builder::new()
            .name("hutch-wasm-epoch".into())
            .spawn(move || {
                while let Some(e) = weak.upgrade() {
                    drop(e);
                    std::thread::sleep(EPOCH_TICK);
                    match weak.upgrade() {
                        Some(e) => e.increment_epoch(),
                        None => break,
                    }
                }
            })
            .map_err(|e| WasmError::io("cannot start the epoch thread", e))?;

        let mut p1 = Linker::new(&engine);
        wasmtime_wasi::p1::add_to_linker_async(&mut p1, |s: &mut P1State| &mut s.wasi).map_err(
            |e| WasmError::Link { what: "WASI preview 1".into(), message: format!("{e:#}") },
        )?;
        let mut p2 = ComponentLinker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut p2).map_err(|e| WasmError::Link {
            what: "WASI preview 2".into(),
            message: format!("{e:#}"),
        })?;
        Ok(Self {
            engine,
            p1,
            p2,
            cache_dir,
            prepared: Mutex::new(HashMap::new()),
            files: Mutex::new(HashMap::new()),
            allocator,
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn cache_dir(&self) -> &Path {
        &self.cache_dir
    }

    /// Compiles (or loads from the disk cache) and links the module or component in `bytes`.
    /// `what` names it in errors.
    pub fn prepare(&self, what: &str, bytes: &[u8]) -> Result<Prepared, WasmError> {
        let key: [u8; 32] = Sha256::digest(bytes).into();
        if let Some(p) = self.lock().get(&key) {
            return Ok(p.clone());
        }
        let component = is_component(what, bytes)?;
        let path = self.cache_path(&key);
        let compile_err = |e: wasmtime::Error| WasmError::Compile {
            what: what.into(),
            message: format!("{e:#}"),
        };
        if !path.exists() {
            let art = if component {
                self.engine.precompile_component(bytes)
            } else {
                self.engine.precompile_module(bytes)
            }
            .map_err(compile_err)?;
            write_atomic(&path, &art)?;
        }
        let link_err =
            |e: wasmtime::Error| WasmError::Link { what: what.into(), message: format!("{e:#}") };
        let prepared = if component {
            // SAFETY: the file was written by `precompile_component` of an engine with the same
            // compatibility hash (it is part of the file name) into a cache directory only this
            // user can write (created 0700), so it is a trusted wasmtime artefact.
            let c =
                unsafe { Component::deserialize_file(&self.engine, &path) }.map_err(compile_err)?;
            let pre = self.p2.instantiate_pre(&c).map_err(link_err)?;
            Prepared::Component(CommandPre::new(pre).map_err(|e| WasmError::Link {
                what: what.into(),
                message: format!("not a wasi:cli/command component: {e:#}"),
            })?)
        } else {
            // SAFETY: as above, written by `precompile_module` of a compatible engine into a
            // directory only this user can write.
            let m =
                unsafe { Module::deserialize_file(&self.engine, &path) }.map_err(compile_err)?;
            Prepared::Module(self.p1.instantiate_pre(&m).map_err(link_err)?)
        };
        self.lock().insert(key, prepared.clone());
        Ok(prepared)
    }

    /// Reads and prepares a host file (a language guest, a gateway handler). The file is read
    /// and hashed again only when it is no longer the one prepared last time: another inode
    /// (the build script replaces guests with a rename), size, modification or change time.
    /// Files a guest can write (workspace modules) go through [`WasmEngine::prepare`] instead.
    pub fn prepare_file(&self, path: &Path) -> Result<Prepared, WasmError> {
        use std::io::Read;
        let read_err = |e| WasmError::io(format!("cannot read {}", path.display()), e);
        let mut file = std::fs::File::open(path).map_err(read_err)?;
        // the stamp and the bytes come from the same open file, so a replacement between the
        // two cannot pair old bytes with a new stamp
        let stamp = FileStamp::of(&file.metadata().map_err(read_err)?);
        if let Some((s, p)) = self.lock_files().get(path) {
            if *s == stamp {
                return Ok(p.clone());
            }
        }
        let mut bytes = Vec::with_capacity(stamp.len as usize);
        file.read_to_end(&mut bytes).map_err(read_err)?;
        let prepared = self.prepare(&path.display().to_string(), &bytes)?;
        self.lock_files().insert(path.to_path_buf(), (stamp, prepared.clone()));
        Ok(prepared)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Prepared>> {
        self.prepared.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_files(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, (FileStamp, Prepared)>> {
        self.files.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn cache_path(&self, key: &[u8; 32]) -> PathBuf {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.engine.precompile_compatibility_hash().hash(&mut h);
        let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
        self.cache_dir.join(format!("{hex}-{:016x}.cwasm", h.finish()))
    }
}

/// Which file a path named when it was read: a rename over it changes the inode, a write in
/// place the size or the modification and change times (the change time cannot be set back by
/// the file's owner).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileStamp {
    fn of(m: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        Self {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }
}

fn is_component(what: &str, bytes: &[u8]) -> Result<bool, WasmError> {
    let not = |reason: &str| WasmError::NotWasm { path: what.into(), reason: reason.into() };
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err(not("no \\0asm header"));
    }
    // Bytes 4..8: a core module has version 1 (layer 0); a component has layer 1.
    match (bytes[6], bytes[7]) {
        (0, 0) => Ok(false),
        (1, 0) => Ok(true),
        _ => Err(not("unknown binary version or layer")),
    }
}

fn write_atomic(path: &Path, data: &[u8]) -> Result<(), WasmError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    create_private_dir(dir)?;
    let tmp = dir.join(format!(".tmp-{}-{}", std::process::id(), crate::next_id()));
    std::fs::write(&tmp, data)
        .map_err(|e| WasmError::io(format!("cannot write {}", tmp.display()), e))?;
    std::fs::rename(&tmp, path)
        .map_err(|e| WasmError::io(format!("cannot rename into {}", path.display()), e))
}

pub(crate) fn create_private_dir(dir: &Path) -> Result<(), WasmError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| WasmError::io(format!("cannot create {}", dir.display()), e))
}

/// `$HUTCH_WASM_CACHE`, else /var/cache/hutch/wasm for root, else ~/.cache/hutch/wasm.
pub fn default_cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("HUTCH_WASM_CACHE") {
        return d.into();
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return "/var/cache/hutch/wasm".into();
    }
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    home.join(".cache/hutch/wasm")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small_engine(cache: &Path) -> WasmEngine {
        let pool = PoolSizes { instances: 4, memories: 4, tables: 4, table_elements: 1000 };
        WasmEngine::new(cache.to_path_buf(), pool).expect("engine")
    }

    #[test]
    fn a_prepared_file_is_read_again_once_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let engine = small_engine(&dir.path().join("cache"));
        let path = dir.path().join("guest.wasm");
        std::fs::write(&path, crate::probe_module().unwrap()).unwrap();
        assert_eq!(engine.prepare_file(&path).unwrap().kind(), "module");
        assert_eq!(engine.prepare_file(&path).unwrap().kind(), "module");

        // rewritten in place (same inode): the new bytes are what counts
        std::fs::write(&path, b"not wasm at all").unwrap();
        let e = engine.prepare_file(&path).err().expect("garbage must be refused");
        assert!(e.to_string().contains("not a WebAssembly"), "{e}");

        // replaced with a rename, as the guest build does
        let component = wat::parse_str("(component)").unwrap();
        let tmp = dir.path().join("guest.wasm.tmp");
        std::fs::write(&tmp, &component).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        let e = engine.prepare_file(&path).err().expect("an empty component is no command");
        assert!(e.to_string().contains("not a wasi:cli/command component"), "{e}");

        std::fs::remove_file(&path).unwrap();
        assert!(engine.prepare_file(&path).is_err(), "a removed file is not served from memory");
    }
}
