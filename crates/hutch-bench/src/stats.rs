//! Summaries of latency samples (milliseconds).
use serde::Serialize;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub median: f64,
    pub p90: f64,
    pub p95: f64,
    pub p99: f64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
}

/// Nearest-rank percentile (`idx = ceil(p/100 * n) - 1`), as the seed benchmarks use.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[idx.saturating_sub(1).min(sorted.len() - 1)]
}

pub fn summarize(samples: &[f64]) -> Summary {
    let mut s: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    let median = if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    };
    Summary {
        n,
        median,
        p90: percentile(&s, 90.0),
        p95: percentile(&s, 95.0),
        p99: percentile(&s, 99.0),
        mean: if n == 0 { f64::NAN } else { s.iter().sum::<f64>() / n as f64 },
        min: s.first().copied().unwrap_or(f64::NAN),
        max: s.last().copied().unwrap_or(f64::NAN),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_nearest_rank_percentiles() {
        let s = summarize(&[5.0, 1.0, 3.0, 2.0, 4.0]);
        assert_eq!((s.n, s.median, s.min, s.max, s.mean), (5, 3.0, 1.0, 5.0, 3.0));
        assert_eq!(s.p90, 5.0);
        let even = summarize(&[1.0, 2.0, 3.0, 10.0]);
        assert_eq!(even.median, 2.5);
        let hundred: Vec<f64> = (1..=100).map(f64::from).collect();
        let h = summarize(&hundred);
        assert_eq!((h.p90, h.p95, h.p99), (90.0, 95.0, 99.0));
        assert!(summarize(&[]).median.is_nan());
    }
}
