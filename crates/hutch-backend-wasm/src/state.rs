//! What a wasmtime `Store` holds for one guest run: the WASI context and the memory limiter.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use wasmtime::ResourceLimiter;
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::{ResourceTable, WasiCtx, WasiCtxView, WasiView};

/// Tables may grow this far (CPython's function table has tens of thousands of entries).
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

/// Caps the sum of all linear memories of all the runs of one sandbox and remembers that it
/// refused a growth, so that a guest that failed after being refused memory is reported as out
/// of memory. What a run committed is given back when its store is dropped.
#[derive(Debug)]
pub struct MemoryLimiter {
    sandbox_used: Arc<AtomicU64>,
    limit: u64,
    mine: u64,
    pub refused: bool,
}

impl MemoryLimiter {
    pub fn new(sandbox_used: Arc<AtomicU64>, limit: u64) -> Self {
        Self { sandbox_used, limit, mine: 0, refused: false }
    }
}

impl Drop for MemoryLimiter {
    fn drop(&mut self) {
        self.sandbox_used.fetch_sub(self.mine, Ordering::AcqRel);
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let delta = desired.saturating_sub(current) as u64;
        let limit = self.limit;
        let grown = self.sandbox_used.fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
            used.checked_add(delta).filter(|&total| total <= limit)
        });
        if grown.is_err() {
            self.refused = true;
            return Ok(false);
        }
        self.mine += delta;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

/// Store data of a core module (WASI preview 1).
pub struct P1State {
    pub wasi: WasiP1Ctx,
    pub limiter: MemoryLimiter,
}

/// Store data of a component (WASI preview 2).
pub struct P2State {
    pub ctx: WasiCtx,
    pub table: ResourceTable,
    pub limiter: MemoryLimiter,
}

impl WasiView for P2State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.ctx, table: &mut self.table }
    }
}
