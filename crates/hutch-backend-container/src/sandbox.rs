//! [`ContainerBackend`] and [`ContainerSandbox`]: the lifecycle of one container sandbox.
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use base64::Engine as _;
use hutch_agent_client::{is_static_elf, locate_agent, AgentClient, ExitHook, TimedProcess};
use hutch_core::{
    Availability, Backend, ExecRequest, ExecStatus, FileOps, HostCapacity, Image, Phase,
    PhaseTimings, Process, ResetReport, Sandbox, SandboxError, SandboxSpec,
};
use oci_spec::runtime::LinuxSeccomp;

use crate::bundle::{build_spec, BundleInputs};
use crate::cgroups::CgroupLayout;
use crate::image::HostImage;
use crate::runtime::{OciRuntime, RuntimeKind};
use crate::ContainerError;

/// How long the agent may take to answer its hello after the runtime started it.
const AGENT_READY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the runtime may take to clean up after the agent exits.
const ENGINE_EXIT_TIMEOUT: Duration = Duration::from_secs(5);

/// The cgroup parent under which every sandbox gets its own cgroup.
pub const CGROUP_PARENT: &str = "hutch";

#[derive(Debug, Clone)]
pub struct ContainerConfig {
    pub runtime: RuntimeKind,
    /// Bundles, runtime state and the generated host image live here.
    pub state_dir: PathBuf,
    /// The agent binary; found automatically when `None`.
    pub agent: Option<PathBuf>,
    /// Sandboxes outlive the host process (the agent also listens on a socket under the bundle
    /// directory) so a restarted daemon can adopt them. Off for one-shot use: a host that dies
    /// then takes its sandbox with it.
    pub detachable: bool,
}

impl ContainerConfig {
    pub fn new(runtime: RuntimeKind) -> Self {
        Self { runtime, state_dir: default_state_dir(), agent: None, detachable: false }
    }
}

/// `$HUTCH_STATE_DIR`, or `/run/hutch`.
pub fn default_state_dir() -> PathBuf {
    std::env::var_os("HUTCH_STATE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/run/hutch"))
}

struct Shared {
    runtime: OciRuntime,
    layout: CgroupLayout,
    state_dir: PathBuf,
    agent: PathBuf,
    /// Whether the agent is statically linked (needed for a custom rootfs), read when first asked.
    agent_static: OnceLock<bool>,
    seccomp: LinuxSeccomp,
    /// `seccomp` compiled once (base64) for crun; runc compiles the OCI section itself.
    seccomp_bpf: Option<String>,
    detachable: bool,
    host: HostCapacity,
    host_image: OnceLock<HostImage>,
}

/// Creates container sandboxes through one OCI runtime.
#[derive(Clone)]
pub struct ContainerBackend {
    shared: Arc<Shared>,
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

pub use hutch_core::is_sandbox_id;

impl ContainerBackend {
    /// Checks the host (root, runtime binary, cgroups, agent) without running anything.
    pub fn new(cfg: ContainerConfig) -> Result<Self, SandboxError> {
        let name = format!("container:{}", cfg.runtime.name());
        if euid() != 0 {
            return Err(SandboxError::Unavailable {
                backend: name,
                reason:
                    "the container backend needs root (it creates namespaces, mounts and cgroups)"
                        .into(),
                fix: "run hutch as root (e.g. with sudo)".into(),
            });
        }
        let layout = CgroupLayout::detect();
        if layout == CgroupLayout::None {
            return Err(SandboxError::Unavailable {
                backend: name,
                reason: "no cgroup filesystem is mounted, so limits cannot be enforced".into(),
                fix: "mount cgroup2 on /sys/fs/cgroup (mount -t cgroup2 none /sys/fs/cgroup)"
                    .into(),
            });
        }
        let runtime = OciRuntime::locate(
            cfg.runtime,
            cfg.state_dir.join("runtime").join(cfg.runtime.name()),
            &layout,
        )?;
        let agent = match cfg.agent {
            Some(a) => a,
            None => locate_agent().map_err(|m| SandboxError::Unavailable {
                backend: name.clone(),
                reason: m,
                fix: "run scripts/build-agent.sh (or scripts/install.sh)".into(),
            })?,
        };
        if !agent.is_file() {
            return Err(SandboxError::Unavailable {
                backend: name,
                reason: format!("the agent binary {} is not a file", agent.display()),
                fix: "run scripts/build-agent.sh (or scripts/install.sh)".into(),
            });
        }
        for d in [cfg.state_dir.join("sandboxes"), runtime.state_root.clone()] {
            std::fs::create_dir_all(&d)
                .map_err(|e| SandboxError::io(format!("cannot create {}", d.display()), e))?;
        }
        let seccomp = crate::seccomp::default_seccomp()?;
        let seccomp_bpf = match cfg.runtime {
            RuntimeKind::Crun => {
                let prog = crate::seccomp_bpf::cached(&seccomp, &cfg.state_dir.join("seccomp"))?;
                Some(base64::engine::general_purpose::STANDARD.encode(prog))
            }
            RuntimeKind::Runc => None,
        };
        Ok(Self {
            shared: Arc::new(Shared {
                runtime,
                layout,
                state_dir: cfg.state_dir,
                agent,
                agent_static: OnceLock::new(),
                seccomp,
                seccomp_bpf,
                detachable: cfg.detachable,
                host: HostCapacity::probe(),
                host_image: OnceLock::new(),
            }),
        })
    }

    pub fn runtime(&self) -> &OciRuntime {
        &self.shared.runtime
    }

    pub fn layout(&self) -> &CgroupLayout {
        &self.shared.layout
    }

    pub fn state_dir(&self) -> &Path {
        &self.shared.state_dir
    }

    fn host_image(&self) -> Result<HostImage, ContainerError> {
        if let Some(i) = self.shared.host_image.get() {
            return Ok(i.clone());
        }
        let img = HostImage::ensure(&self.shared.state_dir.join("images"))?;
        Ok(self.shared.host_image.get_or_init(|| img).clone())
    }

    /// Writes the bundle of a new sandbox to `dir` and returns the cgroup path it uses.
    pub fn write_bundle(
        &self,
        id: &str,
        spec: &SandboxSpec,
        dir: &Path,
    ) -> Result<String, SandboxError> {
        let cgroups_path = format!("/{CGROUP_PARENT}/{id}");
        let host_img;
        let (rootfs, binds, etc): (PathBuf, &[PathBuf], Option<&Path>) = match &spec.image {
            Image::Host => {
                host_img = self.host_image()?;
                (host_img.rootfs.clone(), &host_img.binds, Some(&host_img.etc))
            }
            Image::Rootfs(p) => {
                let is_static = *self
                    .shared
                    .agent_static
                    .get_or_init(|| is_static_elf(&self.shared.agent).unwrap_or(false));
                if !is_static {
                    return Err(SandboxError::InvalidSpec(format!(
                        "the guest agent {} is dynamically linked and cannot run in a custom rootfs; build it static with scripts/build-agent.sh",
                        self.shared.agent.display()
                    )));
                }
                let abs = p.canonicalize().map_err(|e| {
                    SandboxError::InvalidSpec(format!("rootfs {}: {e}", p.display()))
                })?;
                (abs, &[], None)
            }
        };
        let run_dir = dir.join("run");
        if self.shared.detachable {
            std::fs::create_dir_all(&run_dir)
                .and_then(|()| {
                    std::os::unix::fs::chown(&run_dir, Some(spec.user.uid), Some(spec.user.gid))
                })
                .map_err(|e| {
                    SandboxError::io(format!("cannot prepare {}", run_dir.display()), e)
                })?;
            let spec_json = serde_json::to_vec(spec)
                .map_err(|e| SandboxError::runtime("bundle", e.to_string()))?;
            std::fs::write(dir.join("spec.json"), spec_json).map_err(|e| {
                SandboxError::io(format!("cannot write {}", dir.join("spec.json").display()), e)
            })?;
        }
        let inputs = BundleInputs {
            rootfs: &rootfs,
            host_binds: binds,
            etc,
            agent: &self.shared.agent,
            cgroups_path: &cgroups_path,
            seccomp: self.shared.seccomp.clone(),
            seccomp_bpf: self.shared.seccomp_bpf.as_deref(),
            run_dir: self.shared.detachable.then_some(run_dir.as_path()),
        };
        let config = build_spec(spec, &inputs)?;
        let json = serde_json::to_vec(&config)
            .map_err(|e| SandboxError::runtime("bundle", e.to_string()))?;
        std::fs::write(dir.join("config.json"), json).map_err(|e| {
            SandboxError::io(format!("cannot write {}", dir.join("config.json").display()), e)
        })?;
        Ok(cgroups_path)
    }

    fn sandbox_dir(&self, id: &str) -> Result<PathBuf, SandboxError> {
        if !is_sandbox_id(id) {
            return Err(SandboxError::InvalidSpec(format!("{id:?} is not a hutch sandbox id")));
        }
        Ok(self.shared.state_dir.join("sandboxes").join(id))
    }

    /// Reaps what processes killed before they could clean up left of their sandboxes (the
    /// directory, the runtime's state, the cgroups): the ones whose owner lock nobody holds.
    /// Live sandboxes, whoever owns them, and the daemon's detachable ones are not touched.
    /// Returns each leftover found with how reaping it went; `hutch run` calls it before it
    /// creates its own sandbox.
    pub async fn sweep_orphans(&self) -> Vec<(String, Result<(), SandboxError>)> {
        let sandboxes = self.shared.state_dir.join("sandboxes");
        let dead: Vec<String> = std::fs::read_dir(&sandboxes)
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| e.file_name().into_string().ok())
                    .filter(|n| is_sandbox_id(n) && owner_of(&sandboxes.join(n)) == Owner::Dead)
                    .collect()
            })
            .unwrap_or_default();
        let mut out = Vec::new();
        for id in dead {
            let r = self.reap(&id).await;
            out.push((id, r));
        }
        out
    }

    /// Containers and cgroups of hutch that exist right now (for leak checks and `doctor`).
    pub async fn leftovers(&self) -> (Vec<String>, Vec<PathBuf>) {
        let containers = self.shared.runtime.list().await.unwrap_or_default();
        (containers, self.shared.layout.children(CGROUP_PARENT))
    }
}

#[async_trait]
impl Backend for ContainerBackend {
    fn name(&self) -> String {
        format!("container:{}", self.shared.runtime.kind.name())
    }

    async fn availability(&self) -> Availability {
        let name = self.name();
        let version =
            self.shared.runtime.version().await.unwrap_or_else(|| "unknown version".into());
        let probe = async {
            let mut sb = self.create(SandboxSpec::default()).await?;
            let r = async {
                sb.start().await?;
                sb.exec(
                    ExecRequest::argv(["/bin/echo", "ok"]),
                    Vec::new(),
                    &mut hutch_core::Discard,
                )
                .await
            }
            .await;
            let _ = sb.destroy().await;
            r
        };
        match tokio::time::timeout(Duration::from_secs(30), probe).await {
            Ok(Ok(r)) if r.stdout == b"ok\n" => Availability::yes(
                name,
                format!(
                    "{version}; {}; booted a sandbox and ran echo",
                    self.shared.layout.describe()
                ),
            ),
            Ok(Ok(r)) => Availability::no(
                name,
                format!(
                    "probe sandbox ran echo but printed {:?}",
                    String::from_utf8_lossy(&r.stdout)
                ),
                "run hutch doctor --verbose and report the output",
            ),
            Ok(Err(e)) => Availability::no(
                name,
                format!("{version}: probe sandbox failed: {e}"),
                hint_for(&e.to_string()),
            ),
            Err(_) => Availability::no(
                name,
                "probe sandbox did not finish within 30 s",
                "check that the runtime works: run it by hand on a bundle",
            ),
        }
    }

    async fn host_resources(&self) -> Vec<String> {
        let (containers, cgroups) = self.leftovers().await;
        let dirs = std::fs::read_dir(self.shared.state_dir.join("sandboxes"))
            .map(|rd| {
                rd.flatten().map(|e| format!("bundle:{}", e.path().display())).collect::<Vec<_>>()
            })
            .unwrap_or_default();
        containers
            .into_iter()
            .map(|c| format!("container:{c}"))
            .chain(cgroups.into_iter().map(|c| format!("cgroup:{}", c.display())))
            .chain(dirs)
            .collect()
    }

    async fn adopt(&self, id: &str) -> Result<Box<dyn Sandbox>, SandboxError> {
        let dir = self.sandbox_dir(id)?;
        let spec: SandboxSpec = std::fs::read(dir.join("spec.json"))
            .map_err(|e| {
                SandboxError::io(
                    format!("sandbox {id} has no saved spec (was it created detachable?)"),
                    e,
                )
            })
            .and_then(|b| {
                serde_json::from_slice(&b)
                    .map_err(|e| SandboxError::runtime("adopt", format!("saved spec of {id}: {e}")))
            })?;
        let sock = dir.join("run").join(crate::bundle::AGENT_SOCKET);
        let t = Instant::now();
        let stream =
            tokio::time::timeout(Duration::from_secs(2), tokio::net::UnixStream::connect(&sock))
                .await
                .map_err(|_| {
                    SandboxError::AgentNotReady(format!(
                        "connecting to {} timed out",
                        sock.display()
                    ))
                })?
                .map_err(|e| {
                    SandboxError::AgentNotReady(format!(
                        "sandbox {id} is not running ({}: {e})",
                        sock.display()
                    ))
                })?;
        // The socket lives in a directory the guest can write: make sure the peer really is a
        // process of this sandbox (in its cgroup) and not whatever a symlink points at.
        let peer_ok = stream
            .peer_cred()
            .ok()
            .and_then(|c| c.pid())
            .and_then(|pid| std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok())
            .is_some_and(|cg| cg.lines().any(|l| l.ends_with(&format!("/{CGROUP_PARENT}/{id}"))));
        if !peer_ok {
            return Err(SandboxError::AgentNotReady(format!(
                "the socket of sandbox {id} is not served by a process of that sandbox"
            )));
        }
        let (client, _) = AgentClient::connect(stream, Duration::from_secs(2)).await?;
        let mut timings = PhaseTimings::default();
        timings.add(Phase::AgentReady, t.elapsed());
        let cgroup = format!("/{CGROUP_PARENT}/{id}");
        let client = client.confined(spec.file_roots());
        Ok(Box::new(ContainerSandbox {
            id: id.to_string(),
            spec,
            dir,
            cgroup,
            backend: self.clone(),
            client: Some(client),
            engine: None,
            started: true,
            destroyed: false,
            timings: Arc::new(Mutex::new(timings)),
            oom_seen: Arc::new(AtomicU64::new(0)),
            _owner: None,
        }))
    }

    async fn reap(&self, id: &str) -> Result<(), SandboxError> {
        let dir = self.sandbox_dir(id)?;
        self.shared.runtime.delete(id).await?;
        let stuck = self.shared.layout.remove(&format!("/{CGROUP_PARENT}/{id}"));
        let _ = std::fs::remove_dir_all(&dir);
        if !stuck.is_empty() {
            return Err(SandboxError::runtime("reap", format!("cgroups of {id} still in use")));
        }
        Ok(())
    }

    async fn sandbox_ids(&self) -> Vec<String> {
        let mut ids: std::collections::BTreeSet<String> = self
            .shared
            .runtime
            .list()
            .await
            .unwrap_or_default()
            .into_iter()
            .filter(|i| is_sandbox_id(i))
            .collect();
        if let Ok(rd) = std::fs::read_dir(self.shared.state_dir.join("sandboxes")) {
            ids.extend(
                rd.flatten()
                    .filter_map(|e| e.file_name().into_string().ok())
                    .filter(|n| is_sandbox_id(n)),
            );
        }
        // Cgroups alone are not evidence: another hutch with another state directory shares
        // the cgroup parent. Our sandboxes' cgroups go with their bundles (see `reap`).
        // A sandbox whose owner process is alive (a `hutch run` next to the daemon) is none of
        // the caller's business.
        let sandboxes = self.shared.state_dir.join("sandboxes");
        ids.into_iter().filter(|id| owner_of(&sandboxes.join(id)) != Owner::Live).collect()
    }

    async fn create(&self, spec: SandboxSpec) -> Result<Box<dyn Sandbox>, SandboxError> {
        let mut timings = PhaseTimings::default();
        let t = Instant::now();
        spec.validate(self.shared.host)?;
        let id = hutch_core::new_sandbox_id();
        let dir = self.shared.state_dir.join("sandboxes").join(&id);
        std::fs::create_dir_all(&dir)
            .map_err(|e| SandboxError::io(format!("cannot create {}", dir.display()), e))?;
        let owner = if self.shared.detachable {
            None
        } else {
            match take_owner_lock(&dir) {
                Ok(f) => Some(f),
                Err(e) => {
                    let _ = std::fs::remove_dir_all(&dir);
                    return Err(e);
                }
            }
        };
        let cgroup = match self.write_bundle(&id, &spec, &dir) {
            Ok(c) => c,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        timings.add(Phase::Prepare, t.elapsed());
        Ok(Box::new(ContainerSandbox {
            id,
            spec,
            dir,
            cgroup,
            backend: self.clone(),
            client: None,
            engine: None,
            started: false,
            destroyed: false,
            timings: Arc::new(Mutex::new(timings)),
            oom_seen: Arc::new(AtomicU64::new(0)),
            _owner: owner,
        }))
    }
}

/// A sandbox that lives and dies with the process that made it (`hutch run`, a library user;
/// not the daemon's detachable ones) holds an exclusive `flock` on this file in its directory
/// for as long as it lives. The kernel drops the lock when that process dies, however it dies,
/// so a directory whose lock can be taken is a leftover of a process killed before it could
/// clean up, and one whose lock is held belongs to a live process that nobody else may reap.
pub const OWNER_LOCK: &str = "owner.lock";

fn take_owner_lock(dir: &Path) -> Result<std::fs::File, SandboxError> {
    // Locked under another name, then renamed into place: a sweeper must never find the
    // file unlocked while its owner is alive (the lock stays with the inode across the rename).
    let (tmp, path) = (dir.join(".owner.lock.new"), dir.join(OWNER_LOCK));
    let f = std::fs::File::create(&tmp)
        .map_err(|e| SandboxError::io(format!("cannot create {}", tmp.display()), e))?;
    f.try_lock().map_err(|e| {
        SandboxError::runtime("create", format!("cannot lock {}: {e}", tmp.display()))
    })?;
    std::fs::rename(&tmp, &path)
        .map_err(|e| SandboxError::io(format!("cannot rename into {}", path.display()), e))?;
    Ok(f)
}

/// Who a sandbox directory belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    /// A live process holds its owner lock.
    Live,
    /// It had an owner lock and nobody holds it: the process died without cleaning up.
    Dead,
    /// No owner lock: a detachable sandbox, which the daemon reconciles.
    Detachable,
}

fn owner_of(dir: &Path) -> Owner {
    match std::fs::File::open(dir.join(OWNER_LOCK)) {
        Err(_) => Owner::Detachable,
        // dropping `f` releases the lock just taken
        Ok(f) => match f.try_lock() {
            Ok(()) => Owner::Dead,
            Err(_) => Owner::Live,
        },
    }
}

/// A hint for a runtime failure message.
pub fn hint_for(msg: &str) -> String {
    let m = msg.to_ascii_lowercase();
    if m.contains("hybrid mode") {
        "crun refused the hybrid cgroup layout; use --runtime runc, or report this (hutch hides the cgroup2 mount for crun)".into()
    } else if m.contains("setrlimit") {
        "the host does not allow raising a resource limit (no CAP_SYS_RESOURCE); lower the limit"
            .into()
    } else if m.contains("oom_score_adj") {
        "the host does not allow lowering oom_score_adj; use a runtime configuration that does not set it".into()
    } else if m.contains("permission denied") || m.contains("operation not permitted") {
        "run as root on a host that allows namespaces and mounts (run hutch doctor)".into()
    } else if m.contains("no such file") {
        "check the rootfs and that the runtime and agent binaries exist (run hutch doctor)".into()
    } else {
        "run hutch doctor for a check of this host".into()
    }
}

/// One container sandbox.
pub struct ContainerSandbox {
    id: String,
    spec: SandboxSpec,
    dir: PathBuf,
    cgroup: String,
    backend: ContainerBackend,
    client: Option<AgentClient>,
    /// The runtime process (`run` in the foreground) while the sandbox lives.
    engine: Option<tokio::process::Child>,
    started: bool,
    destroyed: bool,
    timings: Arc<Mutex<PhaseTimings>>,
    oom_seen: Arc<AtomicU64>,
    /// The lock on `owner.lock` a sandbox that dies with its process (not detachable) holds
    /// while it lives; see [`OWNER_LOCK`].
    _owner: Option<std::fs::File>,
}

impl ContainerSandbox {
    fn add_time(&self, phase: Phase, d: Duration) {
        self.timings.lock().unwrap_or_else(|p| p.into_inner()).add(phase, d);
    }

    fn client(&self) -> Result<&AgentClient, SandboxError> {
        self.client.as_ref().ok_or(SandboxError::NotRunning)
    }

    /// The runtime's and agent's log (stderr of the container's init), for error messages.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("agent.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        lines[lines.len().saturating_sub(3)..].join(" | ")
    }

    /// Marks an exit as out-of-memory when the sandbox cgroup's OOM-kill counter rose while the
    /// command ran (the killed process may be a child of the command, e.g. `sh -c 'python3 ...'`).
    fn oom_hook(&self) -> ExitHook {
        let (layout, cgroup, seen) =
            (self.backend.shared.layout.clone(), self.cgroup.clone(), self.oom_seen.clone());
        Arc::new(move |st: &mut ExecStatus| {
            if let Some(n) = layout.oom_kills(&cgroup) {
                if n > seen.swap(n, Ordering::Relaxed) {
                    st.oom_killed = true;
                }
            }
        })
    }

    pub fn cgroup_path(&self) -> &str {
        &self.cgroup
    }

    /// Waits for the foreground runtime to finish its own cleanup; forces a delete when it does
    /// not exit in time or exits with an error (the container may still exist).
    async fn reap_engine(&mut self) -> Result<(), SandboxError> {
        let Some(mut child) = self.engine.take() else {
            // Adopted after a restart: the runtime process is not ours to wait for.
            if self.started {
                self.backend.shared.runtime.delete(&self.id).await?;
            }
            return Ok(());
        };
        let clean = matches!(
            tokio::time::timeout(ENGINE_EXIT_TIMEOUT, child.wait()).await,
            Ok(Ok(st)) if st.success()
        );
        if !clean {
            let r = self.backend.shared.runtime.delete(&self.id).await;
            let _ = child.start_kill();
            let _ = tokio::time::timeout(ENGINE_EXIT_TIMEOUT, child.wait()).await;
            r?;
        }
        Ok(())
    }

    fn cleanup_host(&mut self) -> Result<(), SandboxError> {
        let stuck = self.backend.shared.layout.remove(&self.cgroup);
        let _ = std::fs::remove_dir_all(&self.dir);
        if !stuck.is_empty() {
            return Err(SandboxError::runtime(
                "cleanup",
                format!(
                    "cgroups still in use: {}",
                    stuck.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        Ok(())
    }
}

impl Drop for ContainerSandbox {
    fn drop(&mut self) {
        if !self.destroyed {
            // Last resort for paths that never reached destroy(): leave nothing behind.
            if self.started {
                self.backend.shared.runtime.delete_blocking(&self.id);
            }
            if let Some(c) = self.engine.as_mut() {
                let _ = c.start_kill();
            }
            let _ = self.cleanup_host();
        }
    }
}

#[async_trait]
impl Sandbox for ContainerSandbox {
    fn id(&self) -> &str {
        &self.id
    }

    fn spec(&self) -> &SandboxSpec {
        &self.spec
    }

    fn timings(&self) -> PhaseTimings {
        self.timings.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    async fn start(&mut self) -> Result<(), SandboxError> {
        if self.started {
            return Ok(());
        }
        let t = Instant::now();
        let (host_end, guest_end) = std::os::unix::net::UnixStream::pair()
            .map_err(|e| SandboxError::io("cannot create the agent socket pair", e))?;
        let log_path = self.dir.join("agent.log");
        let log = std::fs::File::create(&log_path)
            .map_err(|e| SandboxError::io(format!("cannot create {}", log_path.display()), e))?;
        let guest: OwnedFd = guest_end.into();
        self.started = true;
        let runtime = &self.backend.shared.runtime;
        let engine = runtime.spawn_foreground(&self.id, &self.dir, &guest, log);
        drop(guest);
        self.engine = Some(engine?);
        host_end.set_nonblocking(true).map_err(|e| SandboxError::io("agent socket", e))?;
        let stream = tokio::net::UnixStream::from_std(host_end)
            .map_err(|e| SandboxError::io("agent socket", e))?;
        match AgentClient::connect(stream, AGENT_READY_TIMEOUT).await {
            Ok((client, info)) => {
                self.client = Some(client.confined(self.spec.file_roots()));
                // The agent reports how long it has run: the rest of the wait was the engine.
                let total = t.elapsed();
                let agent = Duration::from_micros(info.uptime_us).min(total);
                self.add_time(Phase::RuntimeCreate, total - agent);
                self.add_time(Phase::AgentReady, agent);
                Ok(())
            }
            Err(e) => {
                // Most often the runtime itself failed: wait for it and report what it said.
                let status = match self.engine.as_mut() {
                    Some(c) => tokio::time::timeout(Duration::from_secs(2), c.wait())
                        .await
                        .ok()
                        .and_then(Result::ok),
                    None => None,
                };
                let detail = self.log_tail();
                let name = self.backend.shared.runtime.kind.name();
                Err(match status {
                    Some(st) if !st.success() => {
                        let msg = format!("{name} exited with {st}: {detail}");
                        SandboxError::Runtime {
                            what: format!("starting the sandbox with {name}"),
                            message: format!("{msg} (hint: {})", hint_for(&msg)),
                        }
                    }
                    _ if detail.is_empty() => e,
                    _ => SandboxError::AgentNotReady(format!("{e}; log: {detail}")),
                })
            }
        }
    }

    async fn spawn(
        &self,
        mut req: ExecRequest,
        stdin: Vec<u8>,
    ) -> Result<Box<dyn Process>, SandboxError> {
        self.spec.limits.apply(&mut req);
        let inner = self.client()?.spawn(req, stdin).await?;
        Ok(Box::new(TimedProcess::new(inner, self.timings.clone(), Some(self.oom_hook()))))
    }

    fn files(&self) -> Result<&dyn FileOps, SandboxError> {
        Ok(self.client()?)
    }

    fn contexts(&self) -> Result<&dyn hutch_core::ContextOps, SandboxError> {
        Ok(self.client()?)
    }

    async fn reset(&self) -> Result<ResetReport, SandboxError> {
        let wipe = vec![
            self.spec.workdir.clone(),
            "/tmp".into(),
            "/dev/shm".into(),
            "/dev/mqueue".into(),
            crate::bundle::GUEST_RUN_DIR.into(),
        ];
        let (processes_left, entries_left) = self.client()?.reset(wipe).await?;
        Ok(ResetReport { processes_left, entries_left })
    }

    fn detach(mut self: Box<Self>) {
        // Keep everything running for a later `adopt`; the runtime process is left to init.
        self.destroyed = true;
        self.client = None;
        self.engine = None;
    }

    async fn stop(&mut self) -> Result<(), SandboxError> {
        if let Some(c) = self.client.take() {
            c.shutdown().await?;
        }
        self.reap_engine().await
    }

    async fn destroy(mut self: Box<Self>) -> Result<PhaseTimings, SandboxError> {
        let t = Instant::now();
        self.destroyed = true;
        // The agent kills everything and exits; the runtime then deletes the container itself.
        if let Some(c) = self.client.take() {
            let _ = c.shutdown().await;
        }
        let deleted = self.reap_engine().await;
        let cleaned = self.cleanup_host();
        self.add_time(Phase::Destroy, t.elapsed());
        deleted?;
        cleaned?;
        Ok(self.timings())
    }
}
