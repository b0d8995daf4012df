//! Lifecycle phase timings. Every sandbox records how long each phase took; the CLI prints them
//! with `--timings` and `--json`, the benchmarks aggregate them.
use std::time::{Duration, Instant};

use serde::{Serialize, Serializer};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Host-side preparation: bundle, config, directories.
    Prepare,
    /// The isolation engine creating and starting the sandbox.
    RuntimeCreate,
    /// From engine start to the guest agent answering its hello.
    AgentReady,
    /// Running commands (summed over all execs).
    Exec,
    /// Tearing everything down.
    Destroy,
}

impl Phase {
    pub const ALL: [Phase; 5] =
        [Phase::Prepare, Phase::RuntimeCreate, Phase::AgentReady, Phase::Exec, Phase::Destroy];

    pub fn name(self) -> &'static str {
        match self {
            Phase::Prepare => "prepare",
            Phase::RuntimeCreate => "runtime_create",
            Phase::AgentReady => "agent_ready",
            Phase::Exec => "exec",
            Phase::Destroy => "destroy",
        }
    }
}

/// Accumulated duration per phase. Serializes as `{"prepare_ms": 0.41, ...}` (only phases seen).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PhaseTimings {
    spent: [Option<Duration>; 5],
}

impl PhaseTimings {
    pub fn add(&mut self, phase: Phase, d: Duration) {
        let slot = &mut self.spent[phase as usize];
        *slot = Some(slot.unwrap_or_default() + d);
    }

    /// Times `f` and adds it to `phase`.
    pub fn measure<T>(&mut self, phase: Phase, f: impl FnOnce() -> T) -> T {
        let t = Instant::now();
        let r = f();
        self.add(phase, t.elapsed());
        r
    }

    pub fn get(&self, phase: Phase) -> Option<Duration> {
        self.spent[phase as usize]
    }

    pub fn merge(&mut self, other: &PhaseTimings) {
        for p in Phase::ALL {
            if let Some(d) = other.get(p) {
                self.add(p, d);
            }
        }
    }

    pub fn total(&self) -> Duration {
        self.spent.iter().flatten().sum()
    }

    pub fn iter(&self) -> impl Iterator<Item = (Phase, Duration)> + '_ {
        Phase::ALL.into_iter().filter_map(|p| self.get(p).map(|d| (p, d)))
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }

    /// One line, e.g. `prepare 0.4ms, runtime_create 14.2ms, ...`.
    pub fn human(&self) -> String {
        self.iter()
            .map(|(p, d)| format!("{} {:.2}ms", p.name(), d.as_secs_f64() * 1e3))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl Serialize for PhaseTimings {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        for (p, d) in self.iter() {
            m.serialize_entry(&format!("{}_ms", p.name()), &(d.as_secs_f64() * 1e3))?;
        }
        m.serialize_entry("total_ms", &(self.total().as_secs_f64() * 1e3))?;
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accumulates_and_serializes() {
        let mut t = PhaseTimings::default();
        t.add(Phase::Exec, Duration::from_millis(2));
        t.add(Phase::Exec, Duration::from_millis(3));
        t.add(Phase::Prepare, Duration::from_micros(500));
        assert_eq!(t.get(Phase::Exec), Some(Duration::from_millis(5)));
        let j = t.to_json();
        assert_eq!(j["exec_ms"].as_f64(), Some(5.0));
        assert_eq!(j["prepare_ms"].as_f64(), Some(0.5));
        assert!(j.get("destroy_ms").is_none());
        assert_eq!(j["total_ms"].as_f64(), Some(5.5));
    }
}
