//! Prometheus metrics in the text exposition format, kept with atomics (no registry crate).
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Latency histogram with fixed buckets (seconds).
pub struct Histogram {
    bounds: &'static [f64],
    counts: Vec<AtomicU64>,
    sum_us: AtomicU64,
    count: AtomicU64,
}

const LATENCY_BUCKETS: &[f64] =
    &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];

impl Histogram {
    fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            counts: bounds.iter().map(|_| AtomicU64::new(0)).collect(),
            sum_us: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }

    pub fn observe(&self, d: Duration) {
        let s = d.as_secs_f64();
        for (i, b) in self.bounds.iter().enumerate() {
            if s <= *b {
                self.counts[i].fetch_add(1, Ordering::Relaxed);
            }
        }
        self.sum_us.fetch_add(d.as_micros() as u64, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (i, b) in self.bounds.iter().enumerate() {
            let _ = writeln!(
                out,
                "{name}_bucket{{le=\"{b}\"}} {}",
                self.counts[i].load(Ordering::Relaxed)
            );
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(out, "{name}_sum {}", self.sum_us.load(Ordering::Relaxed) as f64 / 1e6);
        let _ = writeln!(out, "{name}_count {count}");
    }
}

pub struct Metrics {
    pub create_seconds: Histogram,
    pub exec_seconds: Histogram,
    pub acquire_seconds: Histogram,
    errors: Mutex<BTreeMap<&'static str, u64>>,
    http: Mutex<BTreeMap<u16, u64>>,
    pool_hits: Mutex<BTreeMap<String, u64>>,
    pool_misses: Mutex<BTreeMap<String, u64>>,
    pub evictions: AtomicU64,
}

pub fn global() -> &'static Metrics {
    static M: OnceLock<Metrics> = OnceLock::new();
    M.get_or_init(|| Metrics {
        create_seconds: Histogram::new(LATENCY_BUCKETS),
        exec_seconds: Histogram::new(LATENCY_BUCKETS),
        acquire_seconds: Histogram::new(LATENCY_BUCKETS),
        errors: Mutex::new(BTreeMap::new()),
        http: Mutex::new(BTreeMap::new()),
        pool_hits: Mutex::new(BTreeMap::new()),
        pool_misses: Mutex::new(BTreeMap::new()),
        evictions: AtomicU64::new(0),
    })
}

fn bump<K: Ord>(m: &Mutex<BTreeMap<K, u64>>, k: K) {
    *m.lock().unwrap_or_else(|p| p.into_inner()).entry(k).or_insert(0) += 1;
}

impl Metrics {
    pub fn error(&self, code: &'static str) {
        bump(&self.errors, code);
    }
    pub fn http(&self, status: u16) {
        bump(&self.http, status);
    }
    pub fn pool_hit(&self, pool: &str) {
        bump(&self.pool_hits, pool.to_string());
    }
    pub fn pool_miss(&self, pool: &str) {
        bump(&self.pool_misses, pool.to_string());
    }
    pub fn pool_counts(&self, pool: &str) -> (u64, u64) {
        let get = |m: &Mutex<BTreeMap<String, u64>>| {
            m.lock().unwrap_or_else(|p| p.into_inner()).get(pool).copied().unwrap_or(0)
        };
        (get(&self.pool_hits), get(&self.pool_misses))
    }

    /// The exposition text; `states` and `capacity` come from the store at scrape time.
    pub fn render(&self, states: &BTreeMap<String, usize>, capacity: usize) -> String {
        let mut out = String::with_capacity(4096);
        let _ = writeln!(
            out,
            "# HELP hutch_sandboxes Sandboxes by state.\n# TYPE hutch_sandboxes gauge"
        );
        for (s, n) in states {
            let _ = writeln!(out, "hutch_sandboxes{{state=\"{s}\"}} {n}");
        }
        let _ = writeln!(out, "# HELP hutch_capacity Most live sandboxes allowed.\n# TYPE hutch_capacity gauge\nhutch_capacity {capacity}");
        let counter =
            |out: &mut String, name: &str, help: &str, label: &str, m: &BTreeMap<String, u64>| {
                let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
                for (k, v) in m {
                    let _ = writeln!(out, "{name}{{{label}=\"{k}\"}} {v}");
                }
            };
        let hits = self.pool_hits.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let misses = self.pool_misses.lock().unwrap_or_else(|p| p.into_inner()).clone();
        counter(
            &mut out,
            "hutch_pool_hits_total",
            "Sandboxes handed out warm from a pool.",
            "pool",
            &hits,
        );
        counter(
            &mut out,
            "hutch_pool_misses_total",
            "Pool requests that had to start a sandbox cold.",
            "pool",
            &misses,
        );
        let errors: BTreeMap<String, u64> = self
            .errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect();
        counter(&mut out, "hutch_errors_total", "API errors by code.", "code", &errors);
        let http: BTreeMap<String, u64> = self
            .http
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect();
        counter(
            &mut out,
            "hutch_http_responses_total",
            "HTTP responses by status.",
            "status",
            &http,
        );
        let _ = writeln!(
            out,
            "# HELP hutch_evictions_total Sandboxes evicted to make room.\n# TYPE hutch_evictions_total counter\nhutch_evictions_total {}",
            self.evictions.load(Ordering::Relaxed)
        );
        self.create_seconds.render(
            &mut out,
            "hutch_sandbox_create_seconds",
            "Time to create and start a sandbox (cold).",
        );
        self.acquire_seconds.render(
            &mut out,
            "hutch_sandbox_acquire_seconds",
            "Time to hand out a sandbox, warm or cold.",
        );
        self.exec_seconds.render(&mut out, "hutch_exec_seconds", "Time of blocking execs.");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let h = Histogram::new(LATENCY_BUCKETS);
        h.observe(Duration::from_micros(700));
        h.observe(Duration::from_millis(3));
        let mut s = String::new();
        h.render(&mut s, "x", "y");
        assert!(s.contains("x_bucket{le=\"0.0005\"} 0"));
        assert!(s.contains("x_bucket{le=\"0.001\"} 1"));
        assert!(s.contains("x_bucket{le=\"0.005\"} 2"));
        assert!(s.contains("x_count 2"));
    }
}
