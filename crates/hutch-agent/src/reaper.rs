//! Zombie reaper. As PID 1 the agent inherits every orphan, so one thread waits for *any* child
//! and hands the statuses of the commands it started to whoever registered for them.
use std::collections::HashMap;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Duration;

#[derive(Default)]
struct Table {
    waiting: HashMap<i32, Sender<libc::c_int>>,
    /// Statuses that arrived before anyone registered (the command exited very fast).
    early: HashMap<i32, libc::c_int>,
    /// Pids whose status nobody wants (exec failed after fork).
    discard: Vec<i32>,
}

struct Reaper {
    table: Mutex<Table>,
    wake: Condvar,
}

fn reaper() -> &'static Reaper {
    static R: OnceLock<Reaper> = OnceLock::new();
    R.get_or_init(|| Reaper { table: Mutex::new(Table::default()), wake: Condvar::new() })
}

fn lock() -> std::sync::MutexGuard<'static, Table> {
    reaper().table.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn start() {
    std::thread::spawn(|| loop {
        match crate::sys::wait_any() {
            Ok(Some((pid, status))) => {
                let mut t = lock();
                if let Some(pos) = t.discard.iter().position(|&p| p == pid) {
                    t.discard.swap_remove(pos);
                } else if let Some(tx) = t.waiting.remove(&pid) {
                    let _ = tx.send(status);
                } else {
                    // An orphan, or one of ours that has not registered yet.
                    t.early.insert(pid, status);
                    if t.early.len() > 4096 {
                        t.early.clear();
                    }
                }
            }
            Ok(None) | Err(_) => {
                let t = lock();
                // No children: sleep until a spawn says there is one (orphans reparented to us
                // are caught by the timeout).
                let _ = reaper().wake.wait_timeout(t, Duration::from_millis(500));
            }
        }
    });
}

/// Registers interest in `pid`'s exit status. Call right after a successful spawn.
pub fn register(pid: i32) -> Receiver<libc::c_int> {
    let (tx, rx) = channel();
    let mut t = lock();
    if let Some(st) = t.early.remove(&pid) {
        let _ = tx.send(st);
    } else {
        t.waiting.insert(pid, tx);
    }
    reaper().wake.notify_all();
    rx
}

/// The exec of `pid` failed: drop its status when it comes.
pub fn discard(pid: i32) {
    let mut t = lock();
    if t.early.remove(&pid).is_none() {
        t.discard.push(pid);
    }
    reaper().wake.notify_all();
}
