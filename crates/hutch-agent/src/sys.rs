//! The agent's only unsafe code: thin wrappers over the libc calls std does not expose
//! (fork/exec with a new session, waitpid(-1), kill of a process group, poll).
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

pub fn ignore_sigpipe() {
    // SAFETY: setting a signal disposition to SIG_IGN has no memory-safety preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

/// Takes ownership of an inherited, connected socket and marks it close-on-exec so that commands
/// started by the agent never inherit the control channel.
pub fn stream_from_fd(fd: RawFd) -> UnixStream {
    // SAFETY: F_SETFD on an fd number has no memory-safety preconditions; failure is harmless here
    // (the fd may be invalid, which the first read then reports).
    unsafe {
        libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
    }
    // SAFETY: the fd was handed to this process (runtime `--preserve-fds` or a socketpair end) and
    // nothing else in the agent owns it.
    unsafe { UnixStream::from_raw_fd(fd) }
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds points to two writable ints, as pipe2 requires.
    cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: pipe2 succeeded, so both fds are fresh and owned by us alone.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

pub fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    let raw = fd.as_raw_fd();
    // SAFETY: fcntl on an fd we own.
    let flags = cvt(unsafe { libc::fcntl(raw, libc::F_GETFL) })?;
    // SAFETY: as above.
    cvt(unsafe { libc::fcntl(raw, libc::F_SETFL, flags | libc::O_NONBLOCK) })?;
    Ok(())
}

/// Everything `spawn` needs, prepared before fork so the child does no allocation.
pub struct SpawnSpec {
    pub path: CString,
    pub argv: Vec<CString>,
    pub envp: Vec<CString>,
    pub cwd: CString,
    pub pipe_stdin: bool,
    /// More descriptors for the child: `(fd in the child, fd in the agent)`. The agent's fds
    /// must be >= 10 (see [`high_fd`]) so that placing them cannot clobber one another.
    pub extra_fds: Vec<(i32, RawFd)>,
    /// Run on a new pseudo-terminal of this size instead of pipes.
    pub pty: Option<hutch_proto::PtySize>,
}

/// A new pseudo-terminal (master, slave), both close-on-exec.
fn open_pty(size: hutch_proto::PtySize) -> io::Result<(OwnedFd, OwnedFd)> {
    let (mut m, mut s) = (-1, -1);
    let ws = libc::winsize { ws_row: size.rows, ws_col: size.cols, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: m and s are writable ints; name and termios may be null; ws is a valid winsize.
    cvt(unsafe { libc::openpty(&mut m, &mut s, std::ptr::null_mut(), std::ptr::null(), &ws) })?;
    // SAFETY: openpty succeeded, so both fds are fresh and owned by us alone.
    let (m, s) = unsafe { (OwnedFd::from_raw_fd(m), OwnedFd::from_raw_fd(s)) };
    for fd in [&m, &s] {
        // SAFETY: F_SETFD on an fd we own.
        cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) })?;
    }
    Ok((m, s))
}

/// A close-on-exec duplicate of an fd.
fn dup(fd: &OwnedFd) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC on an fd we own returns a new fd we then own.
    let n = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) })?;
    // SAFETY: n is a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(n) })
}

/// Sets the size of the terminal whose master is `fd`; its session gets SIGWINCH.
pub fn set_pty_size(fd: &OwnedFd, size: hutch_proto::PtySize) -> io::Result<()> {
    let ws = libc::winsize { ws_row: size.rows, ws_col: size.cols, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: TIOCSWINSZ reads a winsize from the valid pointer given.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCSWINSZ, &ws) }).map(|_| ())
}

/// Moves an fd to a number >= 10 (close-on-exec), for [`SpawnSpec::extra_fds`].
pub fn high_fd(fd: OwnedFd) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC on an fd we own returns a new fd we then own.
    let n = cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 10) })?;
    // SAFETY: n is a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(n) })
}

/// A pipe whose ends are both numbered >= 10.
pub fn high_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = pipe()?;
    Ok((high_fd(r)?, high_fd(w)?))
}

pub struct Spawned {
    pub pid: i32,
    pub stdin: Option<OwnedFd>,
    pub stdout: OwnedFd,
    pub stderr: OwnedFd,
    /// The terminal's master, for resizing (with `pty`).
    pub terminal: Option<OwnedFd>,
}

#[derive(Debug)]
pub enum SpawnError {
    /// `chdir` to the working directory failed in the child.
    Cwd(io::Error),
    /// `execve` failed in the child.
    Exec(io::Error),
    /// Setting up pipes or fork failed.
    Setup(io::Error),
}

/// fork + execve with the child in a new session (so its process group can be killed as a unit),
/// stdio on pipes, and a raised OOM score so the kernel picks the command before the agent.
/// The returned pid must be reaped by [`crate::reaper`]: the child may already have exited.
pub fn spawn(spec: &SpawnSpec) -> Result<Spawned, SpawnError> {
    let setup = SpawnError::Setup;
    let pty = spec.pty.map(open_pty).transpose().map_err(setup)?;
    let slave_fd = pty.as_ref().map(|(_, s)| s.as_raw_fd()).unwrap_or(-1);
    let (in_r, in_w) = if spec.pipe_stdin && pty.is_none() {
        let (r, w) = pipe().map_err(setup)?;
        (Some(r), Some(w))
    } else {
        (None, None)
    };
    let (out_r, out_w) = pipe().map_err(SpawnError::Setup)?;
    let (err_r, err_w) = pipe().map_err(SpawnError::Setup)?;
    let (rep_r, rep_w) = pipe().map_err(SpawnError::Setup)?;
    let devnull = c"/dev/null";
    let oom = c"/proc/self/oom_score_adj";
    let mut argv: Vec<*const libc::c_char> = spec.argv.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = spec.envp.iter().map(|a| a.as_ptr()).collect();
    envp.push(std::ptr::null());
    let in_fd = in_r.as_ref().map(|f| f.as_raw_fd()).unwrap_or(-1);
    let (out_fd, err_fd, rep_fd) = (out_w.as_raw_fd(), err_w.as_raw_fd(), rep_w.as_raw_fd());

    // SAFETY: after fork the child runs only async-signal-safe calls (setsid, open, dup2, write,
    // sigprocmask, signal, chdir, execve, _exit) on memory prepared before the fork, and never
    // returns into Rust code.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(SpawnError::Setup(io::Error::last_os_error()));
    }
    if pid == 0 {
        // SAFETY: see above; this block is the child and ends in execve or _exit.
        unsafe {
            let report = |stage: u8| {
                let e = *libc::__errno_location();
                let mut buf = [0u8; 5];
                buf[0] = stage;
                buf[1..].copy_from_slice(&e.to_ne_bytes());
                libc::write(rep_fd, buf.as_ptr().cast(), 5);
                libc::_exit(127);
            };
            libc::setsid();
            if slave_fd >= 0 {
                // the terminal becomes the session's controlling terminal and its stdio
                if libc::ioctl(slave_fd, libc::TIOCSCTTY, 0) < 0
                    || libc::dup2(slave_fd, 0) < 0
                    || libc::dup2(slave_fd, 1) < 0
                    || libc::dup2(slave_fd, 2) < 0
                {
                    report(3);
                }
            } else {
                let stdin_fd =
                    if in_fd >= 0 { in_fd } else { libc::open(devnull.as_ptr(), libc::O_RDONLY) };
                if stdin_fd < 0
                    || libc::dup2(stdin_fd, 0) < 0
                    || libc::dup2(out_fd, 1) < 0
                    || libc::dup2(err_fd, 2) < 0
                {
                    report(3);
                }
            }
            for &(target, from) in &spec.extra_fds {
                if libc::dup2(from, target) < 0 {
                    report(3);
                }
            }
            let o = libc::open(oom.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if o >= 0 {
                libc::write(o, b"1000".as_ptr().cast(), 4);
                libc::close(o);
            }
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            if libc::chdir(spec.cwd.as_ptr()) < 0 {
                report(1);
            }
            libc::execve(spec.path.as_ptr(), argv.as_ptr(), envp.as_ptr());
            report(2);
            libc::_exit(127);
        }
    }
    drop(rep_w);
    drop(out_w);
    drop(err_w);
    drop(in_r);
    let mut buf = [0u8; 5];
    let mut got = 0;
    loop {
        // SAFETY: reading into a local buffer of the stated length.
        let n = unsafe { libc::read(rep_r.as_raw_fd(), buf[got..].as_mut_ptr().cast(), 5 - got) };
        if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        if n <= 0 {
            break;
        }
        got += n as usize;
        if got == 5 {
            break;
        }
    }
    if got == 5 {
        let errno = i32::from_ne_bytes([buf[1], buf[2], buf[3], buf[4]]);
        let e = io::Error::from_raw_os_error(errno);
        crate::reaper::discard(pid);
        return Err(match buf[0] {
            1 => SpawnError::Cwd(e),
            2 => SpawnError::Exec(e),
            _ => SpawnError::Setup(e),
        });
    }
    match pty {
        // output comes from the master; the pipes, unused by the child, just end
        Some((master, slave)) => {
            drop(slave);
            let stdin = dup(&master).map_err(SpawnError::Setup)?;
            let terminal = dup(&master).map_err(SpawnError::Setup)?;
            Ok(Spawned {
                pid,
                stdin: Some(stdin),
                stdout: master,
                stderr: err_r,
                terminal: Some(terminal),
            })
        }
        None => Ok(Spawned { pid, stdin: in_w, stdout: out_r, stderr: err_r, terminal: None }),
    }
}

/// Blocking `waitpid(-1)`. `Ok(None)` means there are no children right now.
pub fn wait_any() -> io::Result<Option<(i32, libc::c_int)>> {
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: status is a valid out-pointer.
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid > 0 {
            return Ok(Some((pid, status)));
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::ECHILD) => return Ok(None),
            _ => return Err(e),
        }
    }
}

/// Signals a process group (negative pid) or a process.
pub fn kill(pid: i32, sig: i32) -> io::Result<()> {
    // SAFETY: kill has no memory-safety preconditions.
    cvt(unsafe { libc::kill(pid, sig) }).map(|_| ())
}

pub fn getpid() -> i32 {
    // SAFETY: getpid cannot fail.
    unsafe { libc::getpid() }
}

/// Polls the given fds for input for up to `timeout_ms` (-1: forever). Returns revents per fd.
pub fn poll_in(fds: &[RawFd], timeout_ms: i32) -> io::Result<Vec<i16>> {
    let mut pfds: Vec<libc::pollfd> =
        fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
    loop {
        // SAFETY: pfds is a valid array of pfds.len() pollfd structs.
        let r = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, timeout_ms) };
        if r >= 0 {
            return Ok(pfds.iter().map(|p| p.revents).collect());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Non-blocking read: `Ok(None)` when no data is ready, `Ok(Some(0))` at end of file.
pub fn read_nb(fd: RawFd, buf: &mut [u8]) -> io::Result<Option<usize>> {
    loop {
        // SAFETY: buf is a valid writable buffer of buf.len() bytes.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(Some(n as usize));
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => continue,
            io::ErrorKind::WouldBlock => return Ok(None),
            _ => return Err(e),
        }
    }
}

pub fn wexitstatus(status: libc::c_int) -> (Option<i32>, Option<i32>) {
    if libc::WIFEXITED(status) {
        (Some(libc::WEXITSTATUS(status)), None)
    } else if libc::WIFSIGNALED(status) {
        (None, Some(libc::WTERMSIG(status)))
    } else {
        (None, None)
    }
}

/// Removes every System V shared memory segment, semaphore set and message queue visible in this
/// IPC namespace (the sandbox's own), so nothing survives into the next user's session.
pub fn remove_sysv_ipc() {
    for (file, kind) in
        [("/proc/sysvipc/shm", 0), ("/proc/sysvipc/sem", 1), ("/proc/sysvipc/msg", 2)]
    {
        let Ok(text) = std::fs::read_to_string(file) else { continue };
        for line in text.lines().skip(1) {
            let Some(id) =
                line.split_whitespace().nth(1).and_then(|v| v.parse::<libc::c_int>().ok())
            else {
                continue;
            };
            // SAFETY: IPC_RMID takes no buffer (null is allowed); the id comes from the kernel's
            // own listing and a stale one just fails with EINVAL.
            unsafe {
                match kind {
                    0 => {
                        libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut());
                    }
                    1 => {
                        libc::semctl(id, 0, libc::IPC_RMID);
                    }
                    _ => {
                        libc::msgctl(id, libc::IPC_RMID, std::ptr::null_mut());
                    }
                }
            }
        }
    }
}

/// Starts a thread, retrying for a while when the sandbox's process limit is exhausted (threads
/// count against it): a fork bomb must not take the agent down with a failed spawn.
pub fn spawn_thread<F: FnOnce() + Send + 'static>(f: F) -> io::Result<()> {
    let f = std::sync::Arc::new(std::sync::Mutex::new(Some(f)));
    let mut delay = std::time::Duration::from_millis(5);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    loop {
        let slot = f.clone();
        match std::thread::Builder::new().stack_size(256 * 1024).spawn(move || {
            let job = slot.lock().ok().and_then(|mut g| g.take());
            if let Some(job) = job {
                job();
            }
        }) {
            Ok(_) => return Ok(()),
            Err(e) if std::time::Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(delay);
                delay = (delay * 2).min(std::time::Duration::from_millis(200));
            }
            Err(e) => return Err(e),
        }
    }
}
