//! The machine a result came from: committed with every result file.
use serde_json::{json, Value};

fn read(p: &str) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// The 1, 5 and 15 minute load averages.
pub fn load_average() -> String {
    read("/proc/loadavg").split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

pub fn machine() -> Value {
    let cpuinfo = read("/proc/cpuinfo");
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string());
    let meminfo = read("/proc/meminfo");
    let mem = |k: &str| {
        meminfo
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
    };
    let git = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    json!({
        "cpu": cpu,
        "cores": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "mem_total_kib": mem("MemTotal:"),
        "mem_available_kib": mem("MemAvailable:"),
        "kernel": read("/proc/sys/kernel/osrelease").trim(),
        "os": read("/etc/os-release").lines().find_map(|l| l.strip_prefix("PRETTY_NAME=")).map(|s| s.trim_matches('"').to_string()),
        "load_average": load_average(),
        "cgroups": hutch_backend_container::CgroupLayout::detect().describe(),
        // 1 makes every RCU grace period expedited; a cold container start waits for one when
        // its process moves into the sandbox's cgroups (docs/benchmarks/README.md)
        "rcu_expedited": read("/sys/kernel/rcu_expedited").trim(),
        "hutch": env!("CARGO_PKG_VERSION"),
        "git_commit": git,
        "engines": crate::peers::engine_versions(),
        "taken_at_unix": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
    })
}
