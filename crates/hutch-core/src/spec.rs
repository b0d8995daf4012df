//! What a sandbox should be. Defaults are the secure ones: 512 MiB, 1 CPU, 64 processes, 30 s per
//! exec, 1 MiB of output per stream, a 256 MiB tmpfs workspace, no network, a non-root user.
use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::units::{fmt_bytes, MIB};

/// The root filesystem of a sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Image {
    /// The host's own /usr, /bin, /lib* mounted read-only with a minimal generated /etc.
    #[default]
    Host,
    /// A directory holding a root filesystem (mounted read-only).
    Rootfs(PathBuf),
}

impl Image {
    pub fn describe(&self) -> String {
        match self {
            Image::Host => "host".into(),
            Image::Rootfs(p) => format!("rootfs:{}", p.display()),
        }
    }
}

/// Network policy. Only `none` exists today: the sandbox gets its own network namespace with
/// nothing but loopback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum NetworkPolicy {
    #[default]
    None,
}

/// The uid/gid the sandbox's processes run as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserSpec {
    pub uid: u32,
    pub gid: u32,
}

impl Default for UserSpec {
    fn default() -> Self {
        Self { uid: 1000, gid: 1000 }
    }
}

/// Resource limits. Every field has a secure default; see [`Limits::validate`] for the bounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Limits {
    pub memory_bytes: u64,
    pub cpus: f64,
    pub pids: u64,
    /// Wall-clock limit of one exec.
    pub timeout_ms: u64,
    /// Output delivered per stream (stdout, stderr) of one exec before it is cut with a marker.
    pub output_bytes: u64,
    /// Size of the tmpfs mounted at the workspace (and of /tmp).
    pub workspace_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_bytes: 512 * MIB,
            cpus: 1.0,
            pids: 64,
            timeout_ms: 30_000,
            output_bytes: MIB,
            workspace_bytes: 256 * MIB,
        }
    }
}

/// A limit that cannot work, with the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{problem}; {fix}")]
pub struct LimitError {
    pub problem: String,
    pub fix: String,
}

/// Facts about the host that bound the limits.
#[derive(Debug, Clone, Copy)]
pub struct HostCapacity {
    pub memory_bytes: u64,
    pub cpus: u32,
}

impl HostCapacity {
    /// Reads /proc/meminfo and the CPU count of this process.
    pub fn probe() -> Self {
        let memory_bytes = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("MemTotal:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|kb| kb.parse::<u64>().ok())
            })
            .map(|kb| kb * 1024)
            .unwrap_or(u64::MAX);
        let cpus = std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1);
        Self { memory_bytes, cpus }
    }
}

/// Smallest memory limit a sandbox can start with (agent + a shell).
pub const MIN_MEMORY: u64 = 8 * MIB;
/// The agent itself needs a few pids (its threads count against the limit).
pub const MIN_PIDS: u64 = 8;

impl Limits {
    /// Fits an exec request into these limits: the timeout defaults to and is capped at the
    /// sandbox's, and so is the output cap.
    pub fn apply(&self, req: &mut hutch_proto::ExecRequest) {
        req.timeout_ms = Some(req.timeout_ms.unwrap_or(self.timeout_ms).min(self.timeout_ms));
        req.output_limit = req.output_limit.min(self.output_bytes);
    }

    pub fn validate(&self, host: HostCapacity) -> Result<(), LimitError> {
        let err = |problem: String, fix: &str| Err(LimitError { problem, fix: fix.to_string() });
        if self.memory_bytes < MIN_MEMORY {
            return err(
                format!(
                    "memory limit {} is too small to start a sandbox",
                    fmt_bytes(self.memory_bytes)
                ),
                &format!("use at least {}", fmt_bytes(MIN_MEMORY)),
            );
        }
        if self.memory_bytes > host.memory_bytes {
            return err(
                format!(
                    "memory limit {} is more than this host has ({})",
                    fmt_bytes(self.memory_bytes),
                    fmt_bytes(host.memory_bytes)
                ),
                "lower --memory",
            );
        }
        if !(self.cpus.is_finite() && self.cpus >= 0.01) {
            return err(
                format!("cpu limit {} is not a positive number", self.cpus),
                "use e.g. --cpus 0.5 or --cpus 1",
            );
        }
        if self.cpus > host.cpus as f64 {
            return err(
                format!("cpu limit {} is more than this host has ({})", self.cpus, host.cpus),
                "lower --cpus",
            );
        }
        if self.pids < MIN_PIDS {
            return err(
                format!("pids limit {} leaves no room for the guest agent", self.pids),
                &format!("use at least {MIN_PIDS}"),
            );
        }
        if self.timeout_ms == 0 {
            return err(
                "timeout 0 would kill every command at once".into(),
                "use e.g. --timeout 30s",
            );
        }
        if self.workspace_bytes < MIB {
            return err(
                format!("workspace size {} is too small", fmt_bytes(self.workspace_bytes)),
                "use at least 1m",
            );
        }
        if self.workspace_bytes > self.memory_bytes.saturating_mul(64) {
            return err(
                format!("workspace size {} is unreasonably large", fmt_bytes(self.workspace_bytes)),
                "the workspace is a tmpfs charged to the sandbox's memory; keep it near --memory",
            );
        }
        Ok(())
    }
}

/// Everything needed to create a sandbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SandboxSpec {
    pub image: Image,
    /// Environment of every process (PATH and HOME get defaults when absent).
    pub env: BTreeMap<String, String>,
    pub user: UserSpec,
    /// Working directory and tmpfs workspace mount point.
    pub workdir: String,
    pub hostname: String,
    pub limits: Limits,
    pub network: NetworkPolicy,
    /// Confine the file API (not the commands) to the workdir and /tmp: paths that resolve
    /// elsewhere, through `..` or symlinks, are refused.
    pub confine_files: bool,
}

impl Default for SandboxSpec {
    fn default() -> Self {
        Self {
            image: Image::Host,
            env: BTreeMap::new(),
            user: UserSpec::default(),
            workdir: "/workspace".into(),
            hostname: "hutch".into(),
            limits: Limits::default(),
            network: NetworkPolicy::None,
            confine_files: true,
        }
    }
}

pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

impl SandboxSpec {
    /// The environment processes start with: the spec's variables over hutch's defaults.
    pub fn effective_env(&self) -> BTreeMap<String, String> {
        let mut env = BTreeMap::new();
        env.insert("PATH".to_string(), DEFAULT_PATH.to_string());
        env.insert("HOME".to_string(), self.workdir.clone());
        env.insert("LANG".to_string(), "C.UTF-8".to_string());
        env.insert("HOSTNAME".to_string(), self.hostname.clone());
        env.extend(self.env.clone());
        env
    }

    /// The directories the file API may touch (empty: anywhere the sandbox user may).
    pub fn file_roots(&self) -> Vec<String> {
        if self.confine_files {
            vec![self.workdir.clone(), "/tmp".to_string()]
        } else {
            Vec::new()
        }
    }

    /// Checks everything that can be checked without a backend.
    pub fn validate(&self, host: HostCapacity) -> Result<(), crate::SandboxError> {
        self.limits.validate(host).map_err(|e| crate::SandboxError::InvalidSpec(e.to_string()))?;
        if !self.workdir.starts_with('/') || self.workdir.contains("..") {
            return Err(crate::SandboxError::InvalidSpec(format!(
                "workdir {:?} must be an absolute path without '..'",
                self.workdir
            )));
        }
        for (k, v) in &self.env {
            if k.is_empty() || k.contains('=') || k.contains('\0') {
                return Err(crate::SandboxError::InvalidSpec(format!(
                    "invalid environment variable name {k:?}"
                )));
            }
            if v.contains('\0') {
                return Err(crate::SandboxError::InvalidSpec(format!(
                    "environment variable {k} contains a NUL byte"
                )));
            }
        }
        if let Image::Rootfs(p) = &self.image {
            if !p.is_dir() {
                return Err(crate::SandboxError::InvalidSpec(format!(
                    "rootfs {} does not exist or is not a directory; pass a directory holding a root filesystem (e.g. made with debootstrap) or use --image host",
                    p.display()
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> HostCapacity {
        HostCapacity { memory_bytes: 4 << 30, cpus: 2 }
    }

    #[test]
    fn defaults_are_the_secure_ones() {
        let l = Limits::default();
        assert_eq!(l.memory_bytes, 512 << 20);
        assert_eq!(l.cpus, 1.0);
        assert_eq!(l.pids, 64);
        assert_eq!(l.timeout_ms, 30_000);
        assert_eq!(l.output_bytes, 1 << 20);
        assert_eq!(l.workspace_bytes, 256 << 20);
        assert_eq!(SandboxSpec::default().network, NetworkPolicy::None);
        assert_ne!(SandboxSpec::default().user.uid, 0);
        assert!(l.validate(host()).is_ok());
    }

    #[test]
    fn impossible_limits_are_rejected_with_a_fix() {
        let cases = [
            Limits { memory_bytes: 1024, ..Default::default() },
            Limits { memory_bytes: 8 << 30, ..Default::default() },
            Limits { cpus: 0.0, ..Default::default() },
            Limits { cpus: 16.0, ..Default::default() },
            Limits { cpus: f64::NAN, ..Default::default() },
            Limits { pids: 1, ..Default::default() },
            Limits { timeout_ms: 0, ..Default::default() },
        ];
        for c in cases {
            let e = c.validate(host()).expect_err("must be rejected");
            assert!(!e.fix.is_empty(), "{e}");
        }
    }

    #[test]
    fn spec_json_round_trips_and_fills_defaults() {
        let s: SandboxSpec =
            serde_json::from_str(r#"{"image":{"rootfs":"/x"},"limits":{"pids":10}}"#)
                .expect("parse");
        assert_eq!(s.image, Image::Rootfs("/x".into()));
        assert_eq!(s.limits.pids, 10);
        assert_eq!(s.limits.memory_bytes, 512 << 20);
        let back: SandboxSpec =
            serde_json::from_str(&serde_json::to_string(&s).expect("ser")).expect("de");
        assert_eq!(back, s);
    }
}
