//! The `process` backend: **no isolation**. The guest agent runs as an ordinary child of the host
//! process in a scratch directory, so every layer above it (protocol, exec, files, limits on time
//! and output) can be measured without an isolation engine. It exists as the benchmark baseline
//! and for testing the agent without root; never use it for untrusted code. Memory, CPU and pids
//! limits are not enforced here.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hutch_agent_client::{locate_agent, AgentClient, TimedProcess};
use hutch_core::{
    Availability, Backend, ExecRequest, FileOps, Image, Phase, PhaseTimings, Process, ResetReport,
    Sandbox, SandboxError, SandboxSpec,
};

#[derive(Debug, Clone)]
pub struct ProcessBackend {
    agent: PathBuf,
}

impl ProcessBackend {
    pub fn new() -> Result<Self, SandboxError> {
        let agent = locate_agent().map_err(|m| SandboxError::Unavailable {
            backend: "process".into(),
            reason: m,
            fix: "run scripts/build-agent.sh".into(),
        })?;
        Ok(Self { agent })
    }
}

#[async_trait]
impl Backend for ProcessBackend {
    fn name(&self) -> String {
        "process".into()
    }

    async fn availability(&self) -> Availability {
        let probe = async {
            let mut sb = self.create(SandboxSpec::default()).await?;
            sb.start().await?;
            let r = sb
                .exec(ExecRequest::argv(["/bin/echo", "ok"]), Vec::new(), &mut hutch_core::Discard)
                .await;
            let _ = sb.destroy().await;
            r
        };
        match probe.await {
            Ok(r) if r.stdout == b"ok\n" => {
                Availability::yes("process", "no isolation: benchmark baseline only")
            }
            Ok(r) => Availability::no(
                "process",
                format!("echo printed {:?}", String::from_utf8_lossy(&r.stdout)),
                "rebuild the agent",
            ),
            Err(e) => Availability::no(
                "process",
                e.to_string(),
                "rebuild the agent with scripts/build-agent.sh",
            ),
        }
    }

    async fn create(&self, spec: SandboxSpec) -> Result<Box<dyn Sandbox>, SandboxError> {
        let t = Instant::now();
        if spec.image != Image::Host {
            return Err(SandboxError::InvalidSpec(
                "the process backend runs on the host filesystem; it takes no --rootfs".into(),
            ));
        }
        let dir =
            std::env::temp_dir().join(format!("hutch-process-{}-{}", std::process::id(), next()));
        std::fs::create_dir_all(&dir)
            .map_err(|e| SandboxError::io(format!("cannot create {}", dir.display()), e))?;
        let mut timings = PhaseTimings::default();
        timings.add(Phase::Prepare, t.elapsed());
        Ok(Box::new(ProcessSandbox {
            id: dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            agent: self.agent.clone(),
            spec,
            dir,
            child: None,
            client: None,
            timings: Arc::new(Mutex::new(timings)),
        }))
    }
}

fn next() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

pub struct ProcessSandbox {
    id: String,
    agent: PathBuf,
    spec: SandboxSpec,
    dir: PathBuf,
    child: Option<tokio::process::Child>,
    client: Option<AgentClient>,
    timings: Arc<Mutex<PhaseTimings>>,
}

impl ProcessSandbox {
    fn client(&self) -> Result<&AgentClient, SandboxError> {
        self.client.as_ref().ok_or(SandboxError::NotRunning)
    }

    fn add_time(&self, p: Phase, d: Duration) {
        self.timings.lock().unwrap_or_else(|e| e.into_inner()).add(p, d);
    }
}

impl Drop for ProcessSandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[async_trait]
impl Sandbox for ProcessSandbox {
    fn id(&self) -> &str {
        &self.id
    }

    fn spec(&self) -> &SandboxSpec {
        &self.spec
    }

    fn timings(&self) -> PhaseTimings {
        self.timings.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    async fn start(&mut self) -> Result<(), SandboxError> {
        let t = Instant::now();
        let (host, guest) =
            tokio::net::UnixStream::pair().map_err(|e| SandboxError::io("socket pair", e))?;
        let guest = guest.into_std().map_err(|e| SandboxError::io("socket pair", e))?;
        // the agent does blocking I/O on its end
        guest.set_nonblocking(false).map_err(|e| SandboxError::io("socket pair", e))?;
        let dir = self.dir.to_string_lossy().into_owned();
        let mut cmd = tokio::process::Command::new(&self.agent);
        cmd.arg("--fd").arg("0").arg("--workdir").arg(&dir);
        let mut env = self.spec.effective_env();
        env.insert("HOME".into(), dir.clone());
        cmd.env_clear().envs(env).current_dir(&self.dir);
        // The socket is the agent's stdin (fd 0): no fd juggling, no unsafe.
        cmd.stdin(Stdio::from(std::os::fd::OwnedFd::from(guest)))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        cmd.kill_on_drop(true);
        let child = cmd
            .spawn()
            .map_err(|e| SandboxError::io(format!("cannot start {}", self.agent.display()), e))?;
        self.child = Some(child);
        self.add_time(Phase::RuntimeCreate, t.elapsed());
        let t = Instant::now();
        let (client, _) = AgentClient::connect(host, Duration::from_secs(10)).await?;
        let roots = if self.spec.confine_files { vec![dir] } else { Vec::new() };
        self.client = Some(client.confined(roots));
        self.add_time(Phase::AgentReady, t.elapsed());
        Ok(())
    }

    async fn spawn(
        &self,
        mut req: ExecRequest,
        stdin: Vec<u8>,
    ) -> Result<Box<dyn Process>, SandboxError> {
        self.spec.limits.apply(&mut req);
        let inner = self.client()?.spawn(req, stdin).await?;
        Ok(Box::new(TimedProcess::new(inner, self.timings.clone(), None)))
    }

    fn files(&self) -> Result<&dyn FileOps, SandboxError> {
        Ok(self.client()?)
    }

    fn contexts(&self) -> Result<&dyn hutch_core::ContextOps, SandboxError> {
        Ok(self.client()?)
    }

    async fn reset(&self) -> Result<ResetReport, SandboxError> {
        let dir = self.dir.to_string_lossy().into_owned();
        let (processes_left, entries_left) = self.client()?.reset(vec![dir]).await?;
        Ok(ResetReport { processes_left, entries_left })
    }

    async fn stop(&mut self) -> Result<(), SandboxError> {
        if let Some(c) = self.client.take() {
            c.shutdown().await?;
        }
        Ok(())
    }

    async fn destroy(mut self: Box<Self>) -> Result<PhaseTimings, SandboxError> {
        let t = Instant::now();
        if let Some(c) = self.client.take() {
            let _ = c.shutdown().await;
        }
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
        }
        let _ = std::fs::remove_dir_all(&self.dir);
        self.add_time(Phase::Destroy, t.elapsed());
        Ok(self.timings())
    }
}
