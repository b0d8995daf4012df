//! The seccomp profile compiled once to the raw BPF program the kernel loads, for crun.
//!
//! crun compiles `linux.seccomp` with libseccomp on every `crun run`: about a fifth of all the
//! CPU a burst of cold sandboxes costs here. crun also accepts a precompiled program in the
//! annotation `run.oci.seccomp_bpf_data` (base64) and then skips its own compilation, so hutch
//! compiles the profile with the same library and the same OCI semantics crun uses, keeps the
//! program in the state directory keyed by the profile and the libseccomp version, and hands it
//! to crun with every bundle. The `linux.seccomp` section stays in the bundle: runc (which does
//! not know the annotation) and a crun too old to read it still enforce the same profile.
use std::io::Write;
use std::path::{Path, PathBuf};

use libseccomp::{
    ScmpAction, ScmpArch, ScmpArgCompare, ScmpCompareOp, ScmpFilterContext, ScmpSyscall,
    ScmpVersion,
};
use oci_spec::runtime::{Arch, LinuxSeccomp, LinuxSeccompAction, LinuxSeccompOperator};
use sha2::{Digest, Sha256};

use crate::ContainerError;

/// The annotation crun reads a precompiled program from.
pub const CRUN_BPF_ANNOTATION: &str = "run.oci.seccomp_bpf_data";

/// Bumped when the way a profile is compiled changes, so older cached programs are not reused.
const FORMAT: &str = "hutch-seccomp-bpf-1";

fn bad(e: impl std::fmt::Display) -> ContainerError {
    ContainerError::Seccomp(e.to_string())
}

/// EPERM, what runc and crun return for an `errno` action without `errnoRet`.
const DEFAULT_ERRNO: u32 = 1;

fn action(a: LinuxSeccompAction, errno: Option<u32>) -> Result<ScmpAction, ContainerError> {
    Ok(match a {
        LinuxSeccompAction::ScmpActAllow => ScmpAction::Allow,
        LinuxSeccompAction::ScmpActErrno => {
            ScmpAction::Errno(errno.unwrap_or(DEFAULT_ERRNO) as i32)
        }
        LinuxSeccompAction::ScmpActKillProcess => ScmpAction::KillProcess,
        LinuxSeccompAction::ScmpActKill | LinuxSeccompAction::ScmpActKillThread => {
            ScmpAction::KillThread
        }
        LinuxSeccompAction::ScmpActTrap => ScmpAction::Trap,
        LinuxSeccompAction::ScmpActLog => ScmpAction::Log,
        other => return Err(bad(format!("action {other:?} cannot be precompiled"))),
    })
}

fn arch(a: &Arch) -> Result<ScmpArch, ContainerError> {
    Ok(match a {
        Arch::ScmpArchX86_64 => ScmpArch::X8664,
        Arch::ScmpArchX86 => ScmpArch::X86,
        Arch::ScmpArchX32 => ScmpArch::X32,
        Arch::ScmpArchAarch64 => ScmpArch::Aarch64,
        Arch::ScmpArchArm => ScmpArch::Arm,
        other => return Err(bad(format!("architecture {other:?} is not supported"))),
    })
}

fn compare(
    index: usize,
    op: LinuxSeccompOperator,
    value: u64,
    value_two: Option<u64>,
) -> ScmpArgCompare {
    let index = index as u32;
    match op {
        // OCI: `value` is the mask, `valueTwo` the expected result (as libseccomp's datum_a/b)
        LinuxSeccompOperator::ScmpCmpMaskedEq => {
            ScmpArgCompare::new(index, ScmpCompareOp::MaskedEqual(value), value_two.unwrap_or(0))
        }
        LinuxSeccompOperator::ScmpCmpNe => {
            ScmpArgCompare::new(index, ScmpCompareOp::NotEqual, value)
        }
        LinuxSeccompOperator::ScmpCmpLt => ScmpArgCompare::new(index, ScmpCompareOp::Less, value),
        LinuxSeccompOperator::ScmpCmpLe => {
            ScmpArgCompare::new(index, ScmpCompareOp::LessOrEqual, value)
        }
        LinuxSeccompOperator::ScmpCmpEq => ScmpArgCompare::new(index, ScmpCompareOp::Equal, value),
        LinuxSeccompOperator::ScmpCmpGe => {
            ScmpArgCompare::new(index, ScmpCompareOp::GreaterEqual, value)
        }
        LinuxSeccompOperator::ScmpCmpGt => {
            ScmpArgCompare::new(index, ScmpCompareOp::Greater, value)
        }
    }
}

/// The libseccomp filter for an OCI seccomp section, built the way runc and crun build it:
/// names this libseccomp does not know are skipped, a rule whose action is the default action
/// adds nothing, conditions on distinct arguments are ANDed in one rule and several conditions
/// on the same argument become one rule each.
fn filter(oci: &LinuxSeccomp) -> Result<ScmpFilterContext, ContainerError> {
    let default = action(oci.default_action(), oci.default_errno_ret())?;
    let mut ctx = ScmpFilterContext::new(default).map_err(bad)?;
    for a in oci.architectures().as_deref().unwrap_or_default() {
        let a = arch(a)?;
        if a != ScmpArch::native() {
            ctx.add_arch(a).map_err(bad)?;
        }
    }
    for sc in oci.syscalls().as_deref().unwrap_or_default() {
        let act = action(sc.action(), sc.errno_ret())?;
        if act == default {
            continue;
        }
        let conds: Vec<ScmpArgCompare> = sc
            .args()
            .as_deref()
            .unwrap_or_default()
            .iter()
            .map(|a| compare(a.index(), a.op(), a.value(), a.value_two()))
            .collect();
        let mut indices: Vec<usize> =
            sc.args().as_deref().unwrap_or_default().iter().map(|a| a.index()).collect();
        indices.sort_unstable();
        let repeated = indices.windows(2).any(|w| w[0] == w[1]);
        for name in sc.names() {
            let Ok(nr) = ScmpSyscall::from_name(name) else { continue };
            if conds.is_empty() {
                ctx.add_rule(act, nr).map_err(|e| bad(format!("{name}: {e}")))?;
            } else if repeated {
                for c in &conds {
                    ctx.add_rule_conditional(act, nr, std::slice::from_ref(c))
                        .map_err(|e| bad(format!("{name}: {e}")))?;
                }
            } else {
                ctx.add_rule_conditional(act, nr, &conds)
                    .map_err(|e| bad(format!("{name}: {e}")))?;
            }
        }
    }
    Ok(ctx)
}

/// Compiles an OCI seccomp section to the raw program (an array of `struct sock_filter`).
pub fn compile(oci: &LinuxSeccomp, scratch: &Path) -> Result<Vec<u8>, ContainerError> {
    let ctx = filter(oci)?;
    let mut f = tempfile::tempfile_in(scratch).map_err(|e| {
        ContainerError::Io(format!("cannot create a file in {}", scratch.display()), e)
    })?;
    ctx.export_bpf(&f).map_err(bad)?;
    use std::io::{Read, Seek};
    let mut prog = Vec::new();
    f.rewind()
        .and_then(|_| f.read_to_end(&mut prog))
        .map_err(|e| ContainerError::Io("cannot read the compiled seccomp program".into(), e))?;
    check(&prog)?;
    Ok(prog)
}

fn check(prog: &[u8]) -> Result<(), ContainerError> {
    // a sock_filter is 8 bytes; the kernel takes at most BPF_MAXINSNS (4096) of them
    if prog.is_empty() || !prog.len().is_multiple_of(8) || prog.len() / 8 > 4096 {
        return Err(bad(format!("compiled program has an invalid size ({} bytes)", prog.len())));
    }
    Ok(())
}

/// Where the program for `oci` is kept under `dir`: named by what it depends on.
fn cache_path(oci: &LinuxSeccomp, dir: &Path) -> Result<PathBuf, ContainerError> {
    let v = ScmpVersion::current().map_err(bad)?;
    let mut h = Sha256::new();
    h.update(FORMAT.as_bytes());
    h.update(format!("libseccomp {}.{}.{}", v.major, v.minor, v.micro).as_bytes());
    h.update(serde_json::to_vec(oci).map_err(bad)?);
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok(dir.join(format!("{}.bpf", &hex[..32])))
}

/// The compiled program for `oci`, from `dir` when it was compiled before, else compiled now and
/// stored there (written to a temporary file and renamed, so concurrent `hutch run` processes
/// never read half a program).
pub fn cached(oci: &LinuxSeccomp, dir: &Path) -> Result<Vec<u8>, ContainerError> {
    let path = cache_path(oci, dir)?;
    if let Ok(prog) = std::fs::read(&path) {
        if check(&prog).is_ok() {
            return Ok(prog);
        }
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| ContainerError::Io(format!("cannot create {}", dir.display()), e))?;
    let prog = compile(oci, dir)?;
    let io = |e| ContainerError::Io(format!("cannot write {}", path.display()), e);
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    tmp.write_all(&prog).map_err(io)?;
    tmp.persist(&path).map_err(|e| io(e.error))?;
    Ok(prog)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_profile_compiles_and_is_cached_by_content() {
        let oci = crate::seccomp::default_seccomp().expect("profile");
        let dir = tempfile::tempdir().expect("tempdir");
        let prog = cached(&oci, dir.path()).expect("compiles");
        check(&prog).expect("valid size");
        let files: Vec<_> = std::fs::read_dir(dir.path()).expect("dir").flatten().collect();
        assert_eq!(files.len(), 1, "one cached program, no temporary files left");
        // a second call reads the same bytes back
        assert_eq!(cached(&oci, dir.path()).expect("cached"), prog);
        // a different profile is a different program under a different name
        let mut other = oci.clone();
        other.set_default_errno_ret(Some(38));
        let prog2 = cached(&other, dir.path()).expect("compiles");
        assert_ne!(prog, prog2);
        assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 2);
    }

    /// Runs `sh -c script` under the program, as the kernel would load it for crun.
    fn run_filtered(prog: &[u8], script: &str) -> std::process::Output {
        use std::os::unix::process::CommandExt;
        let filters: Vec<libc::sock_filter> = prog
            .chunks_exact(8)
            .map(|c| libc::sock_filter {
                code: u16::from_ne_bytes([c[0], c[1]]),
                jt: c[2],
                jf: c[3],
                k: u32::from_ne_bytes([c[4], c[5], c[6], c[7]]),
            })
            .collect();
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.args(["-c", script]);
        // SAFETY: between fork and exec the hook only makes two syscalls on data prepared
        // before the fork (`filters` outlives the spawn); nothing allocates or takes a lock.
        unsafe {
            cmd.pre_exec(move || {
                let fprog = libc::sock_fprog {
                    len: filters.len() as u16,
                    filter: filters.as_ptr() as *mut libc::sock_filter,
                };
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                    || libc::syscall(
                        libc::SYS_seccomp,
                        1, /* SECCOMP_SET_MODE_FILTER */
                        0,
                        &fprog,
                    ) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        cmd.output().expect("sh runs under the filter")
    }

    #[test]
    fn the_precompiled_program_enforces_the_profile() {
        let oci = crate::seccomp::default_seccomp().expect("profile");
        let dir = tempfile::tempdir().expect("tempdir");
        let prog = compile(&oci, dir.path()).expect("compiles");
        // ordinary programs run
        let ok = run_filtered(&prog, "echo fine; cat /proc/self/status | grep -c '^Seccomp:.*2'");
        assert!(ok.status.success(), "{ok:?}");
        assert_eq!(String::from_utf8_lossy(&ok.stdout), "fine\n1\n");
        // namespaces are refused with EPERM (the profile's default errno), whoever runs the test
        let ns = run_filtered(&prog, "unshare -U true 2>&1; echo rc=$?");
        let o = String::from_utf8_lossy(&ns.stdout);
        assert!(o.contains("Operation not permitted") && !o.contains("rc=0"), "{o}");
        // clone with a namespace flag is refused by the argument rule, plain fork still works
        let fork = run_filtered(&prog, "(echo child); echo parent");
        assert_eq!(String::from_utf8_lossy(&fork.stdout), "child\nparent\n");
    }

    #[test]
    fn a_corrupt_cached_program_is_recompiled() {
        let oci = crate::seccomp::default_seccomp().expect("profile");
        let dir = tempfile::tempdir().expect("tempdir");
        let good = cached(&oci, dir.path()).expect("compiles");
        let path = cache_path(&oci, dir.path()).expect("path");
        std::fs::write(&path, b"garbage").expect("corrupt");
        assert_eq!(cached(&oci, dir.path()).expect("recompiled"), good);
    }
}
