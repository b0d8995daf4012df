//! The E2B API's shared state and the one-port router that splits the two planes.
use std::collections::HashMap;
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
}

impl E2b {
    pub fn new(daemon: Arc<Daemon>) -> Arc<Self> {
        Arc::new(Self {
            daemon,
            watchers: Watchers::default(),
            default_contexts: Mutex::new(HashMap::new()),
        })
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
