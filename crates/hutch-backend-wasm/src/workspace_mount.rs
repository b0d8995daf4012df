//! The workspace of a wasm sandbox is a tmpfs of the sandbox's workspace size when hutch runs as
//! root (so a guest cannot fill the host's disk), else a plain directory.
#![allow(unsafe_code)]
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use hutch_core::SandboxError;

fn cstr(p: &Path) -> Result<CString, SandboxError> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| SandboxError::InvalidSpec(format!("path with a NUL byte: {}", p.display())))
}

/// Mounts a tmpfs of `bytes` at `dir` (which exists) when running as root.
pub fn mount(dir: &Path, bytes: u64) -> Result<(), SandboxError> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(());
    }
    let target = cstr(dir)?;
    let opts = CString::new(format!("size={bytes},mode=0700,nr_inodes=65536"))
        .map_err(|_| SandboxError::InvalidSpec("mount options".into()))?;
    let fstype = c"tmpfs";
    let source = c"hutch-wasm";
    // SAFETY: all pointers are valid NUL-terminated strings that outlive the call.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            opts.as_ptr().cast(),
        )
    };
    if rc != 0 {
        return Err(SandboxError::io(
            format!("cannot mount the workspace tmpfs at {}", dir.display()),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Detaches whatever is mounted at `dir`; nothing mounted (or not root) is fine.
pub fn unmount(dir: &Path) {
    let Ok(target) = cstr(dir) else { return };
    // SAFETY: `target` is a valid NUL-terminated string; failure (EINVAL: not a mount point,
    // ENOENT, EPERM) leaves nothing to undo.
    unsafe {
        libc::umount2(target.as_ptr(), libc::MNT_DETACH);
    }
}
