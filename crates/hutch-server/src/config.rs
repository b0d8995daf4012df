//! Daemon settings. The CLI maps flags and environment variables onto this one struct.
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What happens to live sandboxes when the daemon stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum OnShutdown {
    /// Destroy every sandbox (nothing outlives the daemon).
    #[default]
    Destroy,
    /// Leave sandboxes running; the next start adopts them.
    Keep,
}

#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// SQLite database file.
    pub db_path: PathBuf,
    /// Bundles and runtime state (see the container backend).
    pub state_dir: PathBuf,
    /// Live sandboxes at most (all states but stopped, including pool members).
    pub max_sandboxes: usize,
    /// TTL of a sandbox when the request names none; `None`: no expiry.
    pub default_ttl: Option<Duration>,
    /// Longest TTL a request may ask for.
    pub max_ttl: Duration,
    /// A sandbox with no activity for this long is stopped (reason `idle`).
    pub idle_timeout: Duration,
    /// How often expiry and the idle sweep run.
    pub sweep_interval: Duration,
    pub on_shutdown: OnShutdown,
    /// Largest file upload, in bytes.
    pub max_upload: usize,
    /// Largest JSON request body, in bytes.
    pub max_json: usize,
    /// Output kept per stream for a background process (older output is dropped).
    pub process_log_bytes: usize,
    /// Require an API key on every request, also from trusted transports.
    pub require_keys_everywhere: bool,
}

impl ServerConfig {
    pub fn new(state_dir: PathBuf) -> Self {
        Self {
            db_path: state_dir.join("hutch.db"),
            state_dir,
            max_sandboxes: 100,
            default_ttl: Some(Duration::from_secs(300)),
            max_ttl: Duration::from_secs(24 * 3600),
            idle_timeout: Duration::from_secs(30 * 60),
            sweep_interval: Duration::from_secs(1),
            on_shutdown: OnShutdown::Destroy,
            max_upload: 256 * 1024 * 1024,
            max_json: 1024 * 1024,
            process_log_bytes: 1024 * 1024,
            require_keys_everywhere: false,
        }
    }
}
