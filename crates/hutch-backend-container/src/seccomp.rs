//! The default seccomp profile: data in `policy/seccomp.toml` (a comment per rule), compiled into
//! the binary and turned into the OCI `linux.seccomp` section.
use oci_spec::runtime::{
    Arch, LinuxSeccomp, LinuxSeccompAction, LinuxSeccompArg, LinuxSeccompArgBuilder,
    LinuxSeccompBuilder, LinuxSeccompOperator, LinuxSyscall, LinuxSyscallBuilder,
};
use serde::Deserialize;

use crate::ContainerError;

/// The profile source, embedded at build time.
pub const DEFAULT_PROFILE: &str = include_str!("../policy/seccomp.toml");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub default_action: Action,
    #[serde(default)]
    pub default_errno: Option<u32>,
    #[serde(rename = "rule")]
    pub rules: Vec<Rule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub comment: String,
    pub action: Action,
    pub names: Vec<String>,
    #[serde(default)]
    pub errno: Option<u32>,
    #[serde(default)]
    pub args: Vec<Arg>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Arg {
    pub index: usize,
    pub value: u64,
    #[serde(default)]
    pub value_two: Option<u64>,
    pub op: Op,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Allow,
    Errno,
    KillProcess,
    KillThread,
    Trap,
    Log,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Ne,
    Lt,
    Le,
    Eq,
    Ge,
    Gt,
    MaskedEq,
}

impl From<Action> for LinuxSeccompAction {
    fn from(a: Action) -> Self {
        match a {
            Action::Allow => LinuxSeccompAction::ScmpActAllow,
            Action::Errno => LinuxSeccompAction::ScmpActErrno,
            Action::KillProcess => LinuxSeccompAction::ScmpActKillProcess,
            Action::KillThread => LinuxSeccompAction::ScmpActKillThread,
            Action::Trap => LinuxSeccompAction::ScmpActTrap,
            Action::Log => LinuxSeccompAction::ScmpActLog,
        }
    }
}

impl From<Op> for LinuxSeccompOperator {
    fn from(o: Op) -> Self {
        match o {
            Op::Ne => LinuxSeccompOperator::ScmpCmpNe,
            Op::Lt => LinuxSeccompOperator::ScmpCmpLt,
            Op::Le => LinuxSeccompOperator::ScmpCmpLe,
            Op::Eq => LinuxSeccompOperator::ScmpCmpEq,
            Op::Ge => LinuxSeccompOperator::ScmpCmpGe,
            Op::Gt => LinuxSeccompOperator::ScmpCmpGt,
            Op::MaskedEq => LinuxSeccompOperator::ScmpCmpMaskedEq,
        }
    }
}

fn bad(e: impl std::fmt::Display) -> ContainerError {
    ContainerError::Seccomp(e.to_string())
}

impl Profile {
    pub fn parse(src: &str) -> Result<Self, ContainerError> {
        let p: Profile = toml::from_str(src).map_err(bad)?;
        for r in &p.rules {
            if r.comment.trim().is_empty() {
                return Err(bad(format!("rule for {:?} has no comment", r.names)));
            }
            if r.names.is_empty() {
                return Err(bad(format!("rule {:?} names no syscall", r.comment)));
            }
            if r.errno.is_some() && r.action != Action::Errno {
                return Err(bad(format!(
                    "rule {:?} sets errno without action = \"errno\"",
                    r.comment
                )));
            }
        }
        Ok(p)
    }

    pub fn to_oci(&self) -> Result<LinuxSeccomp, ContainerError> {
        let mut syscalls: Vec<LinuxSyscall> = Vec::with_capacity(self.rules.len());
        for r in &self.rules {
            let mut b = LinuxSyscallBuilder::default()
                .names(r.names.clone())
                .action(LinuxSeccompAction::from(r.action));
            if let Some(e) = r.errno {
                b = b.errno_ret(e);
            }
            if !r.args.is_empty() {
                let args: Vec<LinuxSeccompArg> = r
                    .args
                    .iter()
                    .map(|a| {
                        let mut ab = LinuxSeccompArgBuilder::default()
                            .index(a.index)
                            .value(a.value)
                            .op(LinuxSeccompOperator::from(a.op));
                        if let Some(v2) = a.value_two {
                            ab = ab.value_two(v2);
                        }
                        ab.build().map_err(bad)
                    })
                    .collect::<Result<_, _>>()?;
                b = b.args(args);
            }
            syscalls.push(b.build().map_err(bad)?);
        }
        let mut b = LinuxSeccompBuilder::default()
            .default_action(LinuxSeccompAction::from(self.default_action))
            .architectures(vec![Arch::ScmpArchX86_64, Arch::ScmpArchX86, Arch::ScmpArchX32])
            .syscalls(syscalls);
        if let Some(e) = self.default_errno {
            b = b.default_errno_ret(e);
        }
        b.build().map_err(bad)
    }

    /// Names the profile lets through unconditionally.
    pub fn allowed(&self) -> impl Iterator<Item = &str> {
        self.rules
            .iter()
            .filter(|r| r.action == Action::Allow && r.args.is_empty())
            .flat_map(|r| r.names.iter().map(String::as_str))
    }
}

/// The embedded default profile as OCI config.
pub fn default_seccomp() -> Result<LinuxSeccomp, ContainerError> {
    Profile::parse(DEFAULT_PROFILE)?.to_oci()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_profile_parses_and_every_rule_is_commented() {
        let p = Profile::parse(DEFAULT_PROFILE).expect("profile parses");
        assert_eq!(p.default_action, Action::Errno);
        assert!(p.rules.len() > 10);
        let oci = p.to_oci().expect("converts");
        assert!(oci.syscalls().as_ref().map(|s| s.len()).unwrap_or(0) >= p.rules.len());
    }

    #[test]
    fn dangerous_syscalls_are_not_allowed() {
        let p = Profile::parse(DEFAULT_PROFILE).expect("profile parses");
        let allowed: Vec<&str> = p.allowed().collect();
        for s in [
            "mount",
            "umount2",
            "unshare",
            "setns",
            "ptrace",
            "bpf",
            "keyctl",
            "kexec_load",
            "init_module",
            "pivot_root",
            "userfaultfd",
            "open_by_handle_at",
            "io_uring_setup",
            "perf_event_open",
            "reboot",
        ] {
            assert!(!allowed.contains(&s), "{s} must not be allowed");
        }
        for s in ["read", "write", "execve", "wait4", "openat", "mmap", "futex"] {
            assert!(allowed.contains(&s), "{s} must be allowed");
        }
        // clone is only allowed without namespace flags
        let clone =
            p.rules.iter().find(|r| r.names.iter().any(|n| n == "clone")).expect("clone rule");
        assert_eq!(clone.args.len(), 1);
        assert_eq!(clone.args[0].value, 0x7E02_0000);
    }

    #[test]
    fn a_rule_without_comment_is_rejected() {
        let src = "default_action = \"errno\"\n[[rule]]\ncomment = \"\"\naction = \"allow\"\nnames = [\"read\"]\n";
        assert!(Profile::parse(src).is_err());
        let src = "default_action = \"errno\"\n[[rule]]\ncomment = \"x\"\naction = \"allow\"\nnames = [\"read\"]\nbogus = 1\n";
        assert!(Profile::parse(src).is_err());
    }
}
