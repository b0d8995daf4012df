//! The OCI bundle hutch generates for every container sandbox: own pid, mount, ipc, uts and
//! network namespaces (loopback only), a read-only root, a non-root user, no capabilities,
//! no-new-privileges, the seccomp profile, masked /proc paths, tmpfs /workspace and /tmp, and the
//! limits as cgroup resources. The guest agent is bind-mounted read-only and runs as init.
use std::collections::HashSet;
use std::path::{Path, PathBuf};

use hutch_core::SandboxSpec;
use oci_spec::runtime::{
    LinuxBuilder, LinuxCapabilitiesBuilder, LinuxCpuBuilder, LinuxMemoryBuilder,
    LinuxNamespaceBuilder, LinuxNamespaceType, LinuxPidsBuilder, LinuxResourcesBuilder,
    LinuxSeccomp, Mount, MountBuilder, PosixRlimitBuilder, PosixRlimitType, ProcessBuilder,
    RootBuilder, Spec, SpecBuilder, UserBuilder,
};

use crate::ContainerError;

/// Where the agent binary appears inside the sandbox. /dev is a fresh tmpfs made by the runtime,
/// so the mount point never has to be created in (possibly read-only) user rootfs directories.
pub const GUEST_AGENT_PATH: &str = "/dev/.hutch-agent";

/// Paths masked (made empty) inside the container: kernel state a guest has no business reading.
pub const MASKED_PATHS: [&str; 11] = [
    "/proc/acpi",
    "/proc/asound",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
];

/// Paths mounted read-only inside the container.
pub const READONLY_PATHS: [&str; 6] =
    ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger", "/sys/fs/cgroup"];

/// Everything the bundle needs besides the spec.
#[derive(Debug, Clone)]
pub struct BundleInputs<'a> {
    pub rootfs: &'a Path,
    /// Host paths bound read-only at the same place (host image: /usr, real /lib* directories).
    pub host_binds: &'a [PathBuf],
    /// A generated /etc to bind read-only (host image).
    pub etc: Option<&'a Path>,
    pub agent: &'a Path,
    pub cgroups_path: &'a str,
    pub seccomp: LinuxSeccomp,
    /// `seccomp` precompiled (base64), for a runtime that loads it instead of compiling
    /// (crun's [`crate::seccomp_bpf::CRUN_BPF_ANNOTATION`]).
    pub seccomp_bpf: Option<&'a str>,
    /// A host directory (owned by the sandbox user) bound at [`GUEST_RUN_DIR`]: the agent also
    /// listens there, so a restarted daemon can reconnect to a sandbox that outlived it.
    pub run_dir: Option<&'a Path>,
}

/// Where the agent's listening socket lives inside a detachable sandbox.
pub const GUEST_RUN_DIR: &str = "/dev/hutch";
/// The socket's name in that directory (and in the host directory bound there).
pub const AGENT_SOCKET: &str = "agent.sock";

fn bad(e: impl std::fmt::Display) -> ContainerError {
    ContainerError::Bundle(e.to_string())
}

fn mount(dest: &str, typ: &str, source: &str, options: &[&str]) -> Result<Mount, ContainerError> {
    MountBuilder::default()
        .destination(PathBuf::from(dest))
        .typ(typ.to_string())
        .source(PathBuf::from(source))
        .options(options.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        .build()
        .map_err(bad)
}

fn agent_args(spec: &SandboxSpec, listen: bool) -> Vec<String> {
    let mut args = vec![
        GUEST_AGENT_PATH.to_string(),
        "--fd".into(),
        "3".into(),
        "--workdir".into(),
        spec.workdir.clone(),
    ];
    if listen {
        args.extend(["--listen".to_string(), format!("{GUEST_RUN_DIR}/{AGENT_SOCKET}")]);
    }
    args
}

/// Builds the config.json content.
pub fn build_spec(spec: &SandboxSpec, inp: &BundleInputs<'_>) -> Result<Spec, ContainerError> {
    let l = &spec.limits;
    let uid = spec.user.uid;
    let gid = spec.user.gid;
    let size = |b: u64| format!("size={}k", b.div_ceil(1024));

    let mut mounts = vec![
        mount("/proc", "proc", "proc", &["nosuid", "noexec", "nodev"])?,
        mount("/dev", "tmpfs", "tmpfs", &["nosuid", "strictatime", "mode=755", "size=65536k"])?,
        mount(
            "/dev/pts",
            "devpts",
            "devpts",
            &["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"],
        )?,
        mount(
            "/dev/shm",
            "tmpfs",
            "shm",
            &["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"],
        )?,
        mount("/dev/mqueue", "mqueue", "mqueue", &["nosuid", "noexec", "nodev"])?,
        mount("/sys", "sysfs", "sysfs", &["nosuid", "noexec", "nodev", "ro"])?,
    ];
    for b in inp.host_binds {
        let p = b.to_string_lossy();
        mounts.push(mount(&p, "bind", &p, &["rbind", "ro", "nosuid", "nodev"])?);
    }
    if let Some(etc) = inp.etc {
        mounts.push(mount(
            "/etc",
            "bind",
            &etc.to_string_lossy(),
            &["rbind", "ro", "nosuid", "nodev"],
        )?);
    }
    let ws_opts = [
        "nosuid",
        "nodev",
        "mode=0755",
        &size(l.workspace_bytes),
        &format!("uid={uid}"),
        &format!("gid={gid}"),
    ];
    mounts.push(mount(&spec.workdir, "tmpfs", "tmpfs", &ws_opts)?);
    if spec.workdir != "/tmp" {
        mounts.push(mount(
            "/tmp",
            "tmpfs",
            "tmpfs",
            &["nosuid", "nodev", "mode=1777", &size(l.workspace_bytes)],
        )?);
    }
    mounts.push(mount(
        GUEST_AGENT_PATH,
        "bind",
        &inp.agent.to_string_lossy(),
        &["bind", "ro", "nosuid", "nodev"],
    )?);
    if let Some(run) = inp.run_dir {
        mounts.push(mount(
            GUEST_RUN_DIR,
            "bind",
            &run.to_string_lossy(),
            &["bind", "rw", "nosuid", "nodev", "noexec"],
        )?);
    }

    let caps = LinuxCapabilitiesBuilder::default()
        .bounding(HashSet::new())
        .effective(HashSet::new())
        .inheritable(HashSet::new())
        .permitted(HashSet::new())
        .ambient(HashSet::new())
        .build()
        .map_err(bad)?;
    let rlimits = vec![
        PosixRlimitBuilder::default()
            .typ(PosixRlimitType::RlimitNofile)
            .hard(4096u64)
            .soft(4096u64)
            .build()
            .map_err(bad)?,
        PosixRlimitBuilder::default()
            .typ(PosixRlimitType::RlimitCore)
            .hard(0u64)
            .soft(0u64)
            .build()
            .map_err(bad)?,
    ];
    let env: Vec<String> =
        spec.effective_env().into_iter().map(|(k, v)| format!("{k}={v}")).collect();
    let process = ProcessBuilder::default()
        .terminal(false)
        .user(
            UserBuilder::default()
                .uid(uid)
                .gid(gid)
                .additional_gids(vec![gid])
                .build()
                .map_err(bad)?,
        )
        .args(agent_args(spec, inp.run_dir.is_some()))
        .env(env)
        .cwd(PathBuf::from("/"))
        .capabilities(caps)
        .rlimits(rlimits)
        .no_new_privileges(true)
        .build()
        .map_err(bad)?;

    let ns = |t: LinuxNamespaceType| LinuxNamespaceBuilder::default().typ(t).build().map_err(bad);
    let namespaces = vec![
        ns(LinuxNamespaceType::Pid)?,
        ns(LinuxNamespaceType::Network)?,
        ns(LinuxNamespaceType::Ipc)?,
        ns(LinuxNamespaceType::Uts)?,
        ns(LinuxNamespaceType::Mount)?,
    ];
    let period: u64 = 100_000;
    let quota = (l.cpus * period as f64).round().max(1000.0) as i64;
    let resources = LinuxResourcesBuilder::default()
        .memory(LinuxMemoryBuilder::default().limit(l.memory_bytes as i64).build().map_err(bad)?)
        .pids(LinuxPidsBuilder::default().limit(l.pids as i64).build().map_err(bad)?)
        .cpu(LinuxCpuBuilder::default().quota(quota).period(period).build().map_err(bad)?)
        .build()
        .map_err(bad)?;
    let linux = LinuxBuilder::default()
        .namespaces(namespaces)
        .resources(resources)
        .cgroups_path(PathBuf::from(inp.cgroups_path))
        .seccomp(inp.seccomp.clone())
        .masked_paths(MASKED_PATHS.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        .readonly_paths(READONLY_PATHS.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        .build()
        .map_err(bad)?;
    let mut annotations = std::collections::HashMap::new();
    if let Some(b) = inp.seccomp_bpf {
        annotations.insert(crate::seccomp_bpf::CRUN_BPF_ANNOTATION.to_string(), b.to_string());
    }
    SpecBuilder::default()
        .version("1.0.2".to_string())
        .annotations(annotations)
        .root(
            RootBuilder::default()
                .path(inp.rootfs.to_path_buf())
                .readonly(true)
                .build()
                .map_err(bad)?,
        )
        .hostname(spec.hostname.clone())
        .mounts(mounts)
        .process(process)
        .linux(linux)
        .build()
        .map_err(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec_json() -> serde_json::Value {
        let spec = SandboxSpec::default();
        let binds = vec![PathBuf::from("/usr")];
        let inp = BundleInputs {
            rootfs: Path::new("/img/rootfs"),
            host_binds: &binds,
            etc: Some(Path::new("/img/etc")),
            agent: Path::new("/opt/hutch-agent"),
            cgroups_path: "/hutch/t1",
            seccomp: crate::seccomp::default_seccomp().expect("seccomp"),
            seccomp_bpf: Some("AAAA"),
            run_dir: None,
        };
        serde_json::to_value(build_spec(&spec, &inp).expect("spec")).expect("json")
    }

    #[test]
    fn isolation_defaults_are_in_the_config() {
        let j = spec_json();
        assert_eq!(j["root"]["readonly"], true);
        assert_eq!(j["process"]["noNewPrivileges"], true);
        assert_eq!(j["process"]["user"]["uid"], 1000);
        for set in ["bounding", "effective", "permitted", "inheritable", "ambient"] {
            assert_eq!(
                j["process"]["capabilities"][set].as_array().map(Vec::len),
                Some(0),
                "{set}"
            );
        }
        let ns: Vec<&str> = j["linux"]["namespaces"]
            .as_array()
            .expect("ns")
            .iter()
            .filter_map(|n| n["type"].as_str())
            .collect();
        for want in ["pid", "network", "ipc", "uts", "mount"] {
            assert!(ns.contains(&want), "{want} namespace missing: {ns:?}");
        }
        assert!(
            j["linux"]["namespaces"]
                .as_array()
                .expect("ns")
                .iter()
                .all(|n| n.get("path").is_none()),
            "all namespaces are new"
        );
        assert_eq!(j["linux"]["resources"]["memory"]["limit"], 512 << 20);
        assert_eq!(j["linux"]["resources"]["pids"]["limit"], 64);
        assert_eq!(j["linux"]["resources"]["cpu"]["quota"], 100_000);
        assert_eq!(j["linux"]["seccomp"]["defaultAction"], "SCMP_ACT_ERRNO");
        // the precompiled program travels beside the OCI section (crun reads it, runc ignores it)
        assert_eq!(j["annotations"][crate::seccomp_bpf::CRUN_BPF_ANNOTATION], "AAAA");
        assert!(j["linux"]["maskedPaths"]
            .as_array()
            .expect("masked")
            .iter()
            .any(|p| p == "/proc/kcore"));
        assert_eq!(j["linux"]["cgroupsPath"], "/hutch/t1");
    }

    #[test]
    fn workspace_and_tmp_are_sized_tmpfs_and_host_binds_are_read_only() {
        let j = spec_json();
        let mounts = j["mounts"].as_array().expect("mounts");
        let find = |d: &str| {
            mounts.iter().find(|m| m["destination"] == d).unwrap_or_else(|| panic!("mount {d}"))
        };
        let ws = find("/workspace");
        assert_eq!(ws["type"], "tmpfs");
        let opts: Vec<&str> =
            ws["options"].as_array().expect("opts").iter().filter_map(|o| o.as_str()).collect();
        assert!(opts.contains(&"size=262144k") && opts.contains(&"uid=1000"), "{opts:?}");
        assert_eq!(find("/tmp")["type"], "tmpfs");
        for d in ["/usr", "/etc", GUEST_AGENT_PATH] {
            let o: Vec<&str> = find(d)["options"]
                .as_array()
                .expect("opts")
                .iter()
                .filter_map(|o| o.as_str())
                .collect();
            assert!(o.contains(&"ro"), "{d} must be read-only: {o:?}");
        }
        assert_eq!(j["process"]["args"][0], GUEST_AGENT_PATH);
    }
}
