use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hutch_core::SandboxError;
use hutch_proto::{
    check_total, decode_frame, encode_frame, ErrorCode, Request, Response, PROTOCOL_VERSION,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;
use tokio::sync::mpsc;

pub(crate) type Routed = (Response, Vec<u8>);

struct Shared {
    writer: tokio::sync::Mutex<OwnedWriteHalf>,
    routes: Mutex<HashMap<u64, mpsc::UnboundedSender<Routed>>>,
    next_id: AtomicU64,
}

/// What the agent said about itself.
#[derive(Debug, Clone)]
pub struct HelloInfo {
    pub protocol: u32,
    pub agent_version: String,
    pub features: Vec<String>,
    /// How long the agent had been running when it answered.
    pub uptime_us: u64,
}

/// A cheap-to-clone handle on one agent connection.
#[derive(Clone)]
pub struct AgentClient {
    shared: Arc<Shared>,
    reader: Arc<tokio::task::JoinHandle<()>>,
    /// Directories file requests are confined to (empty: no confinement).
    within: Arc<Vec<String>>,
}

impl std::fmt::Debug for AgentClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AgentClient")
    }
}

impl Drop for AgentClient {
    fn drop(&mut self) {
        if Arc::strong_count(&self.reader) == 1 {
            self.reader.abort();
        }
    }
}

fn gone(_: impl std::fmt::Debug) -> SandboxError {
    SandboxError::AgentGone
}

impl AgentClient {
    /// Wraps a connected stream, says hello and checks the protocol generation.
    pub async fn connect(
        stream: UnixStream,
        timeout: Duration,
    ) -> Result<(Self, HelloInfo), SandboxError> {
        let (r, w) = stream.into_split();
        let shared = Arc::new(Shared {
            writer: tokio::sync::Mutex::new(w),
            routes: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
        });
        let reader = tokio::spawn(read_loop(r, shared.clone()));
        let client = AgentClient { shared, reader: Arc::new(reader), within: Arc::new(Vec::new()) };
        let hello = async {
            let id = client.next_id();
            let mut rx = client
                .send(
                    Request::Hello {
                        id,
                        protocol: PROTOCOL_VERSION,
                        client: format!("hutch/{}", env!("CARGO_PKG_VERSION")),
                    },
                    &[],
                )
                .await?;
            match rx.recv().await {
                Some((Response::HelloOk { protocol, agent_version, features, uptime_us, .. }, _))
                    if protocol == PROTOCOL_VERSION =>
                {
                    Ok(HelloInfo { protocol, agent_version, features, uptime_us })
                }
                Some((Response::HelloOk { protocol, agent_version, .. }, _)) => Err(SandboxError::AgentNotReady(format!(
                    "agent {agent_version} speaks protocol {protocol}, this host speaks {PROTOCOL_VERSION}; use the agent built with this hutch"
                ))),
                Some((Response::Error { message, .. }, _)) => {
                    Err(SandboxError::AgentNotReady(message))
                }
                Some((other, _)) => {
                    Err(SandboxError::AgentNotReady(format!("unexpected hello answer {other:?}")))
                }
                None => Err(SandboxError::AgentNotReady(
                    "the agent closed the connection during hello".into(),
                )),
            }
        };
        let info = tokio::time::timeout(timeout, hello).await.map_err(|_| {
            SandboxError::AgentNotReady(format!("no hello answer within {timeout:?}"))
        })??;
        Ok((client, info))
    }

    /// A handle whose file requests must resolve inside `roots` (the agent checks, following
    /// symlinks); requests on other handles of the same connection are unaffected.
    pub fn confined(&self, roots: Vec<String>) -> Self {
        Self { shared: self.shared.clone(), reader: self.reader.clone(), within: Arc::new(roots) }
    }

    pub(crate) fn within(&self) -> Vec<String> {
        self.within.as_ref().clone()
    }

    pub fn next_id(&self) -> u64 {
        self.shared.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Registers a route for `req`'s id and sends it. Responses with that id arrive on the receiver.
    pub(crate) async fn send(
        &self,
        req: Request,
        body: &[u8],
    ) -> Result<mpsc::UnboundedReceiver<Routed>, SandboxError> {
        let (tx, rx) = mpsc::unbounded_channel();
        let id = req.id();
        self.routes().insert(id, tx);
        if let Err(e) = self.send_only(&req, body).await {
            self.routes().remove(&id);
            return Err(e);
        }
        Ok(rx)
    }

    /// Sends a frame whose answers (if any) go to an existing route.
    pub(crate) async fn send_only(&self, req: &Request, body: &[u8]) -> Result<(), SandboxError> {
        let buf = encode_frame(req, body).map_err(|e| SandboxError::Agent {
            code: hutch_proto::ErrorCode::InvalidRequest,
            message: e.to_string(),
        })?;
        let mut w = self.shared.writer.lock().await;
        w.write_all(&buf).await.map_err(gone)
    }

    pub(crate) fn forget(&self, id: u64) {
        self.routes().remove(&id);
    }

    fn routes(&self) -> std::sync::MutexGuard<'_, HashMap<u64, mpsc::UnboundedSender<Routed>>> {
        self.shared.routes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One request, one final answer.
    pub async fn call(&self, req: Request, body: &[u8]) -> Result<Routed, SandboxError> {
        let id = req.id();
        let mut rx = self.send(req, body).await?;
        let r = rx.recv().await.ok_or(SandboxError::AgentGone);
        self.forget(id);
        match r? {
            (Response::Error { code, message, .. }, _) => {
                Err(SandboxError::Agent { code, message })
            }
            ok => Ok(ok),
        }
    }

    /// True while the reader task runs (the agent connection is open).
    pub fn is_connected(&self) -> bool {
        !self.reader.is_finished()
    }
}

async fn read_loop(r: OwnedReadHalf, shared: Arc<Shared>) {
    // buffered: frames that arrive together cost one read, not two per frame
    let mut r = tokio::io::BufReader::with_capacity(64 * 1024, r);
    let mut prefix = [0u8; 4];
    loop {
        if r.read_exact(&mut prefix).await.is_err() {
            break;
        }
        let Ok(total) = check_total(prefix) else { break };
        let mut rest = vec![0u8; total];
        if r.read_exact(&mut rest).await.is_err() {
            break;
        }
        // The guest controls these bytes: a frame that does not decode is answered to its
        // sender as an error (when it names one) instead of ending the connection.
        let Ok(frame) = decode_frame::<serde_json::Value>(rest) else { break };
        let id = frame.header.get("id").and_then(serde_json::Value::as_u64).unwrap_or(0);
        let msg = match serde_json::from_value::<Response>(frame.header) {
            Ok(r) => (r, frame.body),
            Err(e) => (
                Response::Error {
                    id,
                    code: ErrorCode::Unknown,
                    message: format!("unsupported answer from the agent: {e}"),
                },
                Vec::new(),
            ),
        };
        let routes = shared.routes.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tx) = routes.get(&id) {
            let _ = tx.send(msg);
        }
    }
    // Dropping every sender wakes all waiters with "agent gone".
    shared.routes.lock().unwrap_or_else(|p| p.into_inner()).clear();
}
