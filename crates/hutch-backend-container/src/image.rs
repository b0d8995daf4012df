//! Root filesystems. `host` is a generated skeleton (mount points and the host's /bin, /lib*
//! symlinks) whose /usr (and any real /bin, /lib* directories) are bind-mounted read-only from the
//! host, plus a small generated /etc. It is built once per state directory and shared read-only by
//! every sandbox. A `rootfs` image is a directory the user provides.
use std::fs;
use std::io;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::ContainerError;

/// Bumped when the skeleton layout changes, so old copies are not reused.
const HOST_IMAGE_VERSION: u32 = 3;

/// Top-level host directories that hold programs and libraries.
pub const HOST_DIRS: [&str; 7] = ["usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"];

/// Files and directories of the host's /etc that programs need to start (loader cache,
/// alternatives symlinks, interpreter configuration). Nothing with secrets.
const ETC_COPIES: [&str; 14] = [
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",
    "localtime",
    "timezone",
    "os-release",
    "debian_version",
    "bash.bashrc",
    "profile",
    "inputrc",
    "mime.types",
    "python3",
    "python3.11",
];

/// A ready host image.
#[derive(Debug, Clone)]
pub struct HostImage {
    pub rootfs: PathBuf,
    pub etc: PathBuf,
    /// Host directories to bind read-only at the same path.
    pub binds: Vec<PathBuf>,
}

fn io_err(what: &str, p: &Path) -> impl FnOnce(io::Error) -> ContainerError {
    let ctx = format!("{what} {}", p.display());
    move |e| ContainerError::Io(ctx, e)
}

fn mtime(p: &Path) -> Option<SystemTime> {
    fs::metadata(p).and_then(|m| m.modified()).ok()
}

impl HostImage {
    /// Returns the host image under `images_dir`, building it if missing or stale. Builders
    /// serialize on a lock file, so concurrent sandboxes (threads or processes) never see a
    /// half-built image or have one replaced under them while it is fresh.
    pub fn ensure(images_dir: &Path) -> Result<Self, ContainerError> {
        let dir = images_dir.join(format!("host-v{HOST_IMAGE_VERSION}"));
        let binds = HOST_DIRS
            .iter()
            .map(|d| Path::new("/").join(d))
            .filter(|p| p.symlink_metadata().map(|m| m.is_dir()).unwrap_or(false))
            .collect();
        let img = HostImage { rootfs: dir.join("rootfs"), etc: dir.join("etc"), binds };
        if img.is_fresh(&dir) {
            return Ok(img);
        }
        fs::create_dir_all(images_dir).map_err(io_err("create", images_dir))?;
        let lock_path = images_dir.join(".lock");
        let lock = fs::File::create(&lock_path).map_err(io_err("create", &lock_path))?;
        lock.lock().map_err(io_err("lock", &lock_path))?;
        if img.is_fresh(&dir) {
            return Ok(img);
        }
        let tmp = images_dir.join(format!(".host-build-{}", std::process::id()));
        let _ = fs::remove_dir_all(&tmp);
        build_host(&tmp)?;
        let old = images_dir.join(format!(".host-old-{}", std::process::id()));
        if dir.exists() {
            fs::rename(&dir, &old).map_err(io_err("move aside", &dir))?;
        }
        fs::rename(&tmp, &dir).map_err(io_err("install", &dir))?;
        let _ = fs::remove_dir_all(&old);
        Ok(img)
    }

    /// Built, and newer than the host's loader cache (else new host libraries would be missing).
    fn is_fresh(&self, dir: &Path) -> bool {
        dir.join("ready").exists()
            && match (mtime(Path::new("/etc/ld.so.cache")), mtime(&self.etc.join("ld.so.cache"))) {
                (Some(host), Some(ours)) => ours >= host,
                (None, _) => true,
                _ => false,
            }
    }
}

fn build_host(dir: &Path) -> Result<(), ContainerError> {
    let rootfs = dir.join("rootfs");
    let etc = dir.join("etc");
    for d in [
        "proc",
        "dev",
        "sys",
        "tmp",
        "etc",
        "workspace",
        "home",
        "home/user",
        "root",
        "run",
        "var",
        "opt",
        "mnt",
    ] {
        let p = rootfs.join(d);
        fs::create_dir_all(&p).map_err(io_err("create", &p))?;
    }
    for d in HOST_DIRS {
        let host = Path::new("/").join(d);
        let Ok(meta) = host.symlink_metadata() else { continue };
        let target = rootfs.join(d);
        if meta.file_type().is_symlink() {
            let link = fs::read_link(&host).map_err(io_err("read link", &host))?;
            symlink(&link, &target).map_err(io_err("symlink", &target))?;
        } else if meta.is_dir() {
            fs::create_dir_all(&target).map_err(io_err("create", &target))?;
        }
    }
    // runc gives a tmpfs the mode of the directory it covers: /tmp must be world-writable + sticky.
    let tmp = rootfs.join("tmp");
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o1777)).map_err(io_err("chmod", &tmp))?;
    fs::create_dir_all(&etc).map_err(io_err("create", &etc))?;
    let files: [(&str, &str); 6] = [
        (
            "passwd",
            "root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000:hutch sandbox:/workspace:/bin/bash\nuser:x:1001:1001:e2b-compatible sandbox user:/home/user:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
        ),
        ("group", "root:x:0:\ntty:x:5:\nsandbox:x:1000:\nuser:x:1001:\nnogroup:x:65534:\n"),
        ("hosts", "127.0.0.1\tlocalhost hutch\n::1\tlocalhost ip6-localhost ip6-loopback\n"),
        ("hostname", "hutch\n"),
        ("resolv.conf", "# hutch sandboxes have no network\n"),
        ("nsswitch.conf", "passwd: files\ngroup: files\nshadow: files\nhosts: files\nnetworks: files\nprotocols: files\nservices: files\n"),
    ];
    for (name, content) in files {
        let p = etc.join(name);
        fs::write(&p, content).map_err(io_err("write", &p))?;
    }
    for name in ETC_COPIES {
        let src = Path::new("/etc").join(name);
        if src.symlink_metadata().is_ok() {
            copy_tree(&src, &etc.join(name)).map_err(io_err("copy", &src))?;
        }
    }
    fs::write(dir.join("ready"), b"").map_err(io_err("write", dir))?;
    Ok(())
}

/// Copies files, directories and symlinks (as symlinks), skipping what cannot be read.
fn copy_tree(src: &Path, dst: &Path) -> io::Result<()> {
    let meta = src.symlink_metadata()?;
    if meta.file_type().is_symlink() {
        symlink(fs::read_link(src)?, dst)
    } else if meta.is_dir() {
        fs::create_dir_all(dst)?;
        for e in fs::read_dir(src)?.flatten() {
            let _ = copy_tree(&e.path(), &dst.join(e.file_name()));
        }
        Ok(())
    } else if meta.is_file() {
        fs::copy(src, dst).map(|_| ())
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_a_skeleton_with_generated_etc_and_reuses_it() {
        let tmp = tempfile::tempdir().expect("tmp");
        let img = HostImage::ensure(tmp.path()).expect("build");
        assert!(img.rootfs.join("proc").is_dir());
        let passwd = fs::read_to_string(img.etc.join("passwd")).expect("passwd");
        assert!(passwd.contains("sandbox:x:1000:1000"));
        assert!(!passwd.contains("$"), "no host password hashes");
        assert!(!img.etc.join("shadow").exists());
        assert!(img.binds.iter().any(|b| b == Path::new("/usr")));
        // /bin is a symlink into usr on merged-usr hosts and must stay one
        if Path::new("/bin").symlink_metadata().map(|m| m.file_type().is_symlink()).unwrap_or(false)
        {
            assert!(img
                .rootfs
                .join("bin")
                .symlink_metadata()
                .expect("bin")
                .file_type()
                .is_symlink());
        }
        let stamp = mtime(&img.etc.join("passwd"));
        let again = HostImage::ensure(tmp.path()).expect("reuse");
        assert_eq!(mtime(&again.etc.join("passwd")), stamp);
    }
}
