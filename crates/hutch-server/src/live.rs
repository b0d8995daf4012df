//! A sandbox the daemon holds: the backend handle plus what the daemon tracks about it
//! (commands in flight, background processes and their buffered output).
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use hutch_core::{ExecStatus, OutputEvent, Process, ProcessControl, Sandbox};
use serde::Serialize;
use tokio::sync::{broadcast, watch, RwLock};

/// One chunk of a background process's life, as buffered and streamed.
#[derive(Debug, Clone)]
pub enum ProcEvent {
    Stdout(Arc<Vec<u8>>),
    Stderr(Arc<Vec<u8>>),
    Exited(ExecStatus),
    Error(String),
}

/// A command started in the background: it outlives the request that started it.
pub struct BgProcess {
    pub pid: u32,
    pub command: serde_json::Value,
    pub started_at: i64,
    pub control: Arc<dyn ProcessControl>,
    state: Mutex<BgState>,
    pub events: broadcast::Sender<ProcEvent>,
    /// Becomes true once the process has ended and its bookkeeping (the `done` callback of
    /// [`LiveSandbox::adopt_process`]) has run.
    settled: watch::Sender<bool>,
}

struct BgState {
    /// Buffered output, oldest first, at most `limit` bytes per stream (older chunks dropped).
    log: VecDeque<ProcEvent>,
    bytes: [usize; 2],
    dropped: [u64; 2],
    limit: usize,
    exit: Option<ExecStatus>,
    error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProcessInfo {
    pub pid: u32,
    pub command: serde_json::Value,
    pub started_at: i64,
    pub running: bool,
    /// How it ended (as exec results report it), once it has.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Output bytes dropped from the log because it was full (per stream).
    pub stdout_dropped: u64,
    pub stderr_dropped: u64,
}

impl BgProcess {
    pub fn info(&self) -> ProcessInfo {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        ProcessInfo {
            pid: self.pid,
            command: self.command.clone(),
            started_at: self.started_at,
            running: st.exit.is_none() && st.error.is_none(),
            status: st.exit.as_ref().map(crate::api::types::status_json),
            error: st.error.clone(),
            stdout_dropped: st.dropped[0],
            stderr_dropped: st.dropped[1],
        }
    }

    /// Buffered events so far and a live subscription (taken under one lock, so nothing is
    /// missed or seen twice).
    pub fn snapshot_and_subscribe(&self) -> (Vec<ProcEvent>, broadcast::Receiver<ProcEvent>, bool) {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let rx = self.events.subscribe();
        let done = st.exit.is_some() || st.error.is_some();
        (st.log.iter().cloned().collect(), rx, done)
    }

    fn record(&self, ev: ProcEvent) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match &ev {
            ProcEvent::Stdout(d) | ProcEvent::Stderr(d) => {
                let k = usize::from(matches!(ev, ProcEvent::Stderr(_)));
                st.bytes[k] += d.len();
                st.log.push_back(ev.clone());
                while st.bytes[k] > st.limit {
                    let pos = st.log.iter().position(|e| {
                        matches!((k, e), (0, ProcEvent::Stdout(_)) | (1, ProcEvent::Stderr(_)))
                    });
                    let Some(pos) = pos else { break };
                    if let Some(ProcEvent::Stdout(old) | ProcEvent::Stderr(old)) =
                        st.log.remove(pos)
                    {
                        st.bytes[k] -= old.len();
                        st.dropped[k] += old.len() as u64;
                    }
                }
            }
            ProcEvent::Exited(s) => {
                st.exit = Some(s.clone());
                st.log.push_back(ev.clone());
            }
            ProcEvent::Error(e) => {
                st.error = Some(e.clone());
                st.log.push_back(ev.clone());
            }
        }
        let _ = self.events.send(ev);
    }
}

pub struct LiveSandbox {
    pub id: String,
    pub backend: String,
    /// `None` once destroyed. Commands take a read lock only to start; destroy takes the write lock.
    pub sandbox: RwLock<Option<Box<dyn Sandbox>>>,
    /// Commands and background processes in flight (running while > 0, else waiting).
    active: AtomicUsize,
    procs: Mutex<BTreeMap<u32, Arc<BgProcess>>>,
    /// The API key that owns it (mirrors the store, for the hot path).
    owner: Mutex<Option<String>>,
}

impl LiveSandbox {
    pub fn new(id: String, backend: String, sb: Box<dyn Sandbox>) -> Arc<Self> {
        Arc::new(Self {
            id,
            backend,
            sandbox: RwLock::new(Some(sb)),
            active: AtomicUsize::new(0),
            procs: Mutex::new(BTreeMap::new()),
            owner: Mutex::new(None),
        })
    }

    /// Counts a command in; true when the sandbox just became busy.
    pub fn begin(&self) -> bool {
        self.active.fetch_add(1, Ordering::SeqCst) == 0
    }

    /// Counts a command out; true when the sandbox just became idle.
    pub fn end(&self) -> bool {
        self.active.fetch_sub(1, Ordering::SeqCst) == 1
    }

    pub fn busy(&self) -> bool {
        self.active.load(Ordering::SeqCst) > 0
    }

    pub fn owner(&self) -> Option<String> {
        self.owner.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn set_owner(&self, key: Option<String>) {
        *self.owner.lock().unwrap_or_else(|p| p.into_inner()) = key;
    }

    pub fn processes(&self) -> Vec<Arc<BgProcess>> {
        self.procs.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect()
    }

    pub fn process(&self, pid: u32) -> Option<Arc<BgProcess>> {
        self.procs.lock().unwrap_or_else(|p| p.into_inner()).get(&pid).cloned()
    }

    /// Registers a started background process and drives it on a task until it exits; `done`
    /// runs afterwards (the daemon uses it to mark the sandbox idle).
    pub fn adopt_process(
        self: &Arc<Self>,
        mut p: Box<dyn Process>,
        command: serde_json::Value,
        log_limit: usize,
        done: impl FnOnce() + Send + 'static,
    ) -> Arc<BgProcess> {
        let (tx, _) = broadcast::channel(1024);
        let bg = Arc::new(BgProcess {
            pid: p.pid(),
            command,
            started_at: hutch_store::now_ms(),
            control: p.control(),
            state: Mutex::new(BgState {
                log: VecDeque::new(),
                bytes: [0, 0],
                dropped: [0, 0],
                limit: log_limit,
                exit: None,
                error: None,
            }),
            events: tx,
            settled: watch::Sender::new(false),
        });
        {
            let mut procs = self.procs.lock().unwrap_or_else(|p| p.into_inner());
            // Keep finished processes' records bounded.
            if procs.len() >= 256 {
                let finished: Vec<u32> =
                    procs.iter().filter(|(_, b)| !b.info().running).map(|(k, _)| *k).collect();
                for k in finished.into_iter().take(procs.len() - 255) {
                    procs.remove(&k);
                }
            }
            procs.insert(bg.pid, bg.clone());
        }
        let b = bg.clone();
        tokio::spawn(async move {
            loop {
                match p.next_event().await {
                    Ok(OutputEvent::Stdout(d)) => b.record(ProcEvent::Stdout(Arc::new(d))),
                    Ok(OutputEvent::Stderr(d)) => b.record(ProcEvent::Stderr(Arc::new(d))),
                    Ok(OutputEvent::Exited(st)) => {
                        b.record(ProcEvent::Exited(st));
                        break;
                    }
                    Err(e) => {
                        b.record(ProcEvent::Error(e.to_string()));
                        break;
                    }
                }
            }
            done();
            b.settled.send_replace(true);
        });
        bg
    }

    /// Kills every background process (before destroy or reset) and waits, at most `SETTLE`,
    /// until each has ended and its bookkeeping ran, so the sandbox no longer counts as busy.
    pub async fn kill_processes(&self) {
        const SETTLE: std::time::Duration = std::time::Duration::from_secs(5);
        let procs = self.processes();
        for p in &procs {
            if p.info().running {
                let _ = p.control.signal(9).await;
            }
        }
        let settled = async {
            for p in &procs {
                let _ = p.settled.subscribe().wait_for(|done| *done).await;
            }
        };
        let _ = tokio::time::timeout(SETTLE, settled).await;
    }

    pub fn forget_processes(&self) {
        self.procs.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}
