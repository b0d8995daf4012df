//! The gateway's workloads, as one pure function so that every isolation variant runs the very
//! same code: in-process (native), as a process per request, and as a WebAssembly instance per
//! request (this crate built for `wasm32-wasip1`).
//!
//! - `hello`: a fixed greeting.
//! - `compute`: a SHA-256 chain of `iters` rounds (each round hashes the previous digest); the
//!   hash is written here in plain Rust so native and WebAssembly run identical code (no
//!   CPU-specific SHA instructions on one side only).
//! - `state`: renders the value of the gateway's shared counter, which the host increments.
//! - `proxy`: wraps the upstream's response body, which the host fetched (guests have no network).
#![forbid(unsafe_code)]

mod sha256;

pub use sha256::sha256;

/// Rounds of `compute` when the query does not say.
pub const DEFAULT_ITERS: u64 = 20_000;
/// The most rounds a request may ask for.
pub const MAX_ITERS: u64 = 10_000_000;

/// One request as the host hands it over.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request<'a> {
    pub workload: &'a str,
    /// `iters` for compute.
    pub iters: u64,
    /// The counter value for state.
    pub counter: u64,
    /// The upstream body for proxy.
    pub upstream: &'a [u8],
}

/// The response body, or an error message for a 400.
pub fn handle(req: &Request<'_>) -> Result<Vec<u8>, String> {
    match req.workload {
        "hello" => Ok(b"Hello, World!\n".to_vec()),
        "compute" => {
            if req.iters == 0 || req.iters > MAX_ITERS {
                return Err(format!("iters must be 1..={MAX_ITERS}"));
            }
            let mut d = sha256(b"hutch");
            for _ in 1..req.iters {
                d = sha256(&d);
            }
            let hex: String = d.iter().map(|b| format!("{b:02x}")).collect();
            Ok(format!("{hex}\n").into_bytes())
        }
        "state" => Ok(format!("counter={}\n", req.counter).into_bytes()),
        "proxy" => {
            let mut out = format!("upstream {} bytes: ", req.upstream.len()).into_bytes();
            out.extend_from_slice(req.upstream);
            Ok(out)
        }
        other => Err(format!("unknown workload {other:?}: hello, compute, state or proxy")),
    }
}

/// Parses `iters=N` out of a query string.
pub fn iters_from_query(query: &str) -> Result<u64, String> {
    for pair in query.split('&') {
        if let Some(v) = pair.strip_prefix("iters=") {
            return v.parse().map_err(|_| format!("iters={v:?} is not a number"));
        }
    }
    Ok(DEFAULT_ITERS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workloads_answer() {
        let r = |w| Request { workload: w, iters: 1, counter: 7, upstream: b"up" };
        assert_eq!(handle(&r("hello")).unwrap(), b"Hello, World!\n");
        assert_eq!(handle(&r("state")).unwrap(), b"counter=7\n");
        assert_eq!(handle(&r("proxy")).unwrap(), b"upstream 2 bytes: up");
        // one round is plain SHA-256 of "hutch"
        let want = sha256(b"hutch").iter().map(|b| format!("{b:02x}")).collect::<String>();
        assert_eq!(handle(&r("compute")).unwrap(), format!("{want}\n").into_bytes());
        assert!(handle(&r("nope")).is_err());
        assert!(handle(&Request { workload: "compute", iters: 0, ..r("compute") }).is_err());
    }

    #[test]
    fn query_parsing() {
        assert_eq!(iters_from_query("iters=5").unwrap(), 5);
        assert_eq!(iters_from_query("a=1&iters=9").unwrap(), 9);
        assert_eq!(iters_from_query("").unwrap(), DEFAULT_ITERS);
        assert!(iters_from_query("iters=x").is_err());
    }
}
