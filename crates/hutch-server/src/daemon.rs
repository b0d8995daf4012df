//! The sandbox manager behind the API.
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use hutch_backend_container::{ContainerBackend, ContainerConfig, RuntimeKind};
use hutch_backend_process::ProcessBackend;
use hutch_backend_wasm::{WasmBackend, WasmConfig};
use hutch_core::{Backend, HostCapacity, Image, SandboxSpec};
use hutch_store::{now_ms, KeyRow, ListFilter, SandboxRow, SandboxState, Store, StoreError};
use serde_json::json;

use crate::api::types::{CreateSandbox, KeyFormat, SandboxShape, SandboxView};
use crate::config::{OnShutdown, ServerConfig};
use crate::error::ApiError;
use crate::live::LiveSandbox;
use crate::metrics;
use crate::pool::{PoolConfig, PoolRuntime, PoolStatus, Reuse};

/// A waiting sandbox is an eviction candidate only after this much idleness, so one just handed
/// to a user is never evicted to make room for another.
const EVICT_WAITING_AFTER: Duration = Duration::from_secs(60);

/// A pool refill starts once acquisitions have paused this long...
const REFILL_SETTLE: Duration = Duration::from_millis(50);
/// ...or after this long at the most.
const REFILL_SETTLE_MAX: Duration = Duration::from_millis(250);

/// Who is calling: an API key, or a trusted local transport (the Unix socket) as admin.
#[derive(Debug, Clone, Default)]
pub struct Caller {
    pub key_id: Option<String>,
    pub admin: bool,
    pub max_sandboxes: Option<u32>,
}

impl Caller {
    pub fn local_admin() -> Self {
        Self { key_id: None, admin: true, max_sandboxes: None }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("cannot open the state store")]
    Store(#[from] StoreError),
    #[error("cannot create {0}")]
    StateDir(String, #[source] std::io::Error),
}

pub struct Daemon {
    pub cfg: ServerConfig,
    pub store: Store,
    backends: BTreeMap<String, Arc<dyn Backend>>,
    unavailable: BTreeMap<String, String>,
    live: RwLock<HashMap<String, Arc<LiveSandbox>>>,
    admission: tokio::sync::Mutex<()>,
    /// Admitted creations whose store row does not exist yet (changed under `admission`).
    reserved: AtomicUsize,
    pools: RwLock<BTreeMap<String, Arc<PoolRuntime>>>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    rates: Mutex<HashMap<String, (Instant, f64)>>,
    /// Serializes creates per API key that has a sandbox quota.
    key_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    stopping: AtomicBool,
    host: HostCapacity,
}

/// Why a backend cannot run here, and the fix, without repeating the backend's name.
fn unavailable_reason(e: hutch_core::SandboxError) -> String {
    match e {
        hutch_core::SandboxError::Unavailable { reason, fix, .. } => format!("{reason}; {fix}"),
        other => other.to_string(),
    }
}

fn store_err(e: StoreError) -> ApiError {
    ApiError::from(e)
}

/// Random hex from the kernel; an error rather than a weak value when it cannot be read.
fn random_hex(bytes: usize) -> Result<String, ApiError> {
    use std::io::Read;
    let mut b = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b)).map_err(|e| {
        tracing::error!(error = %e, "cannot read /dev/urandom");
        ApiError::internal()
    })?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

impl Daemon {
    /// Opens the store, probes the backends, adopts or cleans up what a previous run left, and
    /// starts the pool and sweep tasks.
    pub async fn start(cfg: ServerConfig) -> Result<Arc<Self>, DaemonError> {
        std::fs::create_dir_all(&cfg.state_dir)
            .map_err(|e| DaemonError::StateDir(cfg.state_dir.display().to_string(), e))?;
        if let Some(parent) = cfg.db_path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| DaemonError::StateDir(parent.display().to_string(), e))?;
        }
        let store = Store::open_exclusive(&cfg.db_path)?;
        // API key hashes, command lines and environments: for the daemon's owner only
        for suffix in ["", "-wal", "-shm"] {
            let mut p = cfg.db_path.clone().into_os_string();
            p.push(suffix);
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600));
        }
        let mut backends: BTreeMap<String, Arc<dyn Backend>> = BTreeMap::new();
        let mut unavailable = BTreeMap::new();
        for kind in [RuntimeKind::Crun, RuntimeKind::Runc] {
            let c = ContainerConfig {
                runtime: kind,
                state_dir: cfg.state_dir.clone(),
                agent: None,
                detachable: true,
            };
            match ContainerBackend::new(c) {
                Ok(b) => {
                    backends.insert(format!("container:{}", kind.name()), Arc::new(b));
                }
                Err(e) => {
                    tracing::warn!(backend = kind.name(), error = %e, "backend unavailable");
                    unavailable.insert(format!("container:{}", kind.name()), unavailable_reason(e));
                }
            }
        }
        let wasm = WasmConfig { state_dir: cfg.state_dir.clone(), ..Default::default() };
        match WasmBackend::new(wasm) {
            Ok(b) => {
                backends.insert("wasm".into(), Arc::new(b));
            }
            Err(e) => {
                tracing::warn!(backend = "wasm", error = %e, "backend unavailable");
                unavailable.insert("wasm".into(), unavailable_reason(e));
            }
        }
        match ProcessBackend::new() {
            Ok(b) => {
                backends.insert("process".into(), Arc::new(b));
            }
            Err(e) => {
                unavailable.insert("process".into(), unavailable_reason(e));
            }
        }
        let d = Arc::new(Self {
            cfg,
            store,
            backends,
            unavailable,
            live: RwLock::new(HashMap::new()),
            admission: tokio::sync::Mutex::new(()),
            reserved: AtomicUsize::new(0),
            pools: RwLock::new(BTreeMap::new()),
            tasks: Mutex::new(Vec::new()),
            rates: Mutex::new(HashMap::new()),
            key_locks: Mutex::new(HashMap::new()),
            stopping: AtomicBool::new(false),
            host: HostCapacity::probe(),
        });
        d.reconcile().await;
        for (name, json) in d.store.list_pools().unwrap_or_default() {
            match serde_json::from_str::<PoolConfig>(&json) {
                Ok(cfg) => d.start_pool(cfg),
                Err(e) => {
                    tracing::error!(pool = %name, error = %e, "stored pool definition is unreadable; skipped")
                }
            }
        }
        let sweeper = tokio::spawn(sweep_loop(Arc::downgrade(&d)));
        d.tasks.lock().unwrap_or_else(|p| p.into_inner()).push(sweeper);
        Ok(d)
    }

    pub fn backend_names(&self) -> (Vec<String>, BTreeMap<String, String>) {
        (self.backends.keys().cloned().collect(), self.unavailable.clone())
    }

    fn live_get(&self, id: &str) -> Option<Arc<LiveSandbox>> {
        self.live.read().unwrap_or_else(|p| p.into_inner()).get(id).cloned()
    }

    fn live_remove(&self, id: &str) -> Option<Arc<LiveSandbox>> {
        self.live.write().unwrap_or_else(|p| p.into_inner()).remove(id)
    }

    fn live_insert(&self, l: Arc<LiveSandbox>) {
        self.live.write().unwrap_or_else(|p| p.into_inner()).insert(l.id.clone(), l);
    }

    pub fn live_count(&self) -> usize {
        self.live.read().unwrap_or_else(|p| p.into_inner()).len()
    }

    // ---- reconciliation ------------------------------------------------------------------

    /// Makes the store and the host agree after a restart (also after `kill -9`): sandboxes that
    /// still run are adopted, the rest is cleaned up, and host leftovers nobody knows are reaped.
    async fn reconcile(&self) {
        let now = now_ms();
        let rows = self.store.list(&ListFilter::default()).unwrap_or_default();
        let (mut adopted, mut cleaned) = (0usize, 0usize);
        for row in rows {
            match row.state {
                SandboxState::Cold => continue,
                SandboxState::Warming => {
                    self.reap_everywhere(&row.id).await;
                    let _ =
                        self.store.mark_stopped(&row.id, "interrupted by a daemon restart", now);
                    cleaned += 1;
                }
                _ => {
                    let result = match self.backends.get(&row.backend) {
                        Some(b) => b.adopt(&row.id).await,
                        None => Err(hutch_core::SandboxError::runtime(
                            "adopt",
                            format!("backend {} is not available", row.backend),
                        )),
                    };
                    match result {
                        Ok(sb) => {
                            if row.state == SandboxState::Running {
                                let _ = self.store.mark_waiting(&row.id, now);
                            }
                            let live = LiveSandbox::new(row.id.clone(), row.backend.clone(), sb);
                            live.set_owner(row.owner_key.clone());
                            self.live_insert(live);
                            adopted += 1;
                        }
                        Err(e) => {
                            tracing::warn!(sandbox = %row.id, error = %e, "could not adopt sandbox; cleaning it up");
                            self.reap_everywhere(&row.id).await;
                            let _ =
                                self.store.mark_stopped(&row.id, "lost in a daemon restart", now);
                            cleaned += 1;
                        }
                    }
                }
            }
        }
        let mut orphans = 0usize;
        let mut host_ids = std::collections::BTreeSet::new();
        for b in self.backends.values() {
            host_ids.extend(b.sandbox_ids().await);
        }
        for id in host_ids {
            if self.live_get(&id).is_none() {
                self.reap_everywhere(&id).await;
                orphans += 1;
            }
        }
        tracing::info!(adopted, cleaned, orphans, "reconciled the store with the host");
        let _ = self.store.audit(
            now,
            None,
            "reconcile",
            None,
            &json!({"adopted": adopted, "cleaned": cleaned, "orphans": orphans}),
        );
    }

    async fn reap_everywhere(&self, id: &str) {
        for b in self.backends.values() {
            if let Err(e) = b.reap(id).await {
                tracing::warn!(sandbox = %id, backend = %b.name(), error = %e, "reap failed");
            }
        }
    }

    // ---- callers, quotas, rate limits ----------------------------------------------------

    /// Checks an API key; `None` when the secret is unknown or revoked.
    pub fn authenticate(&self, secret: &str) -> Result<Option<(Caller, Option<u32>)>, ApiError> {
        let Some(k) = self.store.find_key(secret).map_err(store_err)? else { return Ok(None) };
        Ok(Some((
            Caller { key_id: Some(k.id), admin: k.admin, max_sandboxes: k.max_sandboxes },
            k.rate_per_minute,
        )))
    }

    /// Token bucket per key: `per_minute` requests per minute, bursts up to that many.
    pub fn check_rate(&self, key: &str, per_minute: u32) -> Result<(), ApiError> {
        let mut rates = self.rates.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let cap = f64::from(per_minute.max(1));
        let (last, tokens) = rates.entry(key.to_string()).or_insert((now, cap));
        let refill = now.duration_since(*last).as_secs_f64() * cap / 60.0;
        *tokens = (*tokens + refill).min(cap);
        *last = now;
        if *tokens < 1.0 {
            return Err(ApiError::rate_limited(format!(
                "this API key may make {per_minute} requests per minute; retry shortly"
            )));
        }
        *tokens -= 1.0;
        Ok(())
    }

    /// The row of a sandbox the caller may see (others' sandboxes are reported as missing).
    pub fn row_for(&self, id: &str, caller: &Caller) -> Result<SandboxRow, ApiError> {
        let row = self
            .store
            .get(id)
            .map_err(store_err)?
            .ok_or_else(|| ApiError::not_found(format!("no sandbox {id}")))?;
        if !caller.admin && row.owner_key != caller.key_id {
            return Err(ApiError::not_found(format!("no sandbox {id}")));
        }
        Ok(row)
    }

    /// A running sandbox the caller may use.
    pub fn live_for(&self, id: &str, caller: &Caller) -> Result<Arc<LiveSandbox>, ApiError> {
        // the hot path: a running sandbox whose owner is known, no store read
        if let Some(l) = self.live_get(id) {
            if caller.admin
                || l.owner().as_deref() == caller.key_id.as_deref() && caller.key_id.is_some()
            {
                return Ok(l);
            }
        }
        let row = self.row_for(id, caller)?;
        if row.state == SandboxState::Stopped {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "sandbox_stopped",
                format!(
                    "sandbox {id} is stopped ({})",
                    row.stop_reason.unwrap_or_else(|| "deleted".into())
                ),
            ));
        }
        self.live_get(id).ok_or_else(|| {
            ApiError::new(
                StatusCode::CONFLICT,
                "sandbox_stopped",
                format!("sandbox {id} is not running"),
            )
        })
    }

    pub fn command_started(&self, l: &LiveSandbox) {
        if l.begin() {
            let _ = self.store.mark_running(&l.id, now_ms());
        }
    }

    pub fn command_finished(&self, l: &LiveSandbox) {
        let now = now_ms();
        if l.end() {
            let _ = self.store.mark_waiting(&l.id, now);
        } else {
            let _ = self.store.touch(&l.id, now);
        }
    }

    pub fn audit(
        &self,
        caller: &Caller,
        action: &str,
        sandbox: Option<&str>,
        detail: serde_json::Value,
    ) {
        if let Err(e) =
            self.store.audit(now_ms(), caller.key_id.as_deref(), action, sandbox, &detail)
        {
            tracing::error!(error = %e, action, "audit log write failed");
        }
    }

    // ---- creating --------------------------------------------------------------------------

    /// Turns a shape into a backend key and a validated spec.
    fn resolve_shape(
        &self,
        shape: &SandboxShape,
        caller: &Caller,
    ) -> Result<(String, SandboxSpec), ApiError> {
        let key = match (shape.backend.as_deref().unwrap_or("container"), shape.runtime.as_deref())
        {
            ("container", None | Some("crun")) => "container:crun".to_string(),
            ("container", Some("runc")) => "container:runc".to_string(),
            ("container", Some(other)) => {
                return Err(ApiError::bad_request(format!(
                    "unknown runtime {other:?}: use crun or runc"
                )))
            }
            ("wasm", None) => "wasm".to_string(),
            ("wasm", Some(_)) => {
                return Err(ApiError::bad_request("runtime applies to the container backend only"))
            }
            ("process", None) if caller.admin => "process".to_string(),
            ("process", None) => {
                return Err(ApiError::forbidden(
                    "the process backend has no isolation; only admin keys may use it",
                ))
            }
            ("process", Some(_)) => {
                return Err(ApiError::bad_request("runtime applies to the container backend only"))
            }
            (other, _) => {
                return Err(ApiError::bad_request(format!(
                    "unknown backend {other:?}: use container, wasm or process"
                )))
            }
        };
        if let Some(reason) = self.unavailable.get(&key) {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "backend_unavailable",
                format!("backend {key} cannot run on this host: {reason}"),
            ));
        }
        let image = match (shape.image.as_deref(), shape.rootfs.as_deref()) {
            (_, Some(_)) if !caller.admin => {
                return Err(ApiError::forbidden(
                    "only admin keys may use a host directory as rootfs",
                ))
            }
            (None | Some("host"), Some(p)) => Image::Rootfs(p.into()),
            (None | Some("host"), None) => Image::Host,
            (Some(other), _) => {
                return Err(ApiError::bad_request(format!(
                    "unknown image {other:?}: use host (or rootfs)"
                )))
            }
        };
        let spec = SandboxSpec {
            image,
            env: shape.env.clone(),
            limits: shape.limits.as_ref().map(|l| l.apply()).unwrap_or_default(),
            ..Default::default()
        };
        spec.validate(self.host).map_err(|e| ApiError::bad_request(e.to_string()))?;
        Ok((key, spec))
    }

    fn expiry(&self, ttl: Option<u64>, caller: &Caller) -> Result<Option<i64>, ApiError> {
        let ttl = match ttl {
            Some(0) if caller.admin => return Ok(None),
            Some(0) => {
                return Err(ApiError::bad_request(
                    "ttl_seconds 0 (no expiry) is for admin keys only",
                ))
            }
            Some(s) => Duration::from_secs(s),
            None => match self.cfg.default_ttl {
                Some(d) => d,
                None => return Ok(None),
            },
        };
        if ttl > self.cfg.max_ttl {
            return Err(ApiError::bad_request(format!(
                "ttl_seconds may be at most {}",
                self.cfg.max_ttl.as_secs()
            )));
        }
        Ok(Some(now_ms() + ttl.as_millis() as i64))
    }

    /// Admits one more sandbox under the capacity, evicting by priority (cold, then warm, then
    /// idle waiting; never running) when full. `evict`: false for pool refills, which only use
    /// free room.
    async fn reserve(self: &Arc<Self>, evict: bool) -> Result<(), ApiError> {
        let _g = self.admission.lock().await;
        loop {
            let used =
                self.store.count_live().map_err(store_err)? + self.reserved.load(Ordering::SeqCst);
            if used < self.cfg.max_sandboxes {
                self.reserved.fetch_add(1, Ordering::SeqCst);
                return Ok(());
            }
            if !evict {
                return Err(ApiError::capacity("no room"));
            }
            let now = now_ms();
            let cutoff = now - EVICT_WAITING_AFTER.as_millis() as i64;
            match self.store.evict_one_idle(now, cutoff).map_err(store_err)? {
                Some((id, state)) => {
                    metrics::global().evictions.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(sandbox = %id, from = %state, "evicted to make room");
                    let d = self.clone();
                    tokio::spawn(async move { d.destroy_resources(&id).await });
                }
                None => {
                    return Err(ApiError::capacity(format!(
                        "all {} sandbox slots are in use and none can be evicted; retry later, delete sandboxes, or raise --max-sandboxes",
                        self.cfg.max_sandboxes
                    )))
                }
            }
        }
    }

    async fn unreserve(&self) {
        let _g = self.admission.lock().await;
        self.reserved.fetch_sub(1, Ordering::SeqCst);
    }

    /// Creates and starts one sandbox under an admitted reservation; the store row goes
    /// warming -> `target` (waiting for a user's sandbox, warm for a pool member).
    #[allow(clippy::too_many_arguments)]
    async fn start_sandbox(
        self: &Arc<Self>,
        key: &str,
        spec: SandboxSpec,
        pool: Option<String>,
        caller: &Caller,
        metadata: BTreeMap<String, String>,
        expires_at: Option<i64>,
        target: SandboxState,
        contexts: &[String],
    ) -> Result<(SandboxRow, serde_json::Value), ApiError> {
        let t = Instant::now();
        let Some(backend) = self.backends.get(key).cloned() else {
            self.unreserve().await;
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "backend_unavailable",
                format!("backend {key} is not available"),
            ));
        };
        let spec_json = serde_json::to_string(&spec).unwrap_or_default();
        let created = backend.create(spec).await;
        let mut sb = match created {
            Ok(sb) => sb,
            Err(e) => {
                self.unreserve().await;
                return Err(ApiError::from_sandbox(e, "creating the sandbox"));
            }
        };
        let id = sb.id().to_string();
        let now = now_ms();
        let mut row = SandboxRow::new(&id, SandboxState::Warming, key, spec_json, now);
        row.pool = pool;
        row.owner_key = caller.key_id.clone();
        row.metadata = metadata;
        row.expires_at = expires_at;
        {
            let _g = self.admission.lock().await;
            let inserted = self.store.insert_sandbox(&row);
            self.reserved.fetch_sub(1, Ordering::SeqCst);
            if let Err(e) = inserted {
                drop(_g);
                let _ = sb.destroy().await;
                return Err(store_err(e));
            }
        }
        let started = async {
            sb.start().await?;
            for lang in contexts {
                sb.contexts()?.create_context(lang, None, BTreeMap::new()).await?;
            }
            Ok::<_, hutch_core::SandboxError>(())
        }
        .await;
        if let Err(e) = started {
            let _ = self.store.mark_stopped(&id, "failed to start", now_ms());
            let _ = sb.destroy().await;
            return Err(ApiError::from_sandbox(e, "starting the sandbox"));
        }
        let timings = sb.timings().to_json();
        let live = LiveSandbox::new(id.clone(), key.to_string(), sb);
        live.set_owner(caller.key_id.clone());
        self.live_insert(live.clone());
        if let Err(e) = self.store.set_state(&id, target, now_ms()) {
            // deleted (or evicted) while starting
            self.live_remove(&id);
            if let Some(sb) = live.sandbox.write().await.take() {
                let _ = sb.destroy().await;
            }
            return Err(store_err(e));
        }
        metrics::global().create_seconds.observe(t.elapsed());
        row.state = target;
        Ok((row, timings))
    }

    pub async fn create(
        self: &Arc<Self>,
        req: CreateSandbox,
        caller: &Caller,
    ) -> Result<SandboxView, ApiError> {
        let t = Instant::now();
        if self.stopping.load(Ordering::SeqCst) {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "shutting_down",
                "the daemon is shutting down",
            ));
        }
        // A key with a quota creates one sandbox at a time, so the count below cannot race.
        let _quota_guard = match (&caller.key_id, caller.max_sandboxes) {
            (Some(k), Some(_)) => {
                let lock = self
                    .key_locks
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .entry(k.clone())
                    .or_default()
                    .clone();
                Some(lock.lock_owned().await)
            }
            _ => None,
        };
        if let (Some(k), Some(max)) = (&caller.key_id, caller.max_sandboxes) {
            let owned = self
                .store
                .list(&ListFilter { owner_key: Some(k.clone()), ..Default::default() })
                .map_err(store_err)?
                .len();
            if owned >= max as usize {
                return Err(ApiError::rate_limited(format!(
                    "this API key may own at most {max} sandboxes at once; delete one first"
                )));
            }
        }
        for k in req.metadata.keys() {
            if k.is_empty() || k.len() > 128 || k.contains(',') || k.contains(':') {
                return Err(ApiError::bad_request(format!(
                    "metadata key {k:?}: 1-128 characters, no ',' or ':'"
                )));
            }
        }
        let expires_at = self.expiry(req.ttl_seconds, caller)?;
        let (shape, pool) = match &req.pool {
            Some(p) => {
                if req.shape() != SandboxShape::default() {
                    return Err(ApiError::bad_request("a pool request takes its shape from the pool: leave out backend, runtime, image, rootfs, limits and env"));
                }
                let rt = self.pool_runtime(p)?;
                if let Some(id) = self.store.take_warm(p, now_ms()).map_err(store_err)? {
                    rt.wake.notify_one();
                    self.store
                        .assign(&id, caller.key_id.as_deref(), &req.metadata, expires_at)
                        .map_err(store_err)?;
                    if let Some(l) = self.live_get(&id) {
                        l.set_owner(caller.key_id.clone());
                    }
                    metrics::global().pool_hit(p);
                    metrics::global().acquire_seconds.observe(t.elapsed());
                    self.audit(caller, "create", Some(&id), json!({"pool": p, "warm": true}));
                    let row =
                        self.store.get(&id).map_err(store_err)?.ok_or_else(ApiError::internal)?;
                    let mut view = SandboxView::from_row(row);
                    if !rt.config.template.contexts.is_empty() {
                        view.contexts = self.contexts_of(&id).await;
                    }
                    return Ok(view);
                }
                metrics::global().pool_miss(p);
                rt.wake.notify_one();
                (rt.config.template.clone(), Some(p.clone()))
            }
            None => (req.shape(), None),
        };
        let admin_shape = Caller { admin: true, ..caller.clone() };
        let (key, mut spec) =
            self.resolve_shape(&shape, if pool.is_some() { &admin_shape } else { caller })?;
        if let Some(u) = &req.guest_user {
            if pool.is_some() {
                return Err(ApiError::bad_request("a pool sandbox runs as the pool's account"));
            }
            spec.user = hutch_core::UserSpec { uid: u.uid, gid: u.gid };
            spec.workdir = u.home.clone();
            spec.confine_files = false;
            spec.validate(self.host).map_err(|e| ApiError::bad_request(e.to_string()))?;
        }
        self.reserve(true).await?;
        let (row, timings) = self
            .start_sandbox(
                &key,
                spec,
                pool.clone(),
                caller,
                req.metadata.clone(),
                expires_at,
                SandboxState::Waiting,
                &shape.contexts,
            )
            .await?;
        metrics::global().acquire_seconds.observe(t.elapsed());
        self.audit(
            caller,
            "create",
            Some(&row.id),
            json!({"backend": key, "pool": pool, "warm": false}),
        );
        let id = row.id.clone();
        let mut view = SandboxView::from_row(row);
        view.timings = Some(timings);
        if !shape.contexts.is_empty() {
            view.contexts = self.contexts_of(&id).await;
        }
        Ok(view)
    }

    pub fn list(
        &self,
        mut filter: ListFilter,
        caller: &Caller,
    ) -> Result<Vec<SandboxView>, ApiError> {
        if !caller.admin {
            filter.owner_key = caller.key_id.clone();
        }
        Ok(self
            .store
            .list(&filter)
            .map_err(store_err)?
            .into_iter()
            .map(SandboxView::from_row)
            .collect())
    }

    pub fn set_ttl(&self, id: &str, ttl: u64, caller: &Caller) -> Result<SandboxView, ApiError> {
        let row = self.row_for(id, caller)?;
        if row.state == SandboxState::Stopped {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "sandbox_stopped",
                format!("sandbox {id} is stopped"),
            ));
        }
        let at = self.expiry(Some(ttl), caller)?;
        self.store.set_expiry(id, at).map_err(store_err)?;
        self.audit(caller, "set_ttl", Some(id), json!({"ttl_seconds": ttl}));
        let row = self.store.get(id).map_err(store_err)?.ok_or_else(ApiError::internal)?;
        Ok(SandboxView::from_row(row))
    }

    async fn contexts_of(&self, id: &str) -> Option<Vec<hutch_core::ContextInfo>> {
        let live = self.live_get(id)?;
        let guard = live.sandbox.read().await;
        guard.as_ref()?.contexts().ok()?.list_contexts().await.ok()
    }

    // ---- deleting --------------------------------------------------------------------------

    /// A user deletes a sandbox: pool members in recycle mode go back to their pool when they
    /// come back clean; everything else is destroyed.
    pub async fn delete(self: &Arc<Self>, id: &str, caller: &Caller) -> Result<(), ApiError> {
        let row = self.row_for(id, caller)?;
        if row.state == SandboxState::Stopped {
            return Ok(());
        }
        self.audit(caller, "delete", Some(id), json!({}));
        if let Some(pool) = &row.pool {
            if let Ok(rt) = self.pool_runtime(pool) {
                if rt.config.reuse == Reuse::Recycle
                    && row.state != SandboxState::Warm
                    && self.recycle(id, &rt).await
                {
                    return Ok(());
                }
                rt.wake.notify_one();
            }
        }
        self.stop_and_destroy(id, "deleted").await;
        Ok(())
    }

    /// Resets a sandbox and returns it to its pool; false when it could not be made clean (the
    /// caller then destroys it).
    async fn recycle(&self, id: &str, rt: &PoolRuntime) -> bool {
        // A pool that refilled meanwhile briefly holds one more warm member than its size;
        // the next acquisition takes it (a recycled sandbox is cheaper to keep than to remake).
        let Some(live) = self.live_remove(id) else { return false };
        live.kill_processes().await;
        live.forget_processes();
        let report = {
            let guard = live.sandbox.read().await;
            match guard.as_ref() {
                Some(sb) => sb.reset().await,
                None => return false,
            }
        };
        let now = now_ms();
        match report {
            Ok(r) if r.is_clean() && !live.busy() => {
                let _ = self.store.mark_waiting(id, now);
                live.set_owner(None);
                // the reset killed the template's contexts: start them again, warm
                if !rt.config.template.contexts.is_empty() {
                    let guard = live.sandbox.read().await;
                    let restarted = match guard.as_ref().map(|sb| sb.contexts()) {
                        Some(Ok(c)) => {
                            let mut ok = true;
                            for lang in &rt.config.template.contexts {
                                ok &= c.create_context(lang, None, BTreeMap::new()).await.is_ok();
                            }
                            ok
                        }
                        _ => false,
                    };
                    drop(guard);
                    if !restarted {
                        self.live_insert(live);
                        return false;
                    }
                }
                if self.store.assign(id, None, &BTreeMap::new(), None).is_ok()
                    && self.store.set_state(id, SandboxState::Warm, now).is_ok()
                {
                    self.live_insert(live);
                    rt.wake.notify_one();
                    return true;
                }
                self.live_insert(live);
                false
            }
            other => {
                tracing::warn!(sandbox = %id, reset = ?other, busy = live.busy(), "recycle did not leave the sandbox clean; destroying it");
                self.live_insert(live);
                false
            }
        }
    }

    /// Marks a sandbox stopped and destroys it.
    pub async fn stop_and_destroy(&self, id: &str, reason: &str) {
        let _ = self.store.mark_stopped(id, reason, now_ms());
        self.destroy_resources(id).await;
    }

    /// Destroys what a (stopped) sandbox holds on the host.
    async fn destroy_resources(&self, id: &str) {
        match self.live_remove(id) {
            Some(live) => {
                live.kill_processes().await;
                let sb = live.sandbox.write().await.take();
                if let Some(sb) = sb {
                    if let Err(e) = sb.destroy().await {
                        tracing::error!(sandbox = %id, error = %e, "destroy failed; reaping");
                        self.reap_everywhere(id).await;
                    }
                }
            }
            None => self.reap_everywhere(id).await,
        }
    }

    // ---- pools -----------------------------------------------------------------------------

    fn pool_runtime(&self, name: &str) -> Result<Arc<PoolRuntime>, ApiError> {
        self.pools
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(format!("no pool {name}")))
    }

    pub fn create_pool(
        self: &Arc<Self>,
        cfg: PoolConfig,
        caller: &Caller,
    ) -> Result<PoolStatus, ApiError> {
        if !caller.admin {
            return Err(ApiError::forbidden("only admin keys may manage pools"));
        }
        cfg.validate().map_err(ApiError::bad_request)?;
        self.resolve_shape(&cfg.template, caller)?;
        if self.pools.read().unwrap_or_else(|p| p.into_inner()).contains_key(&cfg.name) {
            return Err(ApiError::conflict(format!("pool {} exists; delete it first", cfg.name)));
        }
        let json = serde_json::to_string(&cfg).map_err(|_| ApiError::internal())?;
        self.store.upsert_pool(&cfg.name, &json, now_ms()).map_err(store_err)?;
        self.audit(caller, "create_pool", None, json!({"pool": cfg.name, "size": cfg.size}));
        let name = cfg.name.clone();
        self.start_pool(cfg);
        self.pool_status(&name)
    }

    fn start_pool(self: &Arc<Self>, cfg: PoolConfig) {
        let rt = PoolRuntime::new(cfg);
        self.pools
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(rt.config.name.clone(), rt.clone());
        let task = tokio::spawn(replenish_loop(Arc::downgrade(self), rt));
        self.tasks.lock().unwrap_or_else(|p| p.into_inner()).push(task);
    }

    pub fn pool_status(&self, name: &str) -> Result<PoolStatus, ApiError> {
        let rt = self.pool_runtime(name)?;
        let mut members = BTreeMap::new();
        for st in [
            SandboxState::Warming,
            SandboxState::Warm,
            SandboxState::Running,
            SandboxState::Waiting,
        ] {
            members.insert(
                st.as_str().to_string(),
                self.store.pool_members(name, Some(st)).map_err(store_err)?.len(),
            );
        }
        let (hits, misses) = metrics::global().pool_counts(name);
        Ok(PoolStatus { config: rt.config.clone(), members, hits, misses })
    }

    pub fn list_pools(&self) -> Result<Vec<PoolStatus>, ApiError> {
        let names: Vec<String> =
            self.pools.read().unwrap_or_else(|p| p.into_inner()).keys().cloned().collect();
        names.iter().map(|n| self.pool_status(n)).collect()
    }

    pub async fn delete_pool(&self, name: &str, caller: &Caller) -> Result<(), ApiError> {
        if !caller.admin {
            return Err(ApiError::forbidden("only admin keys may manage pools"));
        }
        let rt = self
            .pools
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name)
            .ok_or_else(|| ApiError::not_found(format!("no pool {name}")))?;
        rt.stop.notify_one();
        self.store.delete_pool(name).map_err(store_err)?;
        for st in [SandboxState::Warming, SandboxState::Warm] {
            for id in self.store.pool_members(name, Some(st)).map_err(store_err)? {
                self.stop_and_destroy(&id, "pool deleted").await;
            }
        }
        self.audit(caller, "delete_pool", None, json!({"pool": name}));
        Ok(())
    }

    /// Starts one warm member of `rt`'s pool if the pool is short and there is free room.
    async fn refill_one(self: &Arc<Self>, rt: &PoolRuntime) -> bool {
        let name = &rt.config.name;
        let count = |st| self.store.pool_members(name, Some(st)).map(|v| v.len()).unwrap_or(0);
        let ready = count(SandboxState::Warm) + count(SandboxState::Warming);
        let total = self.store.pool_members(name, None).map(|v| v.len()).unwrap_or(0);
        if ready >= rt.config.size
            || rt.config.max.is_some_and(|m| total >= m)
            || self.stopping.load(Ordering::SeqCst)
        {
            return false;
        }
        let Ok((key, spec)) = self.resolve_shape(&rt.config.template, &Caller::local_admin())
        else {
            return false;
        };
        if self.reserve(false).await.is_err() {
            return false;
        }
        match self
            .start_sandbox(
                &key,
                spec,
                Some(name.clone()),
                &Caller::default(),
                BTreeMap::new(),
                None,
                SandboxState::Warm,
                &rt.config.template.contexts,
            )
            .await
        {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(pool = %name, error = %e.message, "could not start a pool member");
                false
            }
        }
    }

    // ---- keys ------------------------------------------------------------------------------

    pub fn create_key(
        &self,
        name: &str,
        admin: bool,
        max_sandboxes: Option<u32>,
        rate: Option<u32>,
        format: KeyFormat,
    ) -> Result<(KeyRow, String), ApiError> {
        if name.is_empty() || name.len() > 128 {
            return Err(ApiError::bad_request("key name: 1-128 characters"));
        }
        let prefix = match format {
            KeyFormat::Hutch => "hutch",
            KeyFormat::E2b => "e2b",
        };
        let secret = format!("{prefix}_{}", random_hex(24)?);
        let mut row = KeyRow::new(format!("key_{}", random_hex(6)?), name, &secret, now_ms());
        row.admin = admin;
        row.max_sandboxes = max_sandboxes;
        row.rate_per_minute = rate;
        self.store.insert_key(&row).map_err(store_err)?;
        Ok((row, secret))
    }

    // ---- background work and shutdown ------------------------------------------------------

    async fn sweep(self: &Arc<Self>) {
        let now = now_ms();
        for id in self.store.expired(now).unwrap_or_default() {
            tracing::info!(sandbox = %id, "ttl expired");
            self.stop_and_destroy(&id, "ttl expired").await;
        }
        let idle_ms = self.cfg.idle_timeout.as_millis() as i64;
        for id in self.store.sweep_idle(now, idle_ms, 50).unwrap_or_default() {
            tracing::info!(sandbox = %id, "idle timeout");
            self.destroy_resources(&id).await;
        }
    }

    /// Stops background tasks and destroys (or detaches, with `on_shutdown = keep`) every
    /// sandbox.
    pub async fn shutdown(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        for t in self.tasks.lock().unwrap_or_else(|p| p.into_inner()).drain(..) {
            t.abort();
        }
        let all: Vec<Arc<LiveSandbox>> =
            self.live.write().unwrap_or_else(|p| p.into_inner()).drain().map(|(_, l)| l).collect();
        let now = now_ms();
        match self.cfg.on_shutdown {
            OnShutdown::Keep => {
                for l in all {
                    if let Some(sb) = l.sandbox.write().await.take() {
                        sb.detach();
                    }
                }
                tracing::info!("left sandboxes running for the next start to adopt");
            }
            OnShutdown::Destroy => {
                let mut set = tokio::task::JoinSet::new();
                for l in all {
                    let _ = self.store.mark_stopped(&l.id, "daemon shutdown", now);
                    set.spawn(async move {
                        l.kill_processes().await;
                        if let Some(sb) = l.sandbox.write().await.take() {
                            let _ = sb.destroy().await;
                        }
                    });
                }
                while set.join_next().await.is_some() {}
                tracing::info!("destroyed every sandbox");
            }
        }
    }
}

async fn sweep_loop(d: std::sync::Weak<Daemon>) {
    loop {
        let interval = match d.upgrade() {
            Some(d) => {
                d.sweep().await;
                d.cfg.sweep_interval
            }
            None => return,
        };
        tokio::time::sleep(interval).await;
    }
}

async fn replenish_loop(d: std::sync::Weak<Daemon>, rt: Arc<PoolRuntime>) {
    loop {
        let Some(daemon) = d.upgrade() else { return };
        // Start members one after another while the pool is short (each start is a few tens
        // of ms); then sleep until something changes.
        let started = daemon.refill_one(&rt).await;
        drop(daemon);
        if started {
            continue;
        }
        tokio::select! {
            _ = rt.wake.notified() => {
                // Let a burst of acquisitions and their first commands run before refilling:
                // starting a sandbox takes a core for tens of ms, and refills are background work.
                let until = tokio::time::Instant::now() + REFILL_SETTLE_MAX;
                loop {
                    tokio::select! {
                        _ = rt.wake.notified() => if tokio::time::Instant::now() >= until { break },
                        _ = tokio::time::sleep(REFILL_SETTLE) => break,
                        _ = rt.stop.notified() => return,
                    }
                }
            }
            _ = rt.stop.notified() => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}
