//! Warm pools: sandboxes of one shape kept started so a request gets one in milliseconds.
use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use crate::api::types::SandboxShape;

/// What happens to a pool sandbox when its user deletes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Reuse {
    /// Destroy it; the pool starts a new one.
    #[default]
    Fresh,
    /// Kill its processes, wipe its workspace, /tmp and shared memory, check that it is clean,
    /// and put it back warm. Faster; a sandbox that does not come back clean is destroyed.
    Recycle,
}

/// A pool's definition (stored as JSON in the pools table).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolConfig {
    pub name: String,
    /// The shape of every member.
    #[serde(default)]
    pub template: SandboxShape,
    /// Warm sandboxes to keep ready.
    pub size: usize,
    /// Sandboxes of this pool (warm and in use) at most; default: no limit but the daemon's.
    #[serde(default)]
    pub max: Option<usize>,
    #[serde(default)]
    pub reuse: Reuse,
}

impl PoolConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.name.is_empty()
            || self.name.len() > 64
            || !self.name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(format!("pool name {:?}: use 1-64 letters, digits, '-' or '_'", self.name));
        }
        if let Some(m) = self.max {
            if m < self.size {
                return Err(format!(
                    "pool {}: max ({m}) is smaller than size ({})",
                    self.name, self.size
                ));
            }
        }
        if self.size > 1000 {
            return Err(format!("pool {}: size {} is more than 1000", self.name, self.size));
        }
        Ok(())
    }
}

/// A pool while the daemon runs.
pub struct PoolRuntime {
    pub config: PoolConfig,
    /// Wakes the replenisher (a member was taken, released or destroyed).
    pub wake: Notify,
    pub stop: Notify,
}

impl PoolRuntime {
    pub fn new(config: PoolConfig) -> Arc<Self> {
        Arc::new(Self { config, wake: Notify::new(), stop: Notify::new() })
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct PoolStatus {
    #[serde(flatten)]
    pub config: PoolConfig,
    pub members: BTreeMap<String, usize>,
    pub hits: u64,
    pub misses: u64,
}
