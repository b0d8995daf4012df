//! File requests, served with the agent's own (unprivileged) uid: the kernel decides what the
//! sandbox may touch. Relative paths resolve against the agent's working directory.
use std::fs;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use hutch_proto::{DirEntry, ErrorCode, FileKind, FileStat, Request, Response, FILE_CHUNK};

type Reply = Result<(Response, Vec<u8>), (ErrorCode, String)>;

fn code(e: &io::Error) -> ErrorCode {
    match e.kind() {
        io::ErrorKind::NotFound => ErrorCode::NotFound,
        io::ErrorKind::PermissionDenied => ErrorCode::PermissionDenied,
        io::ErrorKind::AlreadyExists => ErrorCode::AlreadyExists,
        _ => match e.raw_os_error() {
            Some(libc::EROFS) | Some(libc::EACCES) | Some(libc::EPERM) => {
                ErrorCode::PermissionDenied
            }
            Some(libc::ENOTDIR) => ErrorCode::NotFound,
            // the caller's mistake: a name too long, a directory where a file was meant,
            // moving a directory into itself, a symlink loop
            Some(libc::ENAMETOOLONG | libc::EISDIR | libc::EINVAL | libc::ELOOP) => {
                ErrorCode::InvalidRequest
            }
            // removing a non-empty directory without `recursive`
            Some(libc::ENOTEMPTY | libc::EEXIST) => ErrorCode::AlreadyExists,
            Some(libc::ENOSPC | libc::EDQUOT | libc::EFBIG) => ErrorCode::NoSpace,
            _ => ErrorCode::Io,
        },
    }
}

fn fail(op: &str, path: &Path) -> impl Fn(io::Error) -> (ErrorCode, String) {
    let what = format!("{op} {}", path.display());
    move |e| (code(&e), format!("{what}: {e}"))
}

fn kind(ft: fs::FileType) -> FileKind {
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

fn denied(p: &Path, why: String) -> (ErrorCode, String) {
    (ErrorCode::PermissionDenied, format!("{}: {why}", p.display()))
}

/// Resolves `p` (following every symlink, including one in the last component) and checks that
/// it stays inside one of `roots`. With no roots, `p` is returned unchanged.
fn confine(p: &Path, roots: &[String]) -> Result<PathBuf, (ErrorCode, String)> {
    if roots.is_empty() {
        return Ok(p.to_path_buf());
    }
    lexical(p, roots)?;
    // The longest existing ancestor, fully resolved, plus the part that does not exist yet.
    let mut existing = p.to_path_buf();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    while existing.symlink_metadata().is_err() {
        match (existing.file_name().map(|n| n.to_os_string()), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent.to_path_buf();
            }
            _ => break,
        }
    }
    let mut resolved = fs::canonicalize(&existing)
        .map_err(|e| (code(&e), format!("{}: {e}", existing.display())))?;
    for name in rest.iter().rev() {
        resolved.push(name);
    }
    inside(p, &resolved, roots)?;
    Ok(resolved)
}

/// For operations on a path itself (stat, remove, rename's source): the parent is resolved and
/// checked, the last component is not followed, so a symlink can be inspected or removed.
fn confine_lexical(p: &Path, roots: &[String]) -> Result<PathBuf, (ErrorCode, String)> {
    if roots.is_empty() {
        return Ok(p.to_path_buf());
    }
    if roots.iter().any(|r| Path::new(r) == p) {
        // a root itself (stat of /workspace)
        return Ok(p.to_path_buf());
    }
    lexical(p, roots)?;
    let (Some(parent), Some(name)) = (p.parent(), p.file_name()) else {
        return Err(denied(p, "is not a file path".into()));
    };
    let parent = confine(parent, roots)?;
    let resolved = parent.join(name);
    if resolved.symlink_metadata().map(|m| m.file_type().is_symlink()).unwrap_or(false) {
        // stat/remove of the link itself is fine; its target does not matter
        return Ok(resolved);
    }
    inside(p, &resolved, roots)?;
    Ok(resolved)
}

fn lexical(p: &Path, roots: &[String]) -> Result<(), (ErrorCode, String)> {
    if p.components().any(|c| matches!(c, std::path::Component::ParentDir)) {
        return Err(denied(p, "'..' is not allowed in paths".into()));
    }
    if !roots.iter().any(|r| p.starts_with(r)) {
        return Err(denied(
            p,
            format!("is outside the sandbox's file roots ({})", roots.join(", ")),
        ));
    }
    Ok(())
}

fn inside(p: &Path, resolved: &Path, roots: &[String]) -> Result<(), (ErrorCode, String)> {
    let ok = roots.iter().any(|r| {
        let real = fs::canonicalize(r).unwrap_or_else(|_| PathBuf::from(r));
        resolved.starts_with(&real) || resolved.starts_with(r)
    });
    if ok {
        Ok(())
    } else {
        Err(denied(
            p,
            format!(
                "resolves to {}, outside the sandbox's file roots ({})",
                resolved.display(),
                roots.join(", ")
            ),
        ))
    }
}

pub fn handle(req: Request, body: Vec<u8>, workdir: &str) -> Reply {
    let abs = |p: &str| -> PathBuf { Path::new(workdir).join(p) };
    match req {
        Request::WriteFile { id, path, mode, append, within } => {
            let p = confine(&abs(&path), &within)?;
            if let Some(parent) = p.parent() {
                fs::create_dir_all(parent).map_err(fail("create directory for", &p))?;
            }
            let mut f = fs::OpenOptions::new()
                .create(true)
                .write(true)
                .append(append)
                .truncate(!append)
                .open(&p)
                .map_err(fail("open", &p))?;
            f.write_all(&body).map_err(fail("write", &p))?;
            if let Some(m) = mode {
                f.set_permissions(fs::Permissions::from_mode(m & 0o7777))
                    .map_err(fail("chmod", &p))?;
            }
            Ok((Response::Ok { id }, Vec::new()))
        }
        Request::ReadFile { id, path, offset, len, within } => {
            let p = confine(&abs(&path), &within)?;
            let mut f = fs::File::open(&p).map_err(fail("open", &p))?;
            let meta = f.metadata().map_err(fail("stat", &p))?;
            if meta.is_dir() {
                return Err((
                    ErrorCode::InvalidRequest,
                    format!("read {}: is a directory", p.display()),
                ));
            }
            f.seek(SeekFrom::Start(offset)).map_err(fail("seek", &p))?;
            let want = len.min(FILE_CHUNK as u64) as usize;
            let mut data = Vec::with_capacity(want);
            Read::by_ref(&mut f)
                .take(want as u64)
                .read_to_end(&mut data)
                .map_err(fail("read", &p))?;
            let eof = offset + data.len() as u64 >= meta.len() || data.len() < want;
            Ok((Response::FileData { id, offset, eof, size: meta.len() }, data))
        }
        Request::ListDir { id, path, within } => {
            let p = confine(&abs(&path), &within)?;
            let mut entries = Vec::new();
            for e in fs::read_dir(&p).map_err(fail("list", &p))? {
                let e = e.map_err(fail("list", &p))?;
                let Ok(m) = e.path().symlink_metadata() else { continue };
                entries.push(DirEntry {
                    name: e.file_name().to_string_lossy().into_owned(),
                    kind: kind(m.file_type()),
                    size: m.len(),
                });
            }
            entries.sort_by(|a, b| a.name.cmp(&b.name));
            Ok((Response::Entries { id, entries }, Vec::new()))
        }
        Request::Stat { id, path, within } => {
            let p = confine_lexical(&abs(&path), &within)?;
            let m = p.symlink_metadata().map_err(fail("stat", &p))?;
            let symlink_target = if m.file_type().is_symlink() {
                fs::read_link(&p).ok().map(|t| t.to_string_lossy().into_owned())
            } else {
                None
            };
            let stat = FileStat {
                path: p.to_string_lossy().into_owned(),
                kind: kind(m.file_type()),
                size: m.len(),
                mode: m.mode() & 0o7777,
                mtime: m.mtime(),
                symlink_target,
                uid: Some(m.uid()),
                gid: Some(m.gid()),
            };
            Ok((Response::StatOk { id, stat }, Vec::new()))
        }
        Request::Remove { id, path, recursive, within } => {
            let p = confine_lexical(&abs(&path), &within)?;
            let m = p.symlink_metadata().map_err(fail("remove", &p))?;
            if m.is_dir() {
                if recursive { fs::remove_dir_all(&p) } else { fs::remove_dir(&p) }
                    .map_err(fail("remove", &p))?;
            } else {
                fs::remove_file(&p).map_err(fail("remove", &p))?;
            }
            Ok((Response::Ok { id }, Vec::new()))
        }
        Request::MakeDir { id, path, parents, within } => {
            let p = confine(&abs(&path), &within)?;
            if parents { fs::create_dir_all(&p) } else { fs::create_dir(&p) }
                .map_err(fail("mkdir", &p))?;
            Ok((Response::Ok { id }, Vec::new()))
        }
        Request::Rename { id, from, to, within } => {
            let (f, t) = (confine_lexical(&abs(&from), &within)?, confine(&abs(&to), &within)?);
            fs::rename(&f, &t).map_err(fail("rename", &f))?;
            Ok((Response::Ok { id }, Vec::new()))
        }
        other => Err((ErrorCode::InvalidRequest, format!("unexpected request {:?}", other.id()))),
    }
}
