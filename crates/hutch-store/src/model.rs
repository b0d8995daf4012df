//! The rows the store holds and the sandbox state machine.
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::ParseStateError;
use crate::keys::hash_key;

/// Where a sandbox is in its life. Stored as the lowercase name (`as_str`).
///
/// ```text
///  cold ──> warming ──> warm ──> running <──> waiting
///              │          │                      ^
///              │          └──────────────────────┤
///              └─────────────────────────────────┘
///  any state but stopped ──> stopped (terminal)
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxState {
    /// Recorded (and possibly prepared on the host) but not started: nothing runs. Cheapest to
    /// evict.
    Cold,
    /// Booting: the engine is starting it and the agent has not said hello yet.
    Warming,
    /// Booted and idle in a pool, not yet handed to a client.
    Warm,
    /// Executing a client's command.
    Running,
    /// Handed to a client and idle between commands.
    Waiting,
    /// Gone or going: its resources are (being) destroyed. Terminal.
    Stopped,
}

impl SandboxState {
    /// Every state, in declaration order.
    pub const ALL: [SandboxState; 6] = [
        SandboxState::Cold,
        SandboxState::Warming,
        SandboxState::Warm,
        SandboxState::Running,
        SandboxState::Waiting,
        SandboxState::Stopped,
    ];

    /// Every state except `Stopped`.
    pub const LIVE: [SandboxState; 5] = [
        SandboxState::Cold,
        SandboxState::Warming,
        SandboxState::Warm,
        SandboxState::Running,
        SandboxState::Waiting,
    ];

    /// The name stored in the database and used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxState::Cold => "cold",
            SandboxState::Warming => "warming",
            SandboxState::Warm => "warm",
            SandboxState::Running => "running",
            SandboxState::Waiting => "waiting",
            SandboxState::Stopped => "stopped",
        }
    }

    /// Whether the sandbox still exists (anything but `Stopped`).
    pub fn is_live(self) -> bool {
        self != SandboxState::Stopped
    }

    /// The states a sandbox may enter `self` from. This is the whole state machine; the SQL
    /// guards in the store follow it, and a test checks every pair against the database.
    pub fn allowed_from(self) -> &'static [SandboxState] {
        use SandboxState::*;
        match self {
            Cold => &[],
            Warming => &[Cold],
            // waiting -> warm: a recycled sandbox, reset and verified clean, back in its pool
            Warm => &[Warming, Waiting],
            Running => &[Warm, Waiting],
            Waiting => &[Warming, Warm, Running],
            Stopped => &[Cold, Warming, Warm, Running, Waiting],
        }
    }

    /// Whether `from -> to` is an allowed transition.
    pub fn can_transition(from: SandboxState, to: SandboxState) -> bool {
        to.allowed_from().contains(&from)
    }
}

impl fmt::Display for SandboxState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SandboxState {
    type Err = ParseStateError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SandboxState::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| ParseStateError(s.to_owned()))
    }
}

/// One sandbox as the store records it. Times are unix milliseconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxRow {
    pub id: String,
    pub state: SandboxState,
    /// The pool it belongs to, if it was made for one.
    pub pool: Option<String>,
    /// The backend that runs it (`container`, `process`, ...).
    pub backend: String,
    /// The `SandboxSpec` it was created from, as JSON. Opaque to the store.
    pub spec_json: String,
    /// Free-form labels set by the client; [`ListFilter::metadata`] matches on them.
    pub metadata: BTreeMap<String, String>,
    /// Id of the API key that owns it.
    pub owner_key: Option<String>,
    pub created_at: i64,
    /// Last activity: creation, a state change or a [`touch`](crate::Store::touch).
    pub last_used_at: i64,
    /// When it should be stopped regardless of activity.
    pub expires_at: Option<i64>,
    pub stopped_at: Option<i64>,
    /// Why it stopped (`evicted`, `idle`, or what the caller passed to `mark_stopped`).
    pub stop_reason: Option<String>,
}

impl SandboxRow {
    /// A row with no pool, owner, metadata or expiry, created and last used at `now`.
    pub fn new(
        id: impl Into<String>,
        state: SandboxState,
        backend: impl Into<String>,
        spec_json: impl Into<String>,
        now: i64,
    ) -> Self {
        SandboxRow {
            id: id.into(),
            state,
            pool: None,
            backend: backend.into(),
            spec_json: spec_json.into(),
            metadata: BTreeMap::new(),
            owner_key: None,
            created_at: now,
            last_used_at: now,
            expires_at: None,
            stopped_at: None,
            stop_reason: None,
        }
    }
}

/// What [`Store::list`](crate::Store::list) returns. Every field that is set must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListFilter {
    pub state: Option<SandboxState>,
    pub pool: Option<String>,
    pub backend: Option<String>,
    pub owner_key: Option<String>,
    /// Every pair must be present in the row's metadata with the same value.
    pub metadata: BTreeMap<String, String>,
    /// Include stopped rows. Ignored when `state` is set (asking for `Stopped` gets them).
    pub include_stopped: bool,
    /// At most this many rows (oldest `created_at` first).
    pub limit: Option<usize>,
}

/// A summary of the store for status pages and metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Sandboxes not stopped.
    pub total_live: usize,
    /// Rows per state; every state is present, zero or not (stopped rows until deleted).
    pub by_state: BTreeMap<SandboxState, usize>,
    /// Live rows per pool and state: each pool with a live member, with all five live states.
    pub by_pool: BTreeMap<String, BTreeMap<SandboxState, usize>>,
}

/// An API key. The secret itself is never stored: only its SHA-256 ([`hash_key`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyRow {
    pub id: String,
    pub name: String,
    /// Hex SHA-256 of the secret. Never serialized, so a key listing cannot leak it.
    #[serde(skip_serializing)]
    pub hash: String,
    /// May manage keys and pools and see every sandbox.
    pub admin: bool,
    /// At most this many live sandboxes owned at once.
    pub max_sandboxes: Option<u32>,
    /// At most this many requests per minute.
    pub rate_per_minute: Option<u32>,
    pub created_at: i64,
    pub revoked_at: Option<i64>,
}

impl KeyRow {
    /// A non-admin key without limits for `secret` (hashed here; the secret is not kept).
    pub fn new(id: impl Into<String>, name: impl Into<String>, secret: &str, now: i64) -> Self {
        KeyRow {
            id: id.into(),
            name: name.into(),
            hash: hash_key(secret),
            admin: false,
            max_sandboxes: None,
            rate_per_minute: None,
            created_at: now,
            revoked_at: None,
        }
    }
}

/// One audit log entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AuditRow {
    /// Increases with every entry, never reused.
    pub seq: i64,
    pub at: i64,
    pub key_id: Option<String>,
    pub action: String,
    pub sandbox_id: Option<String>,
    pub detail: serde_json::Value,
}

/// The current time in unix milliseconds, the unit of every time in the store.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_names_round_trip() {
        for s in SandboxState::ALL {
            assert_eq!(s.as_str().parse::<SandboxState>(), Ok(s));
            assert_eq!(serde_json::to_value(s).ok(), Some(serde_json::json!(s.as_str())));
            assert_eq!(s.to_string(), s.as_str());
        }
        assert!("Warm".parse::<SandboxState>().is_err());
        assert!("".parse::<SandboxState>().is_err());
    }

    /// The state machine as the design states it, written out pair by pair.
    #[test]
    fn transitions_are_exactly_the_designed_ones() {
        use SandboxState::*;
        let designed = [
            (Cold, Warming),
            (Warming, Warm),
            (Waiting, Warm),
            (Warming, Waiting),
            (Warm, Running),
            (Warm, Waiting),
            (Running, Waiting),
            (Waiting, Running),
            (Cold, Stopped),
            (Warming, Stopped),
            (Warm, Stopped),
            (Running, Stopped),
            (Waiting, Stopped),
        ];
        for from in SandboxState::ALL {
            for to in SandboxState::ALL {
                assert_eq!(
                    SandboxState::can_transition(from, to),
                    designed.contains(&(from, to)),
                    "{from} -> {to}"
                );
            }
        }
    }

    #[test]
    fn key_rows_never_serialize_the_hash() {
        let k = KeyRow::new("k1", "ci", "s3cret", 1);
        let j = serde_json::to_value(&k).unwrap_or_default();
        assert!(j.get("hash").is_none());
        assert_eq!(j["id"], "k1");
        assert!(!j.to_string().contains(&k.hash));
    }

    #[test]
    fn stats_serialize_states_as_keys() {
        let mut s = Stats::default();
        s.by_state.insert(SandboxState::Warm, 2);
        let j = serde_json::to_value(&s).unwrap_or_default();
        assert_eq!(j["by_state"]["warm"], 2);
    }
}
