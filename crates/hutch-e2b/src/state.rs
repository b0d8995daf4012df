//! The E2B API's shared state and the one-port router that splits the two planes.
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use axum::extract::Request;
use axum::Router;
use hutch_server::Daemon;
use tower::ServiceExt;

use crate::filesystem::Watchers;

/// What the E2B API keeps besides the daemon: filesystem watchers and each sandbox's default
/// code contexts (per language).
pub struct E2b {
    pub daemon: Arc<Daemon>,
    pub watchers: Watchers,
    /// (hutch sandbox id, language) -> context id used when `/execute` names no context.
    pub default_contexts: Mutex<HashMap<(String, String), String>>,
    /// Sandboxes held in use (see [`E2b::hold`]).
    held: Mutex<HashSet<String>>,
}

impl E2b {
    pub fn new(daemon: Arc<Daemon>) -> Arc<Self> {
        Arc::new(Self {
            daemon,
            watchers: Watchers::default(),
            default_contexts: Mutex::new(HashMap::new()),
            held: Mutex::new(HashSet::new()),
        })
    }

    /// An E2B sandbox lives until its timeout whatever it does, so it counts as in use (one
    /// command in flight, for the daemon) from create, or its first connect after a daemon
    /// restart, until it is killed or expires: the daemon's idle sweep and eviction leave it be.
    pub fn hold(&self, live: &hutch_server::live::LiveSandbox) {
        let new = self.held.lock().unwrap_or_else(|p| p.into_inner()).insert(live.id.clone());
        if new {
            self.daemon.command_started(live);
            self.prune();
        }
    }

    /// Forgets the sandboxes that stopped without a kill (expired, deleted through hutch's API).
    fn prune(&self) {
        let held: Vec<String> =
            self.held.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned().collect();
        for id in held {
            let live = matches!(self.daemon.store.get(&id), Ok(Some(r)) if r.state != hutch_store::SandboxState::Stopped);
            if !live {
                self.forget(&id);
            }
        }
    }

    /// Forgets a sandbox that is gone.
    pub fn forget(&self, id: &str) {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).remove(id);
        self.watchers.forget_sandbox(id);
        crate::interpreter::forget_sandbox(self, id);
    }
}

/// The E2B-compatible API on one port: requests that carry `E2b-Sandbox-Id` go to that
/// sandbox's envd or code interpreter, the rest to the REST control plane.
pub fn router(daemon: Arc<Daemon>) -> Router {
    let state = E2b::new(daemon);
    let rest = crate::rest::router(state.clone());
    let plane = crate::plane::router(state);
    Router::new().fallback_service(tower::service_fn(move |req: Request| {
        let (rest, plane) = (rest.clone(), plane.clone());
        async move {
            if req.headers().contains_key(crate::plane::SANDBOX_ID)
                || crate::plane::is_signed_file_request(&req)
            {
                plane.oneshot(req).await
            } else {
                rest.oneshot(req).await
            }
        }
    }))
}
