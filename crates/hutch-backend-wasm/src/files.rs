//! File operations on a wasm sandbox's workspace, done by the host through a capability handle
//! on the workspace directory (cap-std), so that a symlink a guest planted cannot lead a host
//! operation outside it. Guest paths are `/workspace/...` or relative to the working directory;
//! nothing else exists in a wasm sandbox.
use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};

use async_trait::async_trait;
use cap_std::ambient_authority;
use cap_std::fs::{Dir, MetadataExt, PermissionsExt};
use hutch_core::{FileOps, SandboxError};
use hutch_proto::{DirEntry, ErrorCode, FileKind, FileStat};

pub const WORKSPACE: &str = "/workspace";

#[derive(Debug)]
pub struct Workspace {
    host: PathBuf,
    dir: Dir,
}

fn agent_err(code: ErrorCode, message: String) -> SandboxError {
    SandboxError::Agent { code, message }
}

fn io_err(path: &str, e: std::io::Error) -> SandboxError {
    let code = match e.kind() {
        ErrorKind::NotFound => ErrorCode::NotFound,
        ErrorKind::PermissionDenied => ErrorCode::PermissionDenied,
        ErrorKind::AlreadyExists => ErrorCode::AlreadyExists,
        ErrorKind::StorageFull => ErrorCode::NoSpace,
        ErrorKind::InvalidInput => ErrorCode::InvalidRequest,
        _ => ErrorCode::Io,
    };
    // cap-std reports an escape attempt as PermissionDenied with its own wording
    let what = match code {
        ErrorCode::NotFound => "no such file or directory",
        ErrorCode::PermissionDenied => "permission denied",
        ErrorCode::AlreadyExists => "already exists",
        ErrorCode::NoSpace => "no space left in the workspace",
        _ => "i/o error",
    };
    agent_err(code, format!("{path}: {what} ({e})"))
}

fn kind_of(ft: cap_std::fs::FileType) -> FileKind {
    if ft.is_symlink() {
        FileKind::Symlink
    } else if ft.is_dir() {
        FileKind::Dir
    } else if ft.is_file() {
        FileKind::File
    } else {
        FileKind::Other
    }
}

/// Maps a guest path to a path relative to the workspace; `cwd` is the guest working directory.
pub fn relative(path: &str, cwd: &str) -> Result<PathBuf, SandboxError> {
    let full = if path.starts_with('/') { path.to_string() } else { format!("{cwd}/{path}") };
    let rest = full.strip_prefix(WORKSPACE).filter(|r| r.is_empty() || r.starts_with('/'));
    let Some(rest) = rest else {
        return Err(agent_err(
            ErrorCode::PermissionDenied,
            format!("{path}: permission denied: outside {WORKSPACE}, the only directory of a wasm sandbox"),
        ));
    };
    let mut out = PathBuf::new();
    for c in Path::new(rest).components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(n) => out.push(n),
            Component::ParentDir => {
                if !out.pop() {
                    return Err(agent_err(
                        ErrorCode::PermissionDenied,
                        format!("{path}: permission denied (outside {WORKSPACE})"),
                    ));
                }
            }
            Component::Prefix(_) => {}
        }
    }
    Ok(out)
}

impl Workspace {
    pub fn open(host: PathBuf) -> Result<Self, SandboxError> {
        let dir = Dir::open_ambient_dir(&host, ambient_authority()).map_err(|e| {
            SandboxError::io(format!("cannot open workspace {}", host.display()), e)
        })?;
        Ok(Self { host, dir })
    }

    pub fn host(&self) -> &Path {
        &self.host
    }

    /// The host directory of a guest directory, after checking it is a directory inside the
    /// workspace (used for an exec's working directory).
    pub fn host_dir(&self, guest: &str) -> Result<PathBuf, SandboxError> {
        let rel = relative(guest, WORKSPACE)?;
        if rel.as_os_str().is_empty() {
            return Ok(self.host.clone());
        }
        let md = self.dir.metadata(&rel).map_err(|e| io_err(guest, e))?;
        if !md.is_dir() {
            return Err(agent_err(ErrorCode::InvalidRequest, format!("{guest}: not a directory")));
        }
        // A symlinked directory would be followed by the host when preopening it.
        if self.dir.symlink_metadata(&rel).map_err(|e| io_err(guest, e))?.is_symlink() {
            return Err(agent_err(ErrorCode::PermissionDenied, format!("{guest}: is a symlink")));
        }
        Ok(self.host.join(rel))
    }

    /// Reads a file the guest named (e.g. a user's `.wasm`), confined to the workspace.
    pub fn read(&self, guest: &str, cwd: &str) -> Result<Vec<u8>, SandboxError> {
        let rel = relative(guest, cwd)?;
        self.dir.read(&rel).map_err(|e| io_err(guest, e))
    }

    /// Empties the workspace; returns how many entries could not be removed.
    pub fn clear(&self) -> u32 {
        let mut left = 0;
        let Ok(entries) = self.dir.entries() else { return 1 };
        for e in entries.flatten() {
            let name = e.file_name();
            let r = match e.file_type() {
                Ok(t) if t.is_dir() => self.dir.remove_dir_all(&name),
                _ => self.dir.remove_file(&name),
            };
            if r.is_err() {
                left += 1;
            }
        }
        left
    }

    /// Whether following `rel` passes through a symlink that leads outside the workspace (or
    /// loops). cap-std refuses to follow such a link anyway; this lets the error name the reason
    /// instead of a misleading errno.
    fn escapes(&self, rel: &Path) -> bool {
        fn push_rev(todo: &mut Vec<std::ffi::OsString>, p: &Path) {
            let parts: Vec<std::ffi::OsString> = p
                .components()
                .filter_map(|c| match c {
                    Component::Normal(n) => Some(n.to_owned()),
                    Component::ParentDir => Some("..".into()),
                    _ => None,
                })
                .collect();
            todo.extend(parts.into_iter().rev());
        }
        let mut todo = Vec::new();
        push_rev(&mut todo, rel);
        let mut cur = PathBuf::new();
        let mut hops = 0;
        while let Some(name) = todo.pop() {
            if name == ".." {
                if !cur.pop() {
                    return true;
                }
                continue;
            }
            cur.push(&name);
            match self.dir.symlink_metadata(&cur) {
                Ok(md) if md.is_symlink() => {}
                _ => continue,
            }
            hops += 1;
            let Ok(target) = self.dir.read_link_contents(&cur) else { return true };
            if hops > 40 {
                return true;
            }
            cur.pop();
            if target.is_absolute() {
                let Ok(rest) = target.strip_prefix(WORKSPACE) else { return true };
                cur = PathBuf::new();
                push_rev(&mut todo, rest);
            } else {
                push_rev(&mut todo, &target);
            }
        }
        false
    }

    /// `rel` (or its parent, for operations on a link itself) must not lead outside.
    fn confined(&self, guest: &str, rel: &Path, follow_last: bool) -> Result<(), SandboxError> {
        let p = if follow_last { Some(rel) } else { rel.parent() };
        if p.is_some_and(|p| self.escapes(p)) {
            return Err(agent_err(
                ErrorCode::PermissionDenied,
                format!("{guest}: permission denied: a symlink leads outside {WORKSPACE}"),
            ));
        }
        Ok(())
    }

    fn stat_rel(&self, guest: &str, rel: &Path) -> Result<FileStat, SandboxError> {
        let md = self.dir.symlink_metadata(rel).map_err(|e| io_err(guest, e))?;
        let kind = kind_of(md.file_type());
        let symlink_target = if kind == FileKind::Symlink {
            self.dir.read_link_contents(rel).ok().map(|p| p.display().to_string())
        } else {
            None
        };
        Ok(FileStat {
            path: guest.to_string(),
            kind,
            size: md.len(),
            mode: md.permissions().mode() & 0o7777,
            mtime: md.mtime(),
            symlink_target,
            uid: Some(md.uid()),
            gid: Some(md.gid()),
        })
    }
}

/// The workspace seen from a working directory (file ops resolve relative paths there).
#[derive(Debug)]
pub struct WorkspaceFiles {
    pub ws: Workspace,
    pub cwd: String,
}

impl WorkspaceFiles {
    fn rel(&self, path: &str) -> Result<PathBuf, SandboxError> {
        let rel = relative(path, &self.cwd)?;
        if rel.as_os_str().is_empty() {
            return Err(agent_err(
                ErrorCode::InvalidRequest,
                format!("{path}: the workspace itself cannot be changed"),
            ));
        }
        Ok(rel)
    }
}

#[async_trait]
impl FileOps for WorkspaceFiles {
    async fn write_file(
        &self,
        path: &str,
        data: &[u8],
        mode: Option<u32>,
    ) -> Result<(), SandboxError> {
        let rel = self.rel(path)?;
        self.ws.confined(path, &rel, true)?;
        if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.ws.dir.create_dir_all(parent).map_err(|e| io_err(path, e))?;
        }
        self.ws.dir.write(&rel, data).map_err(|e| io_err(path, e))?;
        let mode = mode.unwrap_or(0o644) & 0o777;
        self.ws
            .dir
            .set_permissions(&rel, cap_std::fs::Permissions::from_mode(mode))
            .map_err(|e| io_err(path, e))
    }

    async fn read_file(&self, path: &str) -> Result<Vec<u8>, SandboxError> {
        let rel = relative(path, &self.cwd)?;
        self.ws.confined(path, &rel, true)?;
        self.ws.dir.read(&rel).map_err(|e| io_err(path, e))
    }

    async fn list_dir(&self, path: &str) -> Result<Vec<DirEntry>, SandboxError> {
        let rel = relative(path, &self.cwd)?;
        self.ws.confined(path, &rel, true)?;
        let entries = if rel.as_os_str().is_empty() {
            self.ws.dir.entries()
        } else {
            self.ws.dir.read_dir(&rel)
        }
        .map_err(|e| io_err(path, e))?;
        let mut out = Vec::new();
        for e in entries {
            let e = e.map_err(|e| io_err(path, e))?;
            let md = e.metadata().map_err(|e| io_err(path, e))?;
            out.push(DirEntry {
                name: e.file_name().to_string_lossy().into_owned(),
                kind: kind_of(e.file_type().map_err(|e| io_err(path, e))?),
                size: md.len(),
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    async fn stat(&self, path: &str) -> Result<FileStat, SandboxError> {
        let rel = relative(path, &self.cwd)?;
        if rel.as_os_str().is_empty() {
            let md = std::fs::metadata(self.ws.host()).map_err(|e| io_err(path, e))?;
            use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
            return Ok(FileStat {
                path: path.to_string(),
                kind: FileKind::Dir,
                size: md.len(),
                mode: md.permissions().mode() & 0o7777,
                mtime: md.mtime(),
                symlink_target: None,
                uid: Some(md.uid()),
                gid: Some(md.gid()),
            });
        }
        self.ws.confined(path, &rel, false)?;
        self.ws.stat_rel(path, &rel)
    }

    async fn remove(&self, path: &str, recursive: bool) -> Result<(), SandboxError> {
        let rel = self.rel(path)?;
        self.ws.confined(path, &rel, false)?;
        let md = self.ws.dir.symlink_metadata(&rel).map_err(|e| io_err(path, e))?;
        let r = if md.is_dir() {
            if recursive {
                self.ws.dir.remove_dir_all(&rel)
            } else {
                self.ws.dir.remove_dir(&rel)
            }
        } else {
            self.ws.dir.remove_file(&rel)
        };
        r.map_err(|e| io_err(path, e))
    }

    async fn make_dir(&self, path: &str, parents: bool) -> Result<(), SandboxError> {
        let rel = self.rel(path)?;
        self.ws.confined(path, &rel, true)?;
        if parents { self.ws.dir.create_dir_all(&rel) } else { self.ws.dir.create_dir(&rel) }
            .map_err(|e| io_err(path, e))
    }

    async fn rename(&self, from: &str, to: &str) -> Result<(), SandboxError> {
        let a = self.rel(from)?;
        let b = self.rel(to)?;
        self.ws.confined(from, &a, false)?;
        self.ws.confined(to, &b, false)?;
        self.ws.dir.rename(&a, &self.ws.dir, &b).map_err(|e| io_err(from, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_paths_map_into_the_workspace_only() {
        assert_eq!(relative("/workspace/a/b", "/workspace").unwrap(), PathBuf::from("a/b"));
        assert_eq!(relative("x.txt", "/workspace/sub").unwrap(), PathBuf::from("sub/x.txt"));
        assert_eq!(relative("/workspace", "/").unwrap(), PathBuf::new());
        assert_eq!(relative("/workspace/a/../b", "/").unwrap(), PathBuf::from("b"));
        for bad in ["/etc/passwd", "/workspacex/a", "/workspace/../etc", "../../etc"] {
            assert!(relative(bad, "/workspace").is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn a_planted_symlink_does_not_lead_outside() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        let ws = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), ws.path().join("link")).unwrap();
        let f = WorkspaceFiles {
            ws: Workspace::open(ws.path().into()).unwrap(),
            cwd: WORKSPACE.into(),
        };
        let e = f.read_file("/workspace/link/secret").await.unwrap_err().to_string();
        assert!(e.contains("leads outside"), "{e}");
        // a link that stays inside is followed
        std::fs::create_dir(ws.path().join("real")).unwrap();
        std::os::unix::fs::symlink("real", ws.path().join("in")).unwrap();
        f.write_file("/workspace/in/a.txt", b"a", None).await.unwrap();
        assert_eq!(f.read_file("/workspace/real/a.txt").await.unwrap(), b"a");
        // a loop is refused, not followed forever
        std::os::unix::fs::symlink("loop", ws.path().join("loop")).unwrap();
        assert!(f.read_file("/workspace/loop/x").await.is_err());
        assert!(f.write_file("/workspace/link/new", b"x", None).await.is_err());
        assert!(!outside.path().join("new").exists());
    }
}
