//! A guest's stdout and stderr. For an exec, every write is forwarded at once as an
//! [`OutputEvent`] (so the caller sees output as it happens) until the exec's output limit, then
//! cut with the same marker the guest agent uses; bytes past the limit are counted, not kept.
//! For a gateway request, output is collected and a guest that writes past the limit is
//! stopped with a trap.
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use hutch_core::OutputEvent;
use tokio::io::AsyncWrite;
use tokio::sync::mpsc::UnboundedSender;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

#[derive(Debug, Default, Clone, Copy)]
pub struct StreamTotals {
    pub bytes: u64,
    pub truncated: bool,
}

#[derive(Debug)]
enum Sink {
    Channel { tx: UnboundedSender<OutputEvent>, stdout: bool },
    Buffer(Vec<u8>),
}

#[derive(Debug)]
struct Inner {
    sink: Sink,
    limit: u64,
    totals: StreamTotals,
}

/// One output stream of one exec; clones share the count.
#[derive(Debug, Clone)]
pub struct CappedOutput(Arc<Mutex<Inner>>);

impl CappedOutput {
    pub fn new(tx: UnboundedSender<OutputEvent>, stdout: bool, limit: u64) -> Self {
        Self::with(Sink::Channel { tx, stdout }, limit)
    }

    /// Collects up to `limit` bytes; writing more traps the guest.
    pub fn buffer(limit: u64) -> Self {
        Self::with(Sink::Buffer(Vec::new()), limit)
    }

    fn with(sink: Sink, limit: u64) -> Self {
        Self(Arc::new(Mutex::new(Inner { sink, limit, totals: StreamTotals::default() })))
    }

    /// What a buffer collected (empty for a channel).
    pub fn take(&self) -> Vec<u8> {
        match &mut self.lock().sink {
            Sink::Buffer(b) => std::mem::take(b),
            Sink::Channel { .. } => Vec::new(),
        }
    }

    pub fn totals(&self) -> StreamTotals {
        self.lock().totals
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes a write; `false` when a buffer's limit was passed (the guest must be stopped).
    fn push(&self, data: &[u8]) -> bool {
        if data.is_empty() {
            return true;
        }
        let mut guard = self.lock();
        let s = &mut *guard;
        let limit = s.limit;
        if let Sink::Buffer(b) = &mut s.sink {
            s.totals.bytes += data.len() as u64;
            if b.len() as u64 + data.len() as u64 > limit {
                s.totals.truncated = true;
                return false;
            }
            b.extend_from_slice(data);
            return true;
        }
        let before = s.totals.bytes;
        s.totals.bytes += data.len() as u64;
        let room = s.limit.saturating_sub(before) as usize;
        let mut chunk = data[..data.len().min(room)].to_vec();
        if chunk.len() < data.len() && !s.totals.truncated {
            s.totals.truncated = true;
            chunk.extend_from_slice(hutch_proto::TRUNCATION_MARKER.as_bytes());
        }
        if chunk.is_empty() {
            return true;
        }
        if let Sink::Channel { tx, stdout } = &s.sink {
            let ev = if *stdout { OutputEvent::Stdout(chunk) } else { OutputEvent::Stderr(chunk) };
            // The receiver is gone only when nobody waits for the exec any more; the guest may
            // still write until it is stopped, so dropping the chunk is right.
            let _ = tx.send(ev);
        }
        true
    }

    fn overflow(&self) -> StreamError {
        StreamError::trap(&format!("output limit of {} bytes exceeded", self.lock().limit))
    }
}

impl IsTerminal for CappedOutput {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CappedOutput {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[async_trait::async_trait]
impl OutputStream for CappedOutput {
    fn write(&mut self, bytes: bytes::Bytes) -> Result<(), StreamError> {
        if self.push(&bytes) {
            Ok(())
        } else {
            Err(self.overflow())
        }
    }
    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }
    fn check_write(&mut self) -> Result<usize, StreamError> {
        // Never blocks, and takes any write whole (a guest libc may not retry a short write):
        // past the limit bytes are only counted.
        Ok(1 << 30)
    }
}

#[async_trait::async_trait]
impl Pollable for CappedOutput {
    async fn ready(&mut self) {}
}

impl AsyncWrite for CappedOutput {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.push(buf) {
            Poll::Ready(Ok(buf.len()))
        } else {
            Poll::Ready(Err(io::Error::other("output limit exceeded")))
        }
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_past_the_limit_is_counted_and_marked_once() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let o = CappedOutput::new(tx, true, 10);
        o.push(b"0123456");
        o.push(b"789abc");
        o.push(b"def");
        let t = o.totals();
        assert_eq!(t.bytes, 16);
        assert!(t.truncated);
        let mut got = Vec::new();
        while let Ok(OutputEvent::Stdout(d)) = rx.try_recv() {
            got.extend(d);
        }
        let want = format!("0123456789{}", hutch_proto::TRUNCATION_MARKER);
        assert_eq!(String::from_utf8_lossy(&got), want);
    }

    #[test]
    fn a_buffer_refuses_writes_past_its_limit() {
        let o = CappedOutput::buffer(4);
        assert!(o.push(b"abc"));
        assert!(!o.push(b"de"));
        assert!(o.totals().truncated);
        assert_eq!(o.take(), b"abc");
    }
}
