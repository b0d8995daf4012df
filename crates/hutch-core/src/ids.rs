//! Sandbox ids: `hutch-` and 12 lowercase hex digits, random, checked before they become paths.
use std::sync::atomic::{AtomicU64, Ordering};

pub fn is_sandbox_id(id: &str) -> bool {
    id.strip_prefix("hutch-").is_some_and(|h| {
        h.len() == 12 && h.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    })
}

/// A fresh id from /dev/urandom (mixed with a counter, so two ids of one process never collide
/// even where /dev/urandom cannot be read).
pub fn new_sandbox_id() -> String {
    let mut b = [0u8; 6];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut b);
    }
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed).to_le_bytes();
    b[4] ^= n[1];
    b[5] ^= n[0];
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("hutch-{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_ids_are_valid_and_distinct() {
        let a = new_sandbox_id();
        let b = new_sandbox_id();
        assert!(is_sandbox_id(&a) && is_sandbox_id(&b) && a != b);
        assert!(!is_sandbox_id("hutch-../../etc") && !is_sandbox_id("hutch-ABCDEF012345"));
    }
}
