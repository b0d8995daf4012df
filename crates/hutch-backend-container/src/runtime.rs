//! Driving an OCI runtime binary (crun or runc). The only unsafe code of this crate lives here:
//! the `pre_exec` hooks that hand the agent socket to the runtime as fd 3 and, for crun on a
//! hybrid cgroup host, hide the cgroup2 mount in a private mount namespace.
use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::{Child, Command};

use crate::cgroups::CgroupLayout;
use crate::ContainerError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RuntimeKind {
    Crun,
    Runc,
}

impl RuntimeKind {
    pub fn name(self) -> &'static str {
        match self {
            RuntimeKind::Crun => "crun",
            RuntimeKind::Runc => "runc",
        }
    }

    pub fn parse(s: &str) -> Result<Self, ContainerError> {
        match s {
            "crun" => Ok(RuntimeKind::Crun),
            "runc" => Ok(RuntimeKind::Runc),
            other => Err(ContainerError::UnknownRuntime(other.to_string())),
        }
    }
}

/// The hook run in the forked runtime process before exec: makes `guest_fd` the container's fd 3
/// (for `--preserve-fds 1`) and, on hybrid cgroup hosts, hides the cgroup2 mount from crun by
/// moving into a private mount namespace and detaching it there.
///
/// The returned closure is meant for `pre_exec`: it calls only async-signal-safe functions
/// (fcntl, dup2, unshare, mount, umount2) on data captured before the fork.
fn pre_exec_hook(
    guest_fd: Option<RawFd>,
    hide: Option<CString>,
) -> impl FnMut() -> std::io::Result<()> + Send + Sync + 'static {
    move || {
        // SAFETY: plain syscalls on integers and NUL-terminated strings owned by the closure.
        unsafe {
            if let Some(fd) = guest_fd {
                if fd == 3 {
                    let flags = libc::fcntl(3, libc::F_GETFD);
                    if flags < 0 || libc::fcntl(3, libc::F_SETFD, flags & !libc::FD_CLOEXEC) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                } else if libc::dup2(fd, 3) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if let Some(unified) = &hide {
                if libc::unshare(libc::CLONE_NEWNS) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let root = c"/";
                let flags = libc::MS_REC | libc::MS_PRIVATE;
                if libc::mount(
                    std::ptr::null(),
                    root.as_ptr(),
                    std::ptr::null(),
                    flags,
                    std::ptr::null(),
                ) < 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::umount2(unified.as_ptr(), libc::MNT_DETACH) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
        }
        Ok(())
    }
}

/// Finds an executable on PATH.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var("PATH").unwrap_or_default();
    let found =
        path.split(':').filter(|d| !d.is_empty()).map(|d| Path::new(d).join(name)).find(|p| {
            use std::os::unix::fs::PermissionsExt;
            p.metadata()
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        });
    found
}

/// One OCI runtime binary with hutch's own state root.
#[derive(Debug, Clone)]
pub struct OciRuntime {
    pub kind: RuntimeKind,
    pub binary: PathBuf,
    /// `--root`: where the runtime keeps container state (separate from any other user's).
    pub state_root: PathBuf,
    /// Set when the runtime must run in a private mount namespace without this cgroup2 mount.
    pub hide_unified: Option<CString>,
}

impl OciRuntime {
    pub fn locate(
        kind: RuntimeKind,
        state_root: PathBuf,
        layout: &CgroupLayout,
    ) -> Result<Self, ContainerError> {
        let binary = which(kind.name()).ok_or(ContainerError::RuntimeMissing(kind.name()))?;
        let hide_unified = match (kind, layout) {
            (RuntimeKind::Crun, CgroupLayout::Hybrid { unified, .. }) => Some(
                CString::new(unified.as_os_str().as_bytes())
                    .map_err(|_| ContainerError::Seccomp("bad path".into()))?,
            ),
            _ => None,
        };
        Ok(Self { kind, binary, state_root, hide_unified })
    }

    fn command(&self, guest_fd: Option<RawFd>) -> Command {
        let mut cmd = Command::new(&self.binary);
        cmd.arg("--root").arg(&self.state_root);
        cmd.stdin(Stdio::null());
        if guest_fd.is_some() || self.hide_unified.is_some() {
            let hook = pre_exec_hook(guest_fd, self.hide_unified.clone());
            // SAFETY: see `pre_exec_hook`: it only makes async-signal-safe calls.
            unsafe {
                cmd.pre_exec(hook);
            }
        }
        cmd
    }

    /// Blocking `delete --force`, for cleanup paths that cannot await (Drop).
    pub fn delete_blocking(&self, id: &str) {
        let mut cmd = std::process::Command::new(&self.binary);
        cmd.arg("--root").arg(&self.state_root).args(["delete", "--force", id]);
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        if self.hide_unified.is_some() {
            use std::os::unix::process::CommandExt;
            let hook = pre_exec_hook(None, self.hide_unified.clone());
            // SAFETY: see `pre_exec_hook`.
            unsafe {
                cmd.pre_exec(hook);
            }
        }
        let _ = cmd.status();
    }

    /// `run` in the foreground: creates and starts the container and stays until its init (the
    /// agent) exits, then deletes it (state and cgroup) on its own, so a normal teardown costs no
    /// second runtime invocation. The agent's end of the socket becomes fd 3 in the container;
    /// runtime errors and the agent's log go to `log`.
    pub fn spawn_foreground(
        &self,
        id: &str,
        bundle: &Path,
        guest: &OwnedFd,
        log: std::fs::File,
    ) -> Result<Child, ContainerError> {
        let mut cmd = self.command(Some(guest.as_raw_fd()));
        let err_log =
            log.try_clone().map_err(|e| ContainerError::Io("clone log file".into(), e))?;
        cmd.stdout(Stdio::from(log)).stderr(Stdio::from(err_log));
        cmd.args(["run", "--preserve-fds", "1", "--bundle"]).arg(bundle).arg(id);
        cmd.spawn().map_err(|e| ContainerError::Spawn(self.binary.clone(), e))
    }

    /// `delete --force`: kills the container if it still runs and removes its state and cgroup.
    pub async fn delete(&self, id: &str) -> Result<(), ContainerError> {
        let out = self
            .command(None)
            .args(["delete", "--force", id])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .await
            .map_err(|e| ContainerError::Spawn(self.binary.clone(), e))?;
        if out.status.success() {
            return Ok(());
        }
        let msg = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if msg.contains("does not exist") || msg.contains("not found") {
            return Ok(());
        }
        Err(ContainerError::RuntimeFailed { runtime: self.kind.name(), op: "delete", message: msg })
    }

    /// Ids of the containers in hutch's state root.
    pub async fn list(&self) -> Result<Vec<String>, ContainerError> {
        let out = self
            .command(None)
            .args(["list", "-q"])
            .stderr(Stdio::piped())
            .output()
            .await
            .map_err(|e| ContainerError::Spawn(self.binary.clone(), e))?;
        if !out.status.success() {
            let msg = String::from_utf8_lossy(&out.stderr).trim().to_string();
            return Err(ContainerError::RuntimeFailed {
                runtime: self.kind.name(),
                op: "list",
                message: msg,
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect())
    }

    pub async fn version(&self) -> Option<String> {
        let out = Command::new(&self.binary).arg("--version").output().await.ok()?;
        String::from_utf8_lossy(&out.stdout).lines().next().map(str::to_string)
    }

    /// The argv that runs this runtime in the foreground on `bundle` (used by the benchmark floor).
    pub fn foreground_command(&self, id: &str, bundle: &Path) -> Command {
        let mut cmd = self.command(None);
        cmd.arg("run").arg("--bundle").arg(bundle).arg(id);
        cmd
    }
}
