use std::collections::BTreeSet;

/// What hutch could leak on the host: mounts, live processes, and backend resources.
/// Zombies are not counted: a container's processes are reparented to the host's init when the
/// runtime exits, and init reaps them; they hold no resources but a process table entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeakSnapshot {
    pub mounts: usize,
    pub agent_processes: usize,
    pub runtime_processes: usize,
    pub extra: BTreeSet<String>,
}

/// `(comm, state)` of a process from its `/proc/<pid>/stat` line.
fn comm_and_state(stat: &str) -> Option<(&str, char)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let state = stat.get(close + 2..)?.chars().next()?;
    Some((stat.get(open + 1..close)?, state))
}

fn count_live_processes(names: &[&str]) -> usize {
    let Ok(rd) = std::fs::read_dir("/proc") else { return 0 };
    rd.flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit())))
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|stat| match comm_and_state(stat) {
            Some((comm, state)) => !matches!(state, 'Z' | 'X') && names.contains(&comm),
            None => false,
        })
        .count()
}

/// Takes a snapshot; `extra` lists backend-specific resources (e.g. cgroup directories).
pub fn leak_snapshot(extra: impl IntoIterator<Item = String>) -> LeakSnapshot {
    LeakSnapshot {
        mounts: std::fs::read_to_string("/proc/self/mountinfo")
            .map(|m| m.lines().count())
            .unwrap_or(0),
        agent_processes: count_live_processes(&["hutch-agent", ".hutch-agent"]),
        runtime_processes: count_live_processes(&["crun", "runc", "runsc"]),
        extra: extra.into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_lines_with_odd_names() {
        assert_eq!(comm_and_state("12 (.hutch-agent) Z 1 0"), Some((".hutch-agent", 'Z')));
        assert_eq!(comm_and_state("7 (a) b) S 1 0"), Some(("a) b", 'S')));
        assert_eq!(comm_and_state("garbage"), None);
    }
}
