//! Human sizes (`512m`, `1g`, `64k`, bytes) and durations (`30s`, `500ms`, `2m`).
use std::time::Duration;

pub const KIB: u64 = 1024;
pub const MIB: u64 = 1024 * KIB;
pub const GIB: u64 = 1024 * MIB;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    #[error("invalid size {0:?}: use a number with an optional unit k, m or g (e.g. 512m)")]
    Size(String),
    #[error("invalid duration {0:?}: use a number with a unit ms, s, m or h (e.g. 30s)")]
    Duration(String),
}

/// Parses `512m`, `1g`, `1.5g`, `64k`, `1048576`, `256MiB`.
pub fn parse_size(s: &str) -> Result<u64, UnitError> {
    let t = s.trim().to_ascii_lowercase();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| UnitError::Size(s.into()))?;
    let mult = match unit.trim() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => KIB,
        "m" | "mb" | "mib" => MIB,
        "g" | "gb" | "gib" => GIB,
        _ => return Err(UnitError::Size(s.into())),
    };
    let v = n * mult as f64;
    if !v.is_finite() || v < 0.0 || v > u64::MAX as f64 {
        return Err(UnitError::Size(s.into()));
    }
    Ok(v as u64)
}

/// Parses `30s`, `500ms`, `2m`, `1h`, `1.5s`; a bare number is seconds.
pub fn parse_duration(s: &str) -> Result<Duration, UnitError> {
    let t = s.trim().to_ascii_lowercase();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| UnitError::Duration(s.into()))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "" | "s" => n,
        "m" | "min" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(UnitError::Duration(s.into())),
    };
    if !secs.is_finite() || !(0.0..=1e9).contains(&secs) {
        return Err(UnitError::Duration(s.into()));
    }
    Ok(Duration::from_secs_f64(secs))
}

pub fn fmt_bytes(b: u64) -> String {
    if b >= GIB && b.is_multiple_of(GIB) {
        format!("{}GiB", b / GIB)
    } else if b >= MIB {
        format!("{:.0}MiB", b as f64 / MIB as f64)
    } else if b >= KIB {
        format!("{:.0}KiB", b as f64 / KIB as f64)
    } else {
        format!("{b}B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512m"), Ok(512 * MIB));
        assert_eq!(parse_size("1G"), Ok(GIB));
        assert_eq!(parse_size("256MiB"), Ok(256 * MIB));
        assert_eq!(parse_size("1.5g"), Ok(GIB + 512 * MIB));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("12x").is_err());
        assert!(parse_size("-1m").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("5"), Ok(Duration::from_secs(5)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("3d").is_err());
    }
}
