//! The secure-exec benchmark's environment knobs, parsed with clear errors. Flags take
//! precedence over the environment; both go through the same parser.
use anyhow::{bail, Context, Result};

/// Parses a comma-separated list of positive integers (`BENCH_BATCH_SIZES=1,10,50`).
pub fn sizes(name: &str, text: &str) -> Result<Vec<usize>> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let n: usize = part.parse().with_context(|| {
            format!("{name}: {part:?} is not a whole number (example: 1,10,50)")
        })?;
        if n == 0 {
            bail!("{name}: sizes must be at least 1, got 0");
        }
        out.push(n);
    }
    if out.is_empty() {
        bail!("{name}: empty list (example: 1,10,50)");
    }
    Ok(out)
}

/// Parses a comma-separated list of names, each one of `known`.
pub fn names(name: &str, text: &str, known: &[&str]) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if !known.contains(&part) {
            bail!("{name}: unknown {part:?} (known: {})", known.join(", "));
        }
        if !out.iter().any(|o| o == part) {
            out.push(part.to_string());
        }
    }
    if out.is_empty() {
        bail!("{name}: empty list (known: {})", known.join(", "));
    }
    Ok(out)
}

/// A flag's value, else the environment variable's, else the default.
pub fn pick(flag: Option<&str>, env: &str, default: &str) -> Result<String> {
    if let Some(f) = flag {
        return Ok(f.to_string());
    }
    match std::env::var(env) {
        Ok(v) => Ok(v),
        Err(std::env::VarError::NotPresent) => Ok(default.to_string()),
        Err(e) => bail!("{env}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_sizes_parse_and_reject_nonsense() {
        assert_eq!(sizes("B", "1, 10,50,,200").unwrap(), vec![1, 10, 50, 200]);
        let e = sizes("BENCH_BATCH_SIZES", "1,ten").unwrap_err().to_string();
        assert!(e.contains("BENCH_BATCH_SIZES") && e.contains("\"ten\""), "{e}");
        assert!(sizes("B", "0").unwrap_err().to_string().contains("at least 1"));
        assert!(sizes("B", " , ").unwrap_err().to_string().contains("empty"));
    }

    #[test]
    fn scenario_names_must_be_known() {
        let known = ["hutch", "docker"];
        assert_eq!(names("S", "docker,hutch,docker", &known).unwrap(), vec!["docker", "hutch"]);
        let e = names("BENCH_SCENARIOS", "hutch,lxc", &known).unwrap_err().to_string();
        assert!(e.contains("\"lxc\"") && e.contains("hutch, docker"), "{e}");
    }

    #[test]
    fn flags_win_over_the_environment() {
        assert_eq!(pick(Some("5"), "HUTCH_BENCH_TEST_UNSET_KNOB", "1").unwrap(), "5");
        assert_eq!(pick(None, "HUTCH_BENCH_TEST_UNSET_KNOB", "1").unwrap(), "1");
    }
}
