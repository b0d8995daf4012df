//! `hutch doctor`: what works on this host, and what to change for what does not.
use std::process::ExitCode;

use clap::Args;
use hutch_agent_client::{is_static_elf, locate_agent};
use hutch_backend_container::{CgroupLayout, ContainerBackend, ContainerConfig, RuntimeKind};
use hutch_backend_process::ProcessBackend;
use hutch_backend_wasm::{WasmBackend, WasmConfig};
use hutch_core::{Availability, Backend};
use serde_json::json;

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print the findings as JSON
    #[arg(long)]
    pub json: bool,
}

/// One host check.
struct Check {
    name: &'static str,
    ok: bool,
    detail: String,
    fix: Option<String>,
}

fn host_checks() -> Vec<Check> {
    let mut out = Vec::new();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string();
    out.push(Check {
        name: "kernel",
        ok: !kernel.is_empty(),
        detail: format!("Linux {kernel}"),
        fix: None,
    });

    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field =
        |k: &str| status.lines().find_map(|l| l.strip_prefix(k)).map(|v| v.trim().to_string());
    let uid_root = field("Uid:").map(|u| u.split_whitespace().nth(1) == Some("0")).unwrap_or(false);
    out.push(Check {
        name: "root",
        ok: uid_root,
        detail: if uid_root { "running as root".into() } else { "not running as root".into() },
        fix: (!uid_root)
            .then(|| "the container backend needs root: run hutch as root (e.g. with sudo)".into()),
    });
    let capeff = field("CapEff:").unwrap_or_default();
    let caps = u64::from_str_radix(&capeff, 16).unwrap_or(0);
    let sys_admin = caps & (1 << 21) != 0;
    out.push(Check {
        name: "capabilities",
        ok: !uid_root || sys_admin,
        detail: format!(
            "CapEff {capeff}{}",
            if caps & (1 << 24) == 0 {
                " (no CAP_SYS_RESOURCE: limits can only be lowered)"
            } else {
                ""
            }
        ),
        fix: (uid_root && !sys_admin)
            .then(|| "CAP_SYS_ADMIN is missing: run hutch in a privileged context".into()),
    });

    let layout = CgroupLayout::detect();
    let (ok, fix) = match &layout {
        CgroupLayout::None => (false, Some("mount cgroup2 on /sys/fs/cgroup".to_string())),
        _ => (true, None),
    };
    let mut detail = layout.describe();
    if let CgroupLayout::Hybrid { .. } = layout {
        detail.push_str(
            "; hutch runs crun in a private mount namespace with the cgroup2 mount hidden",
        );
    }
    out.push(Check { name: "cgroups", ok, detail, fix });
    if let CgroupLayout::V1 { root } | CgroupLayout::Hybrid { root, .. } = &layout {
        let missing: Vec<&str> =
            ["memory", "pids", "cpu"].into_iter().filter(|c| !root.join(c).is_dir()).collect();
        out.push(Check {
            name: "cgroup controllers",
            ok: missing.is_empty(),
            detail: if missing.is_empty() {
                "memory, pids, cpu present".into()
            } else {
                format!("missing: {}", missing.join(", "))
            },
            fix: (!missing.is_empty())
                .then(|| "mount the missing cgroup v1 controllers (or boot with cgroup v2)".into()),
        });
    }
    let seccomp = field("Seccomp:").is_some();
    out.push(Check {
        name: "seccomp",
        ok: seccomp,
        detail: if seccomp {
            "seccomp filters supported".into()
        } else {
            "no seccomp support in this kernel".into()
        },
        fix: (!seccomp).then(|| "use a kernel built with CONFIG_SECCOMP_FILTER".into()),
    });
    let ns: Vec<&str> = ["pid", "net", "mnt", "ipc", "uts"]
        .into_iter()
        .filter(|n| !std::path::Path::new("/proc/self/ns").join(n).exists())
        .collect();
    out.push(Check {
        name: "namespaces",
        ok: ns.is_empty(),
        detail: if ns.is_empty() {
            "pid, net, mnt, ipc, uts available".into()
        } else {
            format!("missing: {}", ns.join(", "))
        },
        fix: (!ns.is_empty()).then(|| "use a kernel with the missing namespaces enabled".into()),
    });
    if let Some(c) = rcu_check(&layout) {
        out.push(c);
    }
    match locate_agent().map(|p| {
        let s = is_static_elf(&p).unwrap_or(false);
        (p, s)
    }) {
        Ok((path, is_static)) => out.push(Check {
            name: "guest agent",
            ok: true,
            detail: format!(
                "{} ({})",
                path.display(),
                if is_static { "static: runs in any rootfs" } else { "dynamic: host image only" }
            ),
            fix: None,
        }),
        Err(e) => out.push(Check {
            name: "guest agent",
            ok: false,
            detail: e,
            fix: Some("run scripts/build-agent.sh or scripts/install.sh".into()),
        }),
    }
    out
}

/// A cold container start moves its first process into the sandbox's cgroups; each move takes
/// the kernel's cgroup threadgroup lock for writing, which waits for a normal RCU grace period
/// unless something keeps the lock in its slow mode. On an idle machine a grace period is long
/// (measured here: crun's create phase 19-49 ms with normal grace periods, 10-15 ms expedited).
/// Not a failure: a note with the host-wide knobs that remove the wait, and their cost.
fn rcu_check(layout: &CgroupLayout) -> Option<Check> {
    let expedited = std::fs::read_to_string("/sys/kernel/rcu_expedited").ok()?;
    if expedited.trim() != "0" {
        return None;
    }
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let favored = mounts
        .lines()
        .any(|l| l.split_whitespace().nth(2) == Some("cgroup2") && l.contains("favordynmods"));
    if matches!(layout, CgroupLayout::V2 { .. }) && favored {
        return None;
    }
    let alt = match layout {
        CgroupLayout::V2 { .. } => {
            " or mount cgroup2 with favordynmods (cheaper moves, slightly dearer fork and exit)"
        }
        _ => "",
    };
    Some(Check {
        name: "cold start latency",
        ok: true,
        detail: "moving a new sandbox into its cgroups waits for a normal RCU grace period \
                 (rcu_expedited=0): on an idle machine that can add 10-35 ms to each cold start"
            .into(),
        fix: Some(format!(
            "optional, host-wide: echo 1 > /sys/kernel/rcu_expedited (every grace period then \
             interrupts all CPUs){alt}; a warm pool avoids the cost altogether"
        )),
    })
}

async fn backend_checks() -> Vec<Availability> {
    let mut out = Vec::new();
    for kind in [RuntimeKind::Crun, RuntimeKind::Runc] {
        let a = match ContainerBackend::new(ContainerConfig::new(kind)) {
            Ok(b) => b.availability().await,
            Err(e) => unavailable(format!("container:{}", kind.name()), e),
        };
        out.push(a);
    }
    out.push(match WasmBackend::new(WasmConfig::default()) {
        Ok(b) => b.availability().await,
        Err(e) => unavailable("wasm".into(), e),
    });
    out.push(match ProcessBackend::new() {
        Ok(b) => b.availability().await,
        Err(e) => unavailable("process".into(), e),
    });
    out
}

fn unavailable(backend: String, e: hutch_core::SandboxError) -> Availability {
    match e {
        hutch_core::SandboxError::Unavailable { reason, fix, .. } => {
            Availability::no(backend, reason, fix)
        }
        other => Availability::no(
            backend,
            other.to_string(),
            "run hutch doctor again after fixing the above",
        ),
    }
}

pub async fn doctor(a: DoctorArgs) -> ExitCode {
    let host = host_checks();
    let backends = backend_checks().await;
    let default_ok = backends.first().map(|b| b.available).unwrap_or(false);
    if a.json {
        let j = json!({
            "host": host.iter().map(|c| json!({"check": c.name, "ok": c.ok, "detail": c.detail, "fix": c.fix})).collect::<Vec<_>>(),
            "backends": backends,
            "default_backend_works": default_ok,
        });
        println!("{j:#}");
    } else {
        println!("host");
        for c in &host {
            println!("  {} {:<20} {}", if c.ok { "ok  " } else { "FAIL" }, c.name, c.detail);
            if let Some(f) = &c.fix {
                println!("       {:<20} fix: {f}", "");
            }
        }
        println!("backends");
        for b in &backends {
            println!(
                "  {} {:<20} {}",
                if b.available { "ok  " } else { "FAIL" },
                b.backend,
                b.detail
            );
            if let Some(f) = &b.fix {
                println!("       {:<20} fix: {f}", "");
            }
        }
        println!("not in this build: gvisor (runsc), microvm (KVM): see the open issues");
        if !default_ok {
            println!("the default backend (container:crun) does not work here; hutch run needs --runtime runc or a fix above");
        }
    }
    if default_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
