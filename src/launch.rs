//! Starting the child and its guard as `posix_spawn` does: `clone(CLONE_VM | CLONE_VFORK)`
//! and `execve`, with the steps the child needs in between (a process group of its own, the
//! parent-death signal and the check that closes its race, the inherited open-file limit,
//! stdin), and collecting their exit.
//!
//! Why not std's `Command`: with a step between fork and exec, std forks, which copies the
//! daemon's page tables; a start took 1.1 ms (p50) that way on the bench machine, against about
//! 0.1 ms for this, and a handover waits for its child's start (docs/performance.md).
//!
//! The new process shares the daemon's memory until it execs, while the launching thread is
//! suspended (`CLONE_VFORK`; the other threads run on). So it makes only system calls, on a
//! stack of its own, and touches only what was made before: the paths, the argument and
//! environment arrays, the file descriptors. All signals are blocked around the clone, and the
//! new process resets every handler it inherited before it unblocks them, so that no handler
//! of the daemon ever runs in it. A failure before the exec is written to shared memory and
//! the process exits with 127; the launcher reaps it and returns the error.
//!
//! Each process's exit is collected by a thread of its own, which waits for the exit without
//! reaping (`WNOWAIT`), runs the process's hook if it has one (the child's: kill what is left of
//! its group and its guard, while the zombie keeps the group id taken; `crate::guard`), then
//! reaps under the same lock as every signal sent to the pid: a kill never reaches another
//! process that reused the pid.

use nix::errno::Errno;
use nix::libc;
use nix::unistd::Pid;
use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

/// The new process's stack until it execs: system calls and, for a script without `#!`, the
/// C library's re-exec through `/bin/sh`. Only the pages it touches are ever mapped.
const STACK: usize = 256 << 10;

/// What the new process's stdin is.
pub enum Stdin {
    /// `/dev/null`.
    Null,
    /// The daemon's own.
    Inherit,
    /// The read end of a pipe whose write end the [`Process`] keeps (the guard's: it closes
    /// when the daemon dies, however it dies).
    Pipe,
}

/// A program to start, with everything its start needs made in advance.
pub struct Program {
    /// The file to execute: the command's first word, looked up in `PATH` if it has no `/`.
    path: CString,
    argv: Vec<CString>,
    envp: Vec<CString>,
    cwd: Option<CString>,
    stdin: Stdin,
    stdout_null: bool,
    /// `Some(daemon)`: the process gets SIGKILL when the launching thread dies, and does not
    /// start if its parent is not `daemon` any more (it died before the `prctl`).
    dies_with: Option<Pid>,
    /// Passed on as file descriptor 3 (the guard's stop token).
    fd3: Option<OwnedFd>,
    /// Its exit collector waits for a hook ([`Process::before_reap`]) before it reaps.
    hooked: bool,
}

/// What a process's exit collector runs between seeing the exit and reaping.
pub type Hook = Box<dyn FnOnce() + Send>;

impl Program {
    /// `argv` with the daemon's environment less `remove_env` plus `env`, in `cwd` (or the
    /// daemon's), with stdin as given, in a process group of its own.
    pub fn new(
        argv: &[OsString],
        env: &[(String, String)],
        remove_env: &[String],
        cwd: Option<&Path>,
        stdin: Stdin,
    ) -> io::Result<Self> {
        let mut vars: Vec<(OsString, OsString)> = std::env::vars_os()
            .filter(|(k, _)| {
                !remove_env.iter().any(|r| OsStr::new(r) == k)
                    && !env.iter().any(|(e, _)| OsStr::new(e) == k)
            })
            .collect();
        vars.extend(env.iter().map(|(k, v)| (k.into(), v.into())));
        let path_var = vars
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone());
        let first = argv
            .first()
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "an empty command"))?;
        let envp = vars
            .into_iter()
            .map(|(mut k, v)| {
                k.push("=");
                k.push(v);
                c_string(k.into_vec())
            })
            .collect::<io::Result<_>>()?;
        Ok(Self {
            path: c_string(
                resolve(first, path_var.as_deref())?
                    .into_os_string()
                    .into_vec(),
            )?,
            argv: argv
                .iter()
                .map(|a| c_string(a.as_bytes().to_vec()))
                .collect::<io::Result<_>>()?,
            envp,
            cwd: cwd
                .map(|d| c_string(d.as_os_str().as_bytes().to_vec()))
                .transpose()?,
            stdin,
            stdout_null: false,
            dies_with: None,
            fd3: None,
            hooked: false,
        })
    }

    /// Its stdout goes to `/dev/null` (it is the daemon's otherwise).
    pub fn stdout_null(mut self) -> Self {
        self.stdout_null = true;
        self
    }

    /// It gets SIGKILL when the launching thread dies, and does not start if `daemon` died
    /// before that took effect.
    pub fn dies_with(mut self, daemon: Pid) -> Self {
        self.dies_with = Some(daemon);
        self
    }

    /// It gets `fd` as its file descriptor 3. `fd` must be numbered above 2, so that placing
    /// stdin and stdout first cannot overwrite it.
    pub fn fd3(mut self, fd: OwnedFd) -> Self {
        self.fd3 = Some(fd);
        self
    }

    /// Its exit collector, having seen the exit, waits for the hook given to
    /// [`Process::before_reap`] (or for that handle to drop) and runs it before it reaps.
    pub fn hooked(mut self) -> Self {
        self.hooked = true;
        self
    }

    /// Starts it; returns once it has executed its program (or failed to). The parent-death
    /// signal is tied to the calling thread: call it from the launcher thread only.
    pub fn start(self) -> io::Result<Process> {
        let null = || -> io::Result<OwnedFd> {
            Ok(std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/null")?
                .into())
        };
        let (stdin_fd, keep): (Option<OwnedFd>, Option<OwnedFd>) = match self.stdin {
            Stdin::Null => (Some(null()?), None),
            Stdin::Inherit => (None, None),
            Stdin::Pipe => {
                let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
                (Some(read), Some(write))
            }
        };
        let stdout_fd = if self.stdout_null {
            Some(null()?)
        } else {
            None
        };
        let pointers = |v: &[CString]| -> Vec<*const libc::c_char> {
            v.iter()
                .map(|s| s.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect()
        };
        let argv = pointers(&self.argv);
        let envp = pointers(&self.envp);
        // For a file without `#!` (ENOEXEC), as execvp does: `/bin/sh path args...`.
        let sh = c"/bin/sh";
        let sh_argv: Vec<*const libc::c_char> = [sh.as_ptr(), self.path.as_ptr()]
            .into_iter()
            .chain(argv.iter().skip(1).copied())
            .collect();
        let step = Step {
            path: &self.path,
            argv: &argv,
            envp: &envp,
            sh_argv: &sh_argv,
            cwd: self.cwd.as_deref(),
            stdin: stdin_fd.as_ref().map(AsRawFd::as_raw_fd),
            stdout: stdout_fd.as_ref().map(AsRawFd::as_raw_fd),
            fd3: self.fd3.as_ref().map(AsRawFd::as_raw_fd),
            dies_with: self.dies_with.map(Pid::as_raw),
            inherited_files: crate::open_files::inherited_soft_limit(),
            failed: AtomicI32::new(0),
        };
        let mut stack = vec![0u8; STACK];
        let all = nix::sys::signal::SigSet::all();
        let mut before = nix::sys::signal::SigSet::empty();
        nix::sys::signal::pthread_sigmask(
            nix::sys::signal::SigmaskHow::SIG_SETMASK,
            Some(&all),
            Some(&mut before),
        )?;
        // SAFETY: the new process runs `Step::run`, which makes only async-signal-safe system
        // calls on data made above, on its own stack; this thread is suspended until it execs
        // or exits (CLONE_VFORK), so everything it reads lives until then. No signal handler
        // runs in it: all signals are blocked until it has reset the handlers.
        let cloned = unsafe {
            nix::sched::clone(
                Box::new(|| step.run()),
                &mut stack,
                nix::sched::CloneFlags::CLONE_VM | nix::sched::CloneFlags::CLONE_VFORK,
                Some(libc::SIGCHLD),
            )
        };
        nix::sys::signal::pthread_sigmask(
            nix::sys::signal::SigmaskHow::SIG_SETMASK,
            Some(&before),
            None,
        )?;
        let pid = cloned?;
        match step.failed.load(Ordering::SeqCst) {
            0 => Process::watch(pid, keep, self.hooked),
            errno => {
                // It exited (127) without executing anything: reap it.
                let _ = nix::sys::wait::waitpid(pid, None);
                Err(io::Error::from_raw_os_error(errno))
            }
        }
    }
}

/// What the new process does between the clone and the exec.
struct Step<'a> {
    path: &'a CString,
    argv: &'a [*const libc::c_char],
    envp: &'a [*const libc::c_char],
    sh_argv: &'a [*const libc::c_char],
    cwd: Option<&'a std::ffi::CStr>,
    stdin: Option<RawFd>,
    stdout: Option<RawFd>,
    fd3: Option<RawFd>,
    dies_with: Option<libc::pid_t>,
    /// The soft open-file limit to give back (`None`: the daemon did not change its own).
    inherited_files: Option<u64>,
    /// The errno of the step that failed; 0 while none has.
    failed: AtomicI32,
}

impl Step<'_> {
    /// Runs in the new process: only system calls, no allocation, no lock.
    fn run(&self) -> isize {
        // SAFETY: each call is async-signal-safe and takes pointers to data that outlives the
        // new process's use of it (see `Program::start`).
        let errno = unsafe { self.exec() };
        self.failed.store(errno.max(1), Ordering::SeqCst);
        // SAFETY: `_exit` runs no destructor and no atexit handler of the shared memory.
        unsafe { libc::_exit(127) }
    }

    /// Returns only on failure, with the errno.
    unsafe fn exec(&self) -> i32 {
        let errno = || Errno::last_raw();
        unsafe {
            // Every handler goes back to the default before any signal is let through (the
            // handlers are this process's own copy: no CLONE_SIGHAND). SIGPIPE too, which the
            // Rust runtime ignores: a child expects the default.
            for signal in 1..=libc::SIGRTMAX() {
                if signal == libc::SIGKILL || signal == libc::SIGSTOP {
                    continue;
                }
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(signal, std::ptr::null(), &mut old) != 0 {
                    continue;
                }
                let ignored = old.sa_sigaction == libc::SIG_IGN;
                if old.sa_sigaction != libc::SIG_DFL && (!ignored || signal == libc::SIGPIPE) {
                    let mut default: libc::sigaction = std::mem::zeroed();
                    default.sa_sigaction = libc::SIG_DFL;
                    libc::sigaction(signal, &default, std::ptr::null_mut());
                }
            }
            if libc::setpgid(0, 0) != 0 {
                return errno();
            }
            if let Some(daemon) = self.dies_with {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                    return errno();
                }
                if libc::getppid() != daemon {
                    // The daemon died before the prctl took effect: do not start orphaned.
                    return libc::ESRCH;
                }
            }
            if let Some(soft) = self.inherited_files {
                let mut limit: libc::rlimit = std::mem::zeroed();
                if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
                    return errno();
                }
                limit.rlim_cur = soft as libc::rlim_t;
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return errno();
                }
            }
            for (fd, target) in [(self.stdin, 0), (self.stdout, 1), (self.fd3, 3)] {
                let Some(fd) = fd else { continue };
                // dup2 onto itself would keep close-on-exec: clear it instead.
                let done = if fd == target {
                    libc::fcntl(fd, libc::F_SETFD, 0)
                } else {
                    libc::dup2(fd, target)
                };
                if done < 0 {
                    return errno();
                }
            }
            if let Some(dir) = self.cwd
                && libc::chdir(dir.as_ptr()) != 0
            {
                return errno();
            }
            let none: libc::sigset_t = {
                let mut set: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut set);
                set
            };
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            libc::execve(self.path.as_ptr(), self.argv.as_ptr(), self.envp.as_ptr());
            if errno() == libc::ENOEXEC {
                libc::execve(
                    c"/bin/sh".as_ptr(),
                    self.sh_argv.as_ptr(),
                    self.envp.as_ptr(),
                );
                return libc::ENOEXEC;
            }
            errno()
        }
    }
}

/// A started process: its pid until its exit is collected, then its exit status.
pub struct Process {
    pid: Pid,
    /// Held while signalling the pid and while reaping it: `None` once reaped.
    alive: Arc<Mutex<Option<Pid>>>,
    exited: watch::Receiver<Option<ExitStatus>>,
    /// The write end of its stdin pipe ([`Stdin::Pipe`]), closed when this is dropped.
    stdin: Option<OwnedFd>,
    /// For [`Program::hooked`]: hands the exit collector its hook (dropped: none).
    hook: Option<std::sync::mpsc::Sender<Hook>>,
}

/// Kills a process and waits for its death, from any thread ([`Process::killer`]).
#[derive(Clone)]
pub struct Killer {
    alive: Arc<Mutex<Option<Pid>>>,
}

impl Killer {
    /// SIGKILLs the process, unless it was reaped already, and blocks until it is dead: it can
    /// signal nothing any more. Its exit collector reaps it afterwards (it waits for the lock
    /// held here, so the pid cannot be reused meanwhile).
    pub fn kill_and_wait(&self) {
        use nix::sys::wait::{Id, WaitPidFlag, waitid};
        let alive = self.alive.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(pid) = *alive {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT;
            while let Err(Errno::EINTR) = waitid(Id::Pid(pid), flags) {}
        }
    }
}

impl Process {
    /// Starts the thread that collects the exit of `pid` (after a hook, when `hooked`).
    fn watch(pid: Pid, stdin: Option<OwnedFd>, hooked: bool) -> io::Result<Self> {
        let alive = Arc::new(Mutex::new(Some(pid)));
        let (tell, exited) = watch::channel(None);
        let reaper = alive.clone();
        let (hook, hook_given) = match hooked {
            true => {
                let (give, given) = std::sync::mpsc::channel::<Hook>();
                (Some(give), Some(given))
            }
            false => (None, None),
        };
        let started = std::thread::Builder::new()
            .name("leasehold-reaper".into())
            .spawn(move || {
                // Wait for the exit without reaping: the pid stays ours (a zombie) until the
                // lock below is taken, so a signal sent under the lock cannot reach a reuse.
                use nix::sys::wait::{Id, WaitPidFlag, waitid};
                let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT;
                while let Err(Errno::EINTR) = waitid(Id::Pid(pid), flags) {}
                if let Some(Ok(hook)) = hook_given.map(|given| given.recv()) {
                    hook();
                }
                let mut alive = reaper.lock().unwrap_or_else(|e| e.into_inner());
                let mut raw = 0;
                // SAFETY: a plain waitpid on our own child, into a local.
                let status = match unsafe { libc::waitpid(pid.as_raw(), &mut raw, 0) } {
                    p if p == pid.as_raw() => ExitStatus::from_raw(raw),
                    // Reaped by somebody else (a waitpid(-1) as PID 1): the status is lost.
                    _ => ExitStatus::from_raw(libc::SIGKILL),
                };
                *alive = None;
                drop(alive);
                let _ = tell.send(Some(status));
            });
        if let Err(e) = started {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            let _ = nix::sys::wait::waitpid(pid, None);
            return Err(e);
        }
        Ok(Self {
            pid,
            alive,
            exited,
            stdin,
            hook,
        })
    }

    pub fn id(&self) -> u32 {
        self.pid.as_raw() as u32
    }

    /// The write end of its stdin pipe ([`Stdin::Pipe`]), to be kept by the caller.
    pub fn take_stdin(&mut self) -> Option<OwnedFd> {
        self.stdin.take()
    }

    /// For [`Program::hooked`]: what its exit collector runs after seeing the exit and before
    /// reaping. Until it is given (or this is dropped), the collector waits.
    pub fn before_reap(&mut self, hook: Hook) {
        if let Some(give) = self.hook.take() {
            let _ = give.send(hook);
        }
    }

    /// Kills it and waits for its death from another thread ([`Killer`]).
    pub fn killer(&self) -> Killer {
        Killer {
            alive: self.alive.clone(),
        }
    }

    /// Whether it has exited: reaped already, or a zombie its exit collector has yet to reap
    /// (whose hook may be running). Under the lock every signal to the pid takes, so the pid
    /// cannot be a reuse.
    pub fn has_exited(&self) -> bool {
        use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
        let alive = self.alive.lock().unwrap_or_else(|e| e.into_inner());
        let Some(pid) = *alive else {
            return true;
        };
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT | WaitPidFlag::WNOHANG;
        loop {
            match waitid(Id::Pid(pid), flags) {
                Err(Errno::EINTR) => continue,
                Ok(WaitStatus::StillAlive) | Err(_) => return false,
                Ok(_) => return true,
            }
        }
    }

    /// Sends SIGKILL, unless its exit was collected already.
    pub fn start_kill(&self) {
        let alive = self.alive.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(pid) = *alive {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        }
    }

    /// Its exit status, once it has exited and been reaped. Cancel-safe.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        let exited = self
            .exited
            .wait_for(Option::is_some)
            .await
            .map_err(|_| io::Error::other("the exit collector is gone"))?;
        Ok(exited.expect("waited for"))
    }
}

/// `program` as `execvp` would find it: as given if it names a path, else in the first
/// directory of `path` (the child's `PATH`; without one, the C library's default `/bin:/usr/bin`)
/// where it is an executable file. Not found: `NotFound`; found but not executable:
/// `PermissionDenied`.
fn resolve(program: &OsStr, path: Option<&OsStr>) -> io::Result<PathBuf> {
    if program.as_bytes().contains(&b'/') {
        return Ok(PathBuf::from(program));
    }
    let path = path.unwrap_or(OsStr::new("/bin:/usr/bin"));
    let mut denied = false;
    for dir in path.as_bytes().split(|b| *b == b':') {
        let dir = if dir.is_empty() { b"." as &[u8] } else { dir };
        let candidate = Path::new(OsStr::from_bytes(dir)).join(program);
        let Ok(meta) = std::fs::metadata(&candidate) else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        match nix::unistd::access(&candidate, nix::unistd::AccessFlags::X_OK) {
            Ok(()) => return Ok(candidate),
            Err(_) => denied = true,
        }
    }
    Err(if denied {
        io::Error::from_raw_os_error(libc::EACCES)
    } else {
        io::Error::from_raw_os_error(libc::ENOENT)
    })
}

fn c_string(bytes: Vec<u8>) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "a command word or environment variable holds a NUL byte",
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::time::Duration;

    fn words(w: &[&str]) -> Vec<OsString> {
        w.iter().map(OsString::from).collect()
    }

    /// `sh -c script out`: the script writes to `$0`.
    fn sh_writing(script: &str, out: &Path) -> Vec<OsString> {
        let mut argv = words(&["sh", "-c", script]);
        argv.push(out.into());
        argv
    }

    /// Starts `argv` (from the test's thread: nothing here needs the launcher's) and waits for
    /// its exit.
    async fn run(program: Program) -> ExitStatus {
        let mut process = program.start().expect("started");
        tokio::time::timeout(Duration::from_secs(10), process.wait())
            .await
            .expect("exited within 10 s")
            .unwrap()
    }

    #[tokio::test]
    async fn a_program_gets_its_environment_directory_and_a_group_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let script =
            "read -r stat < /proc/$$/stat; echo \"$$ ${stat#*) } home=$HOME added=$ADDED\"; pwd";
        let program = Program::new(
            &words(&["sh", "-c", &format!("({script}) > out")]),
            &[("ADDED".into(), "yes".into())],
            &["HOME".into()],
            Some(dir.path()),
            Stdin::Null,
        )
        .unwrap();
        assert!(run(program).await.success());
        let out = std::fs::read_to_string(dir.path().join("out")).unwrap();
        println!("{out}");
        let mut lines = out.lines();
        let first: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        // "pid state ppid pgrp ...": the shell leads a group of its own.
        assert_eq!(first[0], first[3], "its own process group: {out}");
        assert!(out.contains("home= added=yes"), "{out}");
        let dir = dir.path().canonicalize().unwrap();
        assert_eq!(lines.next(), dir.to_str());
    }

    #[tokio::test]
    async fn a_missing_program_is_not_found_and_one_that_cannot_run_is_denied() {
        let missing = Program::new(&words(&["no-such-program-9"]), &[], &[], None, Stdin::Null);
        assert_eq!(missing.err().unwrap().kind(), io::ErrorKind::NotFound);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-executable");
        std::fs::write(&file, "#!/bin/sh\n").unwrap();
        let path = file.into_os_string();
        let denied = Program::new(&[path], &[], &[], None, Stdin::Null).unwrap();
        assert_eq!(
            denied.start().err().unwrap().kind(),
            io::ErrorKind::PermissionDenied
        );
        let gone = Program::new(&words(&["/no/such/file"]), &[], &[], None, Stdin::Null);
        assert_eq!(
            gone.unwrap().start().err().unwrap().kind(),
            io::ErrorKind::NotFound
        );
    }

    #[tokio::test]
    async fn a_script_without_a_shebang_runs_through_sh() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("script");
        std::fs::write(&file, "echo \"ran with $1\" > \"$(dirname \"$0\")/out\"\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
        let argv = [file.into_os_string(), "x".into()];
        let program = Program::new(&argv, &[], &[], None, Stdin::Null).unwrap();
        assert!(run(program).await.success());
        let out = std::fs::read_to_string(dir.path().join("out")).unwrap();
        assert_eq!(out, "ran with x\n");
    }

    /// Signals are all blocked in the launching thread while it clones, and the Rust runtime
    /// ignores SIGPIPE: the program starts with none blocked and SIGPIPE at its default.
    #[tokio::test]
    async fn the_program_starts_with_no_signal_blocked_and_sigpipe_at_its_default() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("status");
        let argv = sh_writing("exec cat /proc/self/status > \"$0\"", &out);
        let program = Program::new(&argv, &[], &[], None, Stdin::Null).unwrap();
        assert!(run(program).await.success());
        let status = std::fs::read_to_string(out).unwrap();
        let mask = |name: &str| {
            let line = status.lines().find(|l| l.starts_with(name)).unwrap();
            u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
        };
        assert_eq!(mask("SigBlk:"), 0, "{status}");
        let sigpipe = 1u64 << (libc::SIGPIPE - 1);
        assert_eq!(mask("SigIgn:") & sigpipe, 0, "SIGPIPE ignored: {status}");
    }

    #[tokio::test]
    async fn the_exit_is_collected_once_and_a_kill_after_it_is_a_no_op() {
        let exits = Program::new(&words(&["sh", "-c", "exit 3"]), &[], &[], None, Stdin::Null);
        let mut process = exits.unwrap().start().unwrap();
        assert_eq!(process.wait().await.unwrap().code(), Some(3));
        assert_eq!(process.wait().await.unwrap().code(), Some(3), "again");
        process.start_kill();
        let sleeps = Program::new(&words(&["sleep", "60"]), &[], &[], None, Stdin::Null);
        let mut process = sleeps.unwrap().start().unwrap();
        process.start_kill();
        let status = tokio::time::timeout(Duration::from_secs(10), process.wait())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL));
    }

    /// The state letter of `pid` in /proc (`Z`: a zombie).
    fn state(pid: Pid) -> Option<String> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let after = &stat[stat.rfind(')')? + 1..];
        after.split_whitespace().next().map(str::to_owned)
    }

    /// The guard's disarming: the child's exit collector runs its hook after the exit and
    /// before the reap, so the hook finds the child a zombie (its pid, and its group id, still
    /// taken), and what the hook kills with [`Killer::kill_and_wait`] is dead when it returns.
    #[tokio::test]
    async fn the_hook_runs_between_the_exit_and_the_reap_and_a_killed_process_is_dead() {
        let guard = Program::new(&words(&["sleep", "60"]), &[], &[], None, Stdin::Null)
            .unwrap()
            .start()
            .unwrap();
        let guard_pid = Pid::from_raw(guard.id() as i32);
        let exits = Program::new(&words(&["sh", "-c", "exit 0"]), &[], &[], None, Stdin::Null);
        let mut child = exits.unwrap().hooked().start().unwrap();
        let child_pid = Pid::from_raw(child.id() as i32);
        let (seen, saw) = std::sync::mpsc::channel();
        let killer = guard.killer();
        // Given after the child may well have exited: the collector waits for it.
        tokio::time::sleep(Duration::from_millis(100)).await;
        child.before_reap(Box::new(move || {
            let child_state = state(child_pid);
            killer.kill_and_wait();
            let _ = seen.send((child_state, state(guard_pid)));
        }));
        assert_eq!(child.wait().await.unwrap().code(), Some(0));
        let (child_state, guard_state) = saw.recv().unwrap();
        assert_eq!(
            child_state.as_deref(),
            Some("Z"),
            "not reaped before the hook"
        );
        assert!(
            guard_state.is_none() || guard_state.as_deref() == Some("Z"),
            "the killed process is dead when kill_and_wait returns: {guard_state:?}"
        );
    }

    /// The guard's stdin: the process reads until the daemon's end closes (dropped here).
    #[tokio::test]
    async fn a_piped_stdin_closes_when_the_process_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let argv = sh_writing("cat; echo closed > \"$0\"", &out);
        let process = Program::new(&argv, &[], &[], None, Stdin::Pipe)
            .unwrap()
            .start()
            .unwrap();
        let pid = Pid::from_raw(process.id() as i32);
        drop(process);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !out.exists() {
            assert!(std::time::Instant::now() < deadline, "stdin never closed");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Its collector reaps it: no zombie is left behind.
        while nix::sys::signal::kill(pid, None).is_ok() {
            assert!(std::time::Instant::now() < deadline, "{pid} not reaped");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
