//! Finding the `hutch-agent` binary the host mounts into sandboxes.
use std::path::{Path, PathBuf};

/// Where hutch looks for the agent, in order.
pub fn candidates() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(p) = std::env::var_os("HUTCH_AGENT") {
        out.push(PathBuf::from(p));
        return out;
    }
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            out.push(dir.join("hutch-agent"));
            out.push(dir.join("../lib/hutch/hutch-agent"));
            // cargo test binaries live in target/<profile>/deps
            out.push(dir.join("../hutch-agent"));
        }
    }
    out.push(PathBuf::from("/usr/local/lib/hutch/hutch-agent"));
    out.push(PathBuf::from("/usr/lib/hutch/hutch-agent"));
    out
}

/// The first agent binary that exists, canonicalized.
pub fn locate_agent() -> Result<PathBuf, String> {
    let c = candidates();
    c.iter().find(|p| p.is_file()).and_then(|p| p.canonicalize().ok()).ok_or_else(|| {
        format!(
            "the guest agent binary hutch-agent was not found (looked in {}); build it with scripts/build-agent.sh or set HUTCH_AGENT",
            c.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        )
    })
}

/// True when the ELF file has no program interpreter (is statically linked), so it runs in any
/// root filesystem.
pub fn is_static_elf(path: &Path) -> std::io::Result<bool> {
    let data = std::fs::read(path)?;
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "not a 64-bit ELF file");
    if data.len() < 64 || &data[..4] != b"\x7fELF" || data[4] != 2 {
        return Err(bad());
    }
    let u16_at = |o: usize| u16::from_le_bytes([data[o], data[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(data[0x20..0x28].try_into().map_err(|_| bad())?) as usize;
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    for i in 0..phnum {
        let off = phoff + i * phentsize;
        if off + 4 > data.len() {
            return Err(bad());
        }
        let p_type = u32::from_le_bytes([data[off], data[off + 1], data[off + 2], data[off + 3]]);
        if p_type == 3 {
            return Ok(false); // PT_INTERP
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_dynamic_executables() {
        // /bin/sh on a Debian host is dynamically linked
        assert_eq!(is_static_elf(Path::new("/bin/sh")).ok(), Some(false));
        let tmp = std::env::temp_dir().join(format!("not-elf-{}", std::process::id()));
        std::fs::write(&tmp, b"#!/bin/sh\n").expect("write");
        assert!(is_static_elf(&tmp).is_err());
        let _ = std::fs::remove_file(tmp);
    }
}
