//! cgroup layout detection and the few things hutch does to cgroups itself (the OCI runtime
//! creates the sandbox cgroups and enforces the limits): reading OOM kills, removing leftovers.
use std::path::{Path, PathBuf};

/// How this host mounts cgroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CgroupLayout {
    /// Only cgroup v1 hierarchies.
    V1 { root: PathBuf },
    /// Pure cgroup v2 (the unified hierarchy at the root).
    V2 { root: PathBuf },
    /// v1 hierarchies plus a cgroup2 mount elsewhere (systemd "hybrid"): crun refuses this unless
    /// the v2 mount is hidden in a private mount namespace.
    Hybrid { root: PathBuf, unified: PathBuf },
    /// No usable cgroup mount.
    None,
}

/// Parses `/proc/self/mountinfo` text.
pub fn layout_from_mountinfo(mountinfo: &str) -> CgroupLayout {
    let mut v1: Vec<PathBuf> = Vec::new();
    let mut v2: Vec<PathBuf> = Vec::new();
    for line in mountinfo.lines() {
        // ... mount_point ... - fstype source options
        let Some((pre, post)) = line.split_once(" - ") else { continue };
        let Some(mp) = pre.split_whitespace().nth(4) else { continue };
        match post.split_whitespace().next() {
            Some("cgroup") => v1.push(PathBuf::from(mp)),
            Some("cgroup2") => v2.push(PathBuf::from(mp)),
            _ => {}
        }
    }
    let root_of = |p: &Path| {
        p.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("/sys/fs/cgroup"))
    };
    match (v1.first(), v2.first()) {
        (Some(a), Some(u)) => CgroupLayout::Hybrid { root: root_of(a), unified: u.clone() },
        (Some(a), None) => CgroupLayout::V1 { root: root_of(a) },
        (None, Some(u)) => CgroupLayout::V2 { root: u.clone() },
        (None, None) => CgroupLayout::None,
    }
}

impl CgroupLayout {
    pub fn detect() -> Self {
        std::fs::read_to_string("/proc/self/mountinfo")
            .map(|s| layout_from_mountinfo(&s))
            .unwrap_or(CgroupLayout::None)
    }

    pub fn describe(&self) -> String {
        match self {
            CgroupLayout::V1 { root } => format!("cgroup v1 at {}", root.display()),
            CgroupLayout::V2 { root } => format!("cgroup v2 at {}", root.display()),
            CgroupLayout::Hybrid { root, unified } => {
                format!(
                    "hybrid: cgroup v1 at {}, cgroup v2 at {}",
                    root.display(),
                    unified.display()
                )
            }
            CgroupLayout::None => "no cgroup filesystem mounted".into(),
        }
    }

    /// Directories where a sandbox cgroup `rel` (e.g. `hutch/abc`) may exist.
    pub fn dirs_for(&self, rel: &str) -> Vec<PathBuf> {
        let rel = rel.trim_start_matches('/');
        match self {
            CgroupLayout::V2 { root } => vec![root.join(rel)],
            CgroupLayout::V1 { root } | CgroupLayout::Hybrid { root, .. } => {
                let mut out = Vec::new();
                if let Ok(rd) = std::fs::read_dir(root) {
                    for e in rd.flatten() {
                        let p = e.path();
                        // v1 controllers are directories; skip the comma-joined symlinks
                        if p.is_dir() && !e.file_type().map(|t| t.is_symlink()).unwrap_or(true) {
                            out.push(p.join(rel));
                        }
                    }
                }
                out
            }
            CgroupLayout::None => Vec::new(),
        }
    }

    /// How many OOM kills the memory cgroup `rel` has recorded.
    pub fn oom_kills(&self, rel: &str) -> Option<u64> {
        let rel = rel.trim_start_matches('/');
        let (file, key) = match self {
            CgroupLayout::V2 { root } => (root.join(rel).join("memory.events"), "oom_kill"),
            CgroupLayout::V1 { root } | CgroupLayout::Hybrid { root, .. } => {
                (root.join("memory").join(rel).join("memory.oom_control"), "oom_kill")
            }
            CgroupLayout::None => return None,
        };
        let text = std::fs::read_to_string(file).ok()?;
        text.lines().find_map(|l| l.strip_prefix(key).and_then(|v| v.trim().parse().ok()))
    }

    /// Removes the cgroup `rel` wherever the runtime left it (runtimes remove the leaf but not
    /// always every controller's copy). Returns the directories that could not be removed.
    pub fn remove(&self, rel: &str) -> Vec<PathBuf> {
        let mut stuck = Vec::new();
        for d in self.dirs_for(rel) {
            if d.exists() && std::fs::remove_dir(&d).is_err() && d.exists() {
                stuck.push(d);
            }
        }
        stuck
    }

    /// Leaf cgroups present under `parent` (e.g. `hutch`), for leak checks.
    pub fn children(&self, parent: &str) -> Vec<PathBuf> {
        self.dirs_for(parent)
            .into_iter()
            .filter_map(|d| std::fs::read_dir(d).ok())
            .flat_map(|rd| {
                rd.flatten().map(|e| e.path()).filter(|p| p.is_dir()).collect::<Vec<_>>()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "\
30 25 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw
33 30 0:29 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,memory
34 30 0:30 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,pids";

    #[test]
    fn detects_hybrid_v1_and_v2() {
        assert_eq!(
            layout_from_mountinfo(HYBRID),
            CgroupLayout::Hybrid {
                root: "/sys/fs/cgroup".into(),
                unified: "/sys/fs/cgroup/unified".into()
            }
        );
        let v2 = "31 1 0:27 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate";
        assert_eq!(layout_from_mountinfo(v2), CgroupLayout::V2 { root: "/sys/fs/cgroup".into() });
        let v1: String =
            HYBRID.lines().filter(|l| !l.contains("cgroup2")).collect::<Vec<_>>().join("\n");
        assert_eq!(layout_from_mountinfo(&v1), CgroupLayout::V1 { root: "/sys/fs/cgroup".into() });
        assert_eq!(layout_from_mountinfo("1 0 0:1 / / rw - ext4 /dev/vda rw"), CgroupLayout::None);
    }

    #[test]
    fn reads_oom_counters_for_v1_and_v2() {
        let dir = tempfile::tempdir().expect("tmp");
        let v1 = CgroupLayout::V1 { root: dir.path().to_path_buf() };
        let m = dir.path().join("memory/hutch/x");
        std::fs::create_dir_all(&m).expect("mkdir");
        std::fs::write(
            m.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n",
        )
        .expect("write");
        assert_eq!(v1.oom_kills("/hutch/x"), Some(3));
        let v2 = CgroupLayout::V2 { root: dir.path().to_path_buf() };
        let c = dir.path().join("hutch/y");
        std::fs::create_dir_all(&c).expect("mkdir");
        std::fs::write(c.join("memory.events"), "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n")
            .expect("write");
        assert_eq!(v2.oom_kills("hutch/y"), Some(1));
        assert_eq!(v2.oom_kills("hutch/none"), None);
    }
}
