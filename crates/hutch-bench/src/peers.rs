//! The peers hutch is measured against, each started by the benchmark and stopped after:
//! the raw OCI runtime running hutch's own bundle (the floor), bubblewrap, Docker (a private
//! `dockerd` on its own socket and data root) and podman (rootful, private storage).
//!
//! Docker and podman run a local image built from no registry: an empty skeleton (the merged-/usr
//! links, /etc/passwd and /etc/group, mount points) imported with `docker import`, with the host's
//! /usr bound read-only, exactly the files a hutch sandbox sees (hutch binds the host /usr the same
//! way). So every engine runs the same python3, node and bash from the same page cache, and the
//! numbers compare the isolation machinery, not image sizes. Containers get isol8's defaults: read-only
//! root, no network, 512 MiB, 1 CPU, 64 pids, tmpfs /sandbox and /tmp, no new privileges.
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use hutch_backend_container::{ContainerBackend, ContainerConfig, RuntimeKind};
use hutch_core::SandboxSpec;
use serde_json::{json, Value};

/// A peer that does not run here, and why (the report prints the reason).
pub type Missing = String;

/// Where the peers keep their state across runs (the imported image, podman's storage).
pub fn state_dir() -> PathBuf {
    std::env::var_os("HUTCH_BENCH_STATE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/lib/hutch-bench"))
}

/// Short-lived sockets and exec roots (unix socket paths must stay short).
fn run_dir() -> PathBuf {
    PathBuf::from(format!("/run/hutch-bench-{}", std::process::id()))
}

pub const INSTALL_HINT: &str = "run scripts/bench-peers.sh (as root) to install the peers";

fn which(name: &str) -> Option<PathBuf> {
    hutch_backend_container::runtime::which(name)
}

/// Runs a command to completion; the error carries its stderr.
pub async fn timed(cmd: &mut tokio::process::Command) -> Result<(f64, std::process::Output)> {
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let t = Instant::now();
    let out = cmd.output().await.with_context(|| format!("start {cmd:?}"))?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    if !out.status.success() {
        bail!("{} ({}): {}", program(cmd), out.status, String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok((ms, out))
}

/// The same, writing `input` to the command's stdin.
pub async fn timed_stdin(
    cmd: &mut tokio::process::Command,
    input: &[u8],
) -> Result<(f64, std::process::Output)> {
    use tokio::io::AsyncWriteExt;
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let t = Instant::now();
    let mut child = cmd.spawn().with_context(|| format!("start {cmd:?}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input).await?;
    }
    let out = child.wait_with_output().await?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    if !out.status.success() {
        bail!("{} ({}): {}", program(cmd), out.status, String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok((ms, out))
}

fn program(cmd: &tokio::process::Command) -> String {
    let c = cmd.as_std();
    let mut s = c.get_program().to_string_lossy().to_string();
    for a in c.get_args().take(3) {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

fn first_line(bin: &Path, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new(bin).args(args).output().ok()?;
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    text.lines().next().map(|l| l.trim().to_string())
}

/// The floor: the raw OCI runtime running hutch's own bundle for a default sandbox, with the
/// command as the container process, in the foreground.
pub struct Floor {
    dir: PathBuf,
    id: String,
    backend: ContainerBackend,
}

impl Floor {
    pub fn new(runtime: RuntimeKind, argv: &[&str], tag: &str) -> Result<Self> {
        let backend = ContainerBackend::new(ContainerConfig::new(runtime))
            .with_context(|| format!("container backend with {}", runtime.name()))?;
        let id = format!("hutch-floor-{}-{tag}", std::process::id());
        let dir = backend.state_dir().join("bench").join(&id);
        std::fs::create_dir_all(&dir)?;
        backend.write_bundle(&id, &SandboxSpec::default(), &dir)?;
        let cfg_path = dir.join("config.json");
        let mut cfg: Value = serde_json::from_slice(&std::fs::read(&cfg_path)?)?;
        cfg["process"]["args"] = json!(argv);
        cfg["process"]["cwd"] = json!("/workspace");
        std::fs::write(&cfg_path, serde_json::to_vec(&cfg)?)?;
        Ok(Self { dir, id, backend })
    }

    /// One run; returns wall ms and stdout.
    pub async fn run_once(&self) -> Result<(f64, Vec<u8>)> {
        let mut cmd = self.backend.runtime().foreground_command(&self.id, &self.dir);
        let (ms, out) = timed(&mut cmd).await.context("floor run")?;
        Ok((ms, out.stdout))
    }
}

impl Drop for Floor {
    fn drop(&mut self) {
        self.backend.runtime().delete_blocking(&self.id);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// bubblewrap: new pid, net, ipc and uts namespaces, the host's /usr (and its /bin, /lib* links)
/// read-only, tmpfs /tmp, fresh /proc and /dev, as a plain peer would set it up.
pub struct Bwrap(PathBuf);

impl Bwrap {
    pub fn find() -> Result<Self, Missing> {
        which("bwrap")
            .map(Self)
            .ok_or_else(|| format!("bubblewrap is not installed ({INSTALL_HINT})"))
    }

    pub async fn run_once(&self, argv: &[&str]) -> Result<(f64, Vec<u8>)> {
        let mut cmd = tokio::process::Command::new(&self.0);
        cmd.args([
            "--unshare-pid",
            "--unshare-net",
            "--unshare-ipc",
            "--unshare-uts",
            "--die-with-parent",
        ]);
        cmd.args(["--ro-bind", "/usr", "/usr"]);
        for d in ["bin", "sbin", "lib", "lib64"] {
            let host = Path::new("/").join(d);
            match std::fs::read_link(&host) {
                Ok(target) => {
                    cmd.arg("--symlink").arg(target).arg(&host);
                }
                Err(_) if host.is_dir() => {
                    cmd.arg("--ro-bind").arg(&host).arg(&host);
                }
                Err(_) => {}
            }
        }
        cmd.args(["--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev", "--chdir", "/tmp", "--"])
            .args(argv);
        let (ms, out) = timed(&mut cmd).await.context("bwrap")?;
        Ok((ms, out.stdout))
    }
}

/// Which container engine a [`Engine`] drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    Docker,
    Podman,
}

impl EngineKind {
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Docker => "docker",
            EngineKind::Podman => "podman",
        }
    }
}

const IMAGE: &str = "localhost/hutch-bench-host-usr:2";

/// A container engine driven through its CLI, as isol8 and agentkernel drive Docker.
pub struct Engine {
    bin: PathBuf,
    podman: bool,
    stopped: bool,
    global: Vec<String>,
    env: Vec<(String, String)>,
    daemon: Option<tokio::process::Child>,
    run_dir: PathBuf,
    seq: std::sync::atomic::AtomicUsize,
}

impl Engine {
    /// Starts the engine a suite names: "docker" or "podman".
    pub async fn start_named(name: &str) -> Result<Self, Missing> {
        match name {
            "docker" => Self::start(EngineKind::Docker).await,
            "podman" => Self::start(EngineKind::Podman).await,
            other => Err(format!("{other} is not a container engine")),
        }
    }

    /// Starts the engine (Docker: a private daemon) and imports the image if needed.
    pub async fn start(kind: EngineKind) -> Result<Self, Missing> {
        Self::try_start(kind).await.map_err(|e| format!("{e:#}"))
    }

    async fn try_start(kind: EngineKind) -> Result<Self> {
        let state = state_dir().join(kind.name());
        let run = run_dir().join(kind.name());
        std::fs::create_dir_all(&state).with_context(|| format!("create {}", state.display()))?;
        std::fs::create_dir_all(&run).with_context(|| format!("create {}", run.display()))?;
        let mut e = match kind {
            EngineKind::Docker => {
                let dockerd = which("dockerd")
                    .ok_or_else(|| anyhow!("dockerd is not installed ({INSTALL_HINT})"))?;
                // Debian's CLI matches Debian's daemon; a newer CLI elsewhere on PATH may not
                let bin = ["/usr/bin/docker"]
                    .iter()
                    .map(PathBuf::from)
                    .find(|p| p.exists())
                    .or_else(|| which("docker"))
                    .ok_or_else(|| anyhow!("the docker CLI is not installed ({INSTALL_HINT})"))?;
                let sock = run.join("docker.sock");
                let cfg = run.join("daemon.json");
                std::fs::write(&cfg, "{}")?;
                let log = std::fs::File::create(run.join("dockerd.log"))?;
                let child = tokio::process::Command::new(&dockerd)
                    .arg("--host")
                    .arg(format!("unix://{}", sock.display()))
                    .arg("--data-root")
                    .arg(state.join("data"))
                    .arg("--exec-root")
                    .arg(run.join("exec"))
                    .arg("--pidfile")
                    .arg(run.join("dockerd.pid"))
                    .arg("--config-file")
                    .arg(&cfg)
                    .args([
                        "--storage-driver",
                        "overlay2",
                        "--bridge",
                        "none",
                        "--iptables=false",
                        "--ip6tables=false",
                    ])
                    .stdin(Stdio::null())
                    .stdout(log.try_clone()?)
                    .stderr(log)
                    .kill_on_drop(true)
                    .spawn()
                    .context("start dockerd")?;
                Engine {
                    bin,
                    podman: false,
                    stopped: false,
                    global: vec!["--host".into(), format!("unix://{}", sock.display())],
                    env: Vec::new(),
                    daemon: Some(child),
                    run_dir: run.clone(),
                    seq: Default::default(),
                }
            }
            EngineKind::Podman => {
                let bin = which("podman")
                    .ok_or_else(|| anyhow!("podman is not installed ({INSTALL_HINT})"))?;
                // crun fails on this hybrid cgroup host and podman's default ulimits cannot be set
                // here (docs/benchmarks/README.md): runc, and explicit ulimits in a private config
                let conf = run.join("containers.conf");
                std::fs::write(&conf, "[containers]\ndefault_ulimits = [\"nofile=4096:4096\", \"nproc=4096:4096\"]\n[engine]\nevents_logger = \"file\"\ncgroup_manager = \"cgroupfs\"\n")?;
                let global = vec![
                    "--root".into(),
                    state.join("root").display().to_string(),
                    // podman records these in its database: they must not change between runs
                    "--runroot".into(),
                    "/run/hutch-bench-podman/runroot".into(),
                    "--tmpdir".into(),
                    "/run/hutch-bench-podman/tmp".into(),
                    "--runtime".into(),
                    "runc".into(),
                    "--cgroup-manager".into(),
                    "cgroupfs".into(),
                    "--events-backend".into(),
                    "file".into(),
                    "--storage-driver".into(),
                    "overlay".into(),
                ];
                Engine {
                    bin,
                    podman: true,
                    stopped: false,
                    global,
                    env: vec![("CONTAINERS_CONF".into(), conf.display().to_string())],
                    daemon: None,
                    run_dir: run.clone(),
                    seq: Default::default(),
                }
            }
        };
        let ready = e.wait_ready().await;
        if let Err(err) = ready {
            let log = std::fs::read_to_string(e.run_dir.join("dockerd.log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(5).collect();
            e.stop().await;
            return Err(err.context(format!(
                "{} did not start{}",
                kind.name(),
                if tail.is_empty() {
                    String::new()
                } else {
                    format!(" (log: {})", tail.into_iter().rev().collect::<Vec<_>>().join(" / "))
                }
            )));
        }
        if let Err(err) = e.ensure_image().await {
            e.stop().await;
            return Err(err);
        }
        Ok(e)
    }

    pub fn cmd(&self) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(&self.bin);
        c.args(&self.global);
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    async fn wait_ready(&mut self) -> Result<()> {
        let t = Instant::now();
        loop {
            let r = timed(self.cmd().arg("version")).await;
            match r {
                Ok(_) => return Ok(()),
                Err(e) if t.elapsed() > Duration::from_secs(30) => return Err(e),
                Err(_) => {}
            }
            if let Some(d) = self.daemon.as_mut() {
                if let Some(st) = d.try_wait()? {
                    bail!("the daemon exited: {st}");
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn ensure_image(&self) -> Result<()> {
        if timed(self.cmd().args(["image", "inspect", IMAGE])).await.is_ok() {
            return Ok(());
        }
        let tar = build_skeleton(&self.run_dir)?;
        timed(self.cmd().arg("import").arg(&tar).arg(IMAGE))
            .await
            .context("import the host-/usr image")?;
        Ok(())
    }

    /// isol8's default limits and hutch's: read-only root, no network, 512 MiB, 1 CPU, 64 pids.
    fn limits(&self) -> Vec<String> {
        [
            "--read-only",
            "--network",
            "none",
            "--memory",
            "512m",
            "--cpus",
            "1",
            "--pids-limit",
            "64",
            "--security-opt",
            "no-new-privileges",
            "--user",
            "1000:1000",
            "--tmpfs",
            "/sandbox:rw,exec,size=512m,mode=1777",
            "--tmpfs",
            "/tmp:rw,noexec,nosuid,size=256m,mode=1777",
            "--volume",
            "/usr:/usr:ro",
            "--workdir",
            "/sandbox",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    fn name(&self) -> String {
        let n = self.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("hutch-bench-{}-{n}", std::process::id())
    }

    /// `run --rm IMAGE argv`: a cold one-shot container. Returns wall ms and stdout.
    pub async fn oneshot(&self, argv: &[&str]) -> Result<(f64, Vec<u8>)> {
        let mut c = self.cmd();
        c.args(["run", "--rm", "--name"])
            .arg(self.name())
            .args(self.limits())
            .arg(IMAGE)
            .args(argv);
        let (ms, out) = timed(&mut c).await?;
        Ok((ms, out.stdout))
    }

    /// `create` a container that sleeps (create phase), returns its name.
    pub async fn create(&self) -> Result<(f64, String)> {
        let name = self.name();
        let mut c = self.cmd();
        c.args(["create", "--name", &name])
            .args(self.limits())
            .arg(IMAGE)
            .args(["sleep", "infinity"]);
        let (ms, _) = timed(&mut c).await?;
        Ok((ms, name))
    }

    pub async fn start_container(&self, name: &str) -> Result<f64> {
        Ok(timed(self.cmd().args(["start", name])).await?.0)
    }

    /// `run -d`: create and start in one call (the warm-pool container).
    pub async fn run_detached(&self) -> Result<(f64, String)> {
        let name = self.name();
        let mut c = self.cmd();
        c.args(["run", "-d", "--name", &name])
            .args(self.limits())
            .arg(IMAGE)
            .args(["sleep", "infinity"]);
        let (ms, _) = timed(&mut c).await?;
        Ok((ms, name))
    }

    pub async fn exec(&self, name: &str, argv: &[&str]) -> Result<(f64, Vec<u8>)> {
        let (ms, out) = timed(self.cmd().args(["exec", name]).args(argv)).await?;
        Ok((ms, out.stdout))
    }

    pub async fn exec_stdin(&self, name: &str, argv: &[&str], input: &[u8]) -> Result<f64> {
        Ok(timed_stdin(self.cmd().args(["exec", "-i", name]).args(argv), input).await?.0)
    }

    /// `rm -f`: Docker kills at once; podman would wait 10 s for `sleep` to honour SIGTERM.
    pub async fn remove(&self, name: &str) -> Result<f64> {
        let mut c = self.cmd();
        c.args(["rm", "-f"]);
        if self.podman {
            c.args(["--time", "0"]);
        }
        Ok(timed(c.arg(name)).await?.0)
    }

    /// Removes every container this run made, then stops the daemon. Also run on drop, so an
    /// interrupted benchmark (Ctrl-C) leaves no daemon or container behind. Blocking: it runs
    /// once at the end of a suite, when nothing else is being measured.
    pub async fn stop(&mut self) {
        self.stop_blocking();
    }

    fn stop_blocking(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        let std_cmd = || {
            let mut c = std::process::Command::new(&self.bin);
            c.args(&self.global).envs(self.env.iter().map(|(k, v)| (k, v)));
            c.stdin(Stdio::null()).stderr(Stdio::null());
            c
        };
        let mine = format!("name=hutch-bench-{}-", std::process::id());
        if let Ok(out) = std_cmd().args(["ps", "-aq", "--filter", &mine]).output() {
            for id in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                let mut rm = std_cmd();
                rm.args(["rm", "-f"]);
                if self.podman {
                    rm.args(["--time", "0"]);
                }
                let _ = rm.arg(id).stdout(Stdio::null()).status();
            }
        }
        if let Some(mut d) = self.daemon.take() {
            if let Some(pid) = d.id() {
                sigterm(pid);
            }
            let t = Instant::now();
            while matches!(d.try_wait(), Ok(None)) && t.elapsed() < Duration::from_secs(20) {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = d.start_kill();
        }
        let _ = std::fs::remove_dir_all(&self.run_dir);
        let _ = std::fs::remove_dir(run_dir());
    }
}

/// Asks a process the bench started to stop (SIGTERM), so that it can clean up what it owns;
/// `false` when the signal could not be sent (the process is already gone).
pub(crate) fn sigterm(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else { return false };
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGTERM)
        .is_ok()
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop_blocking();
    }
}

/// The image's only files: the merged-/usr links, the host's users and groups, mount points.
fn build_skeleton(work: &Path) -> Result<PathBuf> {
    let root = work.join("skeleton");
    let _ = std::fs::remove_dir_all(&root);
    for d in ["usr", "etc", "tmp", "sandbox", "workspace", "proc", "sys", "dev"] {
        std::fs::create_dir_all(root.join(d))?;
    }
    // runc gives a tmpfs the mode of the directory it covers (Docker 20.10 drops `mode=`)
    for d in ["tmp", "sandbox", "workspace"] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(root.join(d), std::fs::Permissions::from_mode(0o1777))?;
    }
    for d in ["bin", "sbin", "lib", "lib32", "lib64", "libx32"] {
        let host = Path::new("/").join(d);
        if let Ok(target) = std::fs::read_link(&host) {
            std::os::unix::fs::symlink(target, root.join(d))?;
        }
    }
    for f in ["passwd", "group", "nsswitch.conf"] {
        let _ = std::fs::copy(Path::new("/etc").join(f), root.join("etc").join(f));
    }
    let tar = work.join("skeleton.tar");
    let st = std::process::Command::new("tar")
        .arg("-C")
        .arg(&root)
        .arg("-cf")
        .arg(&tar)
        .arg(".")
        .status()
        .context("run tar")?;
    if !st.success() {
        bail!("tar of the image skeleton failed: {st}");
    }
    Ok(tar)
}

/// Where secure-exec is installed (scripts/bench-peers.sh puts it in a private npm prefix).
pub fn secure_exec_prefix() -> Result<PathBuf, Missing> {
    let prefix = std::env::var_os("HUTCH_BENCH_NPM_PREFIX")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/hutch-bench/npm"));
    if which("node").is_none() {
        return Err(format!("node is not installed ({INSTALL_HINT})"));
    }
    if !prefix.join("node_modules/secure-exec/package.json").exists() {
        return Err(format!(
            "npm package secure-exec is not installed in {} ({INSTALL_HINT})",
            prefix.display()
        ));
    }
    Ok(prefix)
}

/// Versions of every engine on this machine, for the snapshot.
pub fn engine_versions() -> Value {
    let v = |bin: &str, arg: &str| which(bin).and_then(|p| first_line(&p, &[arg]));
    let se = secure_exec_prefix().ok().and_then(|p| {
        let pkg: Value = serde_json::from_slice(
            &std::fs::read(p.join("node_modules/secure-exec/package.json")).ok()?,
        )
        .ok()?;
        pkg["version"].as_str().map(String::from)
    });
    let docker_cli = first_line(Path::new("/usr/bin/docker"), &["--version"]);
    json!({
        "crun": v("crun", "--version"),
        "runc": v("runc", "--version"),
        "bwrap": v("bwrap", "--version"),
        "dockerd": v("dockerd", "--version"),
        "docker_cli": docker_cli,
        "containerd": v("containerd", "--version"),
        "podman": v("podman", "--version"),
        "node": v("node", "--version"),
        "python3": first_line(Path::new("/usr/bin/python3"), &["--version"]),
        "secure_exec": se,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_image_skeleton_holds_no_programs() {
        let dir = std::env::temp_dir().join(format!("hutch-bench-skel-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let tar = build_skeleton(&dir).unwrap();
        let list = std::process::Command::new("tar").arg("-tvf").arg(&tar).output().unwrap();
        let list = String::from_utf8_lossy(&list.stdout);
        assert!(list.contains("./usr/") && list.contains("./sandbox/"), "{list}");
        assert!(
            list.lines().any(|l| l.starts_with("drwxrwxrwt") && l.ends_with("./sandbox/")),
            "{list}"
        );
        // every regular file is a small text file from /etc: the programs come from the host /usr
        for l in list.lines().filter(|l| l.starts_with('-')) {
            assert!(l.contains("./etc/"), "unexpected file in the image: {l}");
        }
        if std::fs::read_link("/bin").is_ok() {
            assert!(list.lines().any(|l| l.starts_with('l') && l.contains("./bin ->")), "{list}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
