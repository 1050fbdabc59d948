//! The child process: how it is started, signalled, stopped and reaped, and how it is never left
//! behind.
//!
//! * Each run of the child is the leader of a new process group, so stop and kill signals reach
//!   everything it started (`sh -c` grandchildren included).
//! * It gets `PR_SET_PDEATHSIG(SIGKILL)`. That signal fires when the *thread* that started the
//!   child exits, so every child is started by the [`Launcher`] thread (as [`crate::launch`]
//!   says: a clone, no fork), which lives as long as the daemon; after `prctl` the child checks
//!   `getppid()` to close the race where the daemon died before the `prctl`.
//! * Parent-death only reaches the direct child, so each run also gets a *guard*
//!   ([`crate::guard`]): a tiny process that holds the group to its deadlines whatever becomes
//!   of the daemon. The daemon tells it each new deadline over a pipe only the daemon writes
//!   to; when the daemon dies in any way, even SIGKILL, the kernel closes the pipe and the guard
//!   SIGKILLs the whole group; when the daemon is frozen, the guard stops and kills the group on
//!   time. The child's exit collector disarms the guard (kills it, and waits for its death)
//!   before it reaps the child. A child whose guard cannot be started does not run: its group
//!   is killed at once and the start counts as failed. (Unit tests start no guard: the test
//!   binary cannot be one.)
//! * Both get the open-file limit the daemon inherited, not the one it raised itself to
//!   ([`crate::open_files`]).
//! * When the group leader ends, whatever is left of its group is SIGKILLed: a child never
//!   outlives its run, whichever way the run ends.
//! * Each running group is armed on the [`Backstop`], which SIGKILLs it at its kill instant from
//!   a thread of its own even if the tokio runtime were stuck.
//! * A group some process of which survives SIGKILL (stuck in the kernel) is a [`StuckGroup`]: the
//!   lease is then neither handed on nor released until it is gone (docs/safety.md, "Recovery from
//!   anything").

use crate::backstop::{ArmedGroup, Backstop};
use crate::guard::{GuardLink, GuardLost, StopToken};
use crate::launch::{Process, Program, Stdin};
use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::ffi::OsString;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
#[cfg(test)]
use std::sync::Arc;
#[cfg(test)]
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::process::Command;
use tokio::sync::oneshot;
use tokio::time::{Instant, sleep};

/// How to start the child.
#[derive(Debug, Clone)]
pub struct ChildSpec {
    /// Program and arguments.
    pub command: Vec<String>,
    /// Variables added to the inherited environment.
    pub env: Vec<(String, String)>,
    /// Inherited variables the child must not see (storage credentials).
    pub remove_env: Vec<String>,
    pub working_dir: Option<PathBuf>,
    /// The child reads the daemon's standard input (`run --pass-stdin`); otherwise, like
    /// every other program the daemon starts, `/dev/null`.
    pub pass_stdin: bool,
}

impl ChildSpec {
    /// `argv` (the child's command, or a health check's) as a program the daemon starts beside
    /// the child: the child's environment and working directory, no stdin (a background
    /// process group that read the terminal would be stopped by SIGTTIN), a process group of
    /// its own so that signals reach all it starts, and the open-file limit the daemon
    /// inherited. stdout and stderr pass through unless the caller says otherwise.
    pub fn command(&self, argv: &[String]) -> Command {
        let mut command = Command::new(&argv[0]);
        command
            .args(&argv[1..])
            .stdin(Stdio::null())
            .process_group(0);
        for name in &self.remove_env {
            command.env_remove(name);
        }
        command.envs(self.env.iter().map(|(k, v)| (k, v)));
        if let Some(dir) = &self.working_dir {
            command.current_dir(dir);
        }
        // SAFETY: only setrlimit between fork and exec, which is async-signal-safe.
        unsafe {
            command.pre_exec(crate::open_files::restore_inherited_limit);
        }
        command
    }
}

/// A start request for the launcher thread.
struct Job {
    program: Program,
    reply: oneshot::Sender<io::Result<Process>>,
}

/// The thread every child is started from. It lives as long as the daemon, so the children's
/// parent-death signal fires when the daemon dies, not when some pool thread retires. With it,
/// the [`Backstop`] every child's group is armed on.
pub struct Launcher {
    jobs: std::sync::mpsc::Sender<Job>,
    backstop: Backstop,
    /// The program run as the guard: this very binary (`__guard`); none in unit tests, whose
    /// binary is the test harness.
    guard_program: Option<PathBuf>,
    table: ProcessTable,
}

/// How a child is stopped: its stop signal, then SIGKILL of its group `G` later.
#[derive(Debug, Clone, Copy)]
pub struct StopWith {
    pub signal: Signal,
    /// `G`: `[child].stop_timeout`.
    pub grace: Duration,
}

/// Which processes of a group are alive: /proc. In unit tests a group can be pinned alive, to
/// stand for a process stuck in the kernel, which SIGKILL reaches only when it leaves the
/// kernel and which no test can make at will.
#[derive(Clone, Default)]
pub(crate) struct ProcessTable {
    #[cfg(test)]
    pinned: Arc<AtomicBool>,
}

impl ProcessTable {
    fn group_alive(&self, pgid: Pid) -> bool {
        self.pinned() || has_live_member(pgid)
    }

    fn pinned(&self) -> bool {
        #[cfg(test)]
        return self.pinned.load(Ordering::SeqCst);
        #[cfg(not(test))]
        false
    }

    /// While `on`, every group counts as alive whatever it is: it survives SIGKILL.
    #[cfg(test)]
    pub(crate) fn pin(&self, on: bool) {
        self.pinned.store(on, Ordering::SeqCst);
    }
}

/// A child's group that outlived its SIGKILL: the daemon neither hands the lease on nor
/// releases it, nor starts another child, until the group is gone.
#[derive(Clone)]
pub struct StuckGroup {
    pgid: Pid,
    table: ProcessTable,
}

impl StuckGroup {
    pub fn pgid(&self) -> u32 {
        self.pgid.as_raw() as u32
    }

    pub fn is_gone(&self) -> bool {
        !self.table.group_alive(self.pgid)
    }

    /// Resolves once no process of the group is alive (looking every 50 ms). Cancel-safe.
    pub async fn gone(&self) {
        while !self.is_gone() {
            sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Launcher {
    /// Starts the launcher and backstop threads. Fails when the guard program cannot be found:
    /// no child could ever start, and every term would spend an epoch for nothing.
    pub fn start() -> io::Result<Self> {
        let guard_program = PathBuf::from("/proc/self/exe");
        if let Err(e) = std::fs::metadata(&guard_program) {
            return Err(io::Error::new(
                e.kind(),
                format!(
                    "the guard process runs this program as {} ({e}); is /proc mounted?",
                    guard_program.display()
                ),
            ));
        }
        let (jobs, queue) = std::sync::mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("leasehold-launcher".to_owned())
            .spawn(move || {
                for job in queue {
                    // A dropped reply means the requester went away: nobody would supervise
                    // what was started, so it does not run (its collector reaps it).
                    if let Err(Ok(unclaimed)) = job.reply.send(job.program.start()) {
                        let _ = killpg(Pid::from_raw(unclaimed.id() as i32), Signal::SIGKILL);
                    }
                }
            })?;
        Ok(Self {
            jobs,
            backstop: Backstop::start()?,
            guard_program: (!cfg!(test)).then_some(guard_program),
            table: ProcessTable::default(),
        })
    }

    /// The process table its children's groups are looked up in (unit tests pin it).
    #[cfg(test)]
    pub(crate) fn table(&self) -> &ProcessTable {
        &self.table
    }

    async fn spawn(&self, program: Program) -> io::Result<Process> {
        let (reply, answer) = oneshot::channel();
        self.jobs
            .send(Job { program, reply })
            .map_err(|_| io::Error::other("the launcher thread is gone"))?;
        answer
            .await
            .map_err(|_| io::Error::other("the launcher thread is gone"))?
    }

    /// Starts one run of the child, plus its guard; its group is armed on the backstop and on
    /// the guard to die by `kill_at` (on the lease clock) unless [`Child::kill_by`] moves that,
    /// the guard to send `stop`'s signal `G` before.
    pub async fn start_child(
        &self,
        spec: &ChildSpec,
        kill_at: Instant,
        stop: StopWith,
    ) -> io::Result<Child> {
        let argv: Vec<OsString> = spec.command.iter().map(OsString::from).collect();
        let stdin = match spec.pass_stdin {
            true => Stdin::Inherit,
            false => Stdin::Null,
        };
        let dir = spec.working_dir.as_deref();
        let program = Program::new(&argv, &spec.env, &spec.remove_env, dir, stdin)?
            .dies_with(nix::unistd::getpid())
            .hooked();
        let process = self.spawn(program).await?;
        let pid = process.id();
        let pgid = Pid::from_raw(pid as i32);
        let armed = self.backstop.arm(pgid, kill_at);
        let mut child = Child {
            process,
            pgid,
            guard: None,
            armed,
            started: Instant::now(),
            table: self.table.clone(),
        };
        let Some(guard_program) = &self.guard_program else {
            // Unit tests: no hook to wait for.
            child.process.before_reap(Box::new(|| {}));
            return Ok(child);
        };
        // Not the child's environment: the daemon's, without the storage credentials the
        // child does not get either (the guard needs none).
        let guard = async {
            let token = StopToken::new()?;
            let mut argv = vec![
                guard_program.clone().into_os_string(),
                crate::guard::SUBCOMMAND.into(),
            ];
            argv.extend(
                crate::guard::args(pgid, stop.signal, stop.grace, kill_at).map(OsString::from),
            );
            let program = Program::new(&argv, &[], &spec.remove_env, None, Stdin::Pipe)?
                .stdout_null()
                .fd3(token.for_guard()?);
            // Not killed on drop: dropped with its child still running (a term's future
            // dropped), the guard sees its pipe close and kills the group, as for a dead
            // daemon. Once the child is reaped, its exit collector has killed the guard.
            let mut guard = self.spawn(program).await?;
            let orders = guard
                .take_stdin()
                .ok_or_else(|| io::Error::other("no pipe to the guard"))?;
            let link = GuardLink::new(orders)?;
            io::Result::Ok(Guard {
                process: guard,
                link,
                token,
            })
        }
        .await;
        match guard {
            Ok(guard) => {
                // The child's exit collector disarms the guard before it reaps the child: a
                // guard never outlives the group it watches into a reuse of its id.
                let killer = guard.process.killer();
                child.process.before_reap(Box::new(move || {
                    // The leader is a zombie: its group id is still taken.
                    let _ = killpg(pgid, Signal::SIGKILL);
                    killer.kill_and_wait();
                }));
                child.guard = Some(guard);
                Ok(child)
            }
            Err(e) => {
                // Without its guard, a SIGKILLed daemon would leave the child's own children
                // running: the child does not run at all.
                child.process.before_reap(Box::new(|| {}));
                child.signal(Signal::SIGKILL);
                let _ = child.wait().await;
                let _ = child.clear().await;
                Err(io::Error::other(format!(
                    "cannot start its guard process: {e}"
                )))
            }
        }
    }
}

/// A child's guard process and the daemon's end of it.
struct Guard {
    process: Process,
    link: GuardLink,
    token: StopToken,
}

/// One running child and its process group.
pub struct Child {
    process: Process,
    /// The group is the child's own: its pid.
    pgid: Pid,
    /// Taken when the guard is disarmed; None for a child whose guard failed to start, which
    /// is killed before anyone sees it, and in unit tests.
    guard: Option<Guard>,
    /// The group on the backstop; disarmed when this is dropped.
    armed: ArmedGroup,
    started: Instant,
    table: ProcessTable,
}

impl Child {
    pub fn pid(&self) -> u32 {
        self.pgid.as_raw() as u32
    }

    pub fn started(&self) -> Instant {
        self.started
    }

    /// The instant (lease clock) by which the group must be dead: later after a renew, earlier
    /// once the stop began (at `stop_begun`). The guard is told first (unless that is what it
    /// was told last), then the backstop. A guard that cannot be told is lost: the caller stops
    /// the child.
    pub fn kill_by(&mut self, at: Instant, stop_begun: Option<Instant>) -> Result<(), GuardLost> {
        let told = match &mut self.guard {
            Some(guard) => guard.link.tell(at, stop_begun),
            None => Ok(()),
        };
        self.armed.kill_by(at);
        match told {
            // The child's exit collector kills the guard once the child has exited: a guard
            // gone after the child is disarmed, not lost, and the child's exit is what the
            // supervisor sees next (a quick failure, which the crash-loop backoff counts).
            Err(GuardLost::Gone) if self.process.has_exited() => Ok(()),
            told => told,
        }
    }

    /// Takes the stop token: true when this caller is the one to send the stop signal (the
    /// guard has not sent it, and now will not). Without a guard, always.
    pub fn take_stop(&self) -> bool {
        self.guard.as_ref().is_none_or(|g| g.token.take())
    }

    /// Sends `signal` to the child's whole process group.
    pub fn signal(&self, signal: Signal) {
        match killpg(self.pgid, signal) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(e) => {
                tracing::warn!(pgid = self.pgid.as_raw(), %signal, error = %e, "cannot signal the child")
            }
        }
    }

    /// Waits for the group leader to exit. Cancel-safe.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.process.wait().await
    }

    /// After the leader has exited: SIGKILLs what is left of its group, waits until no process
    /// of the group is alive, and disarms the guard. Fails with the group if some process would
    /// not die within 2 s.
    pub async fn clear(mut self) -> Result<(), StuckGroup> {
        let give_up = Instant::now() + Duration::from_secs(2);
        let gone = loop {
            // ESRCH: no process is left in the group, not even a zombie; the backstop lets go
            // of it at the same moment.
            let none_left = self.armed.kill_or_disarm() == Err(Errno::ESRCH);
            // Orphaned grandchildren are reaped by init (or a subreaper), and some are slow:
            // until then they stay zombies, which killpg still finds. A zombie is dead; the
            // lease need not wait for somebody else's reaping.
            if (none_left && !self.table.pinned()) || !self.table.group_alive(self.pgid) {
                break true;
            }
            // As PID 1 (a container without an init) orphans are ours to reap.
            if std::process::id() == 1 {
                reap_group(self.pgid);
            }
            if Instant::now() >= give_up {
                break false;
            }
            sleep(Duration::from_millis(5)).await;
        };
        if !gone {
            tracing::error!(
                pgid = self.pgid.as_raw(),
                "processes of the child's group survive SIGKILL (stuck in the kernel?)"
            );
        }
        if let Some(guard) = self.guard.take() {
            // The child's exit collector killed it before reaping the child; this is for a
            // child whose collector is gone.
            guard.process.start_kill();
        }
        if gone {
            Ok(())
        } else {
            Err(StuckGroup {
                pgid: self.pgid,
                table: self.table.clone(),
            })
        }
    }
}

/// Whether some process of group `pgid` is alive, that is, exists and is not a zombie. Only
/// called while leftovers of a group are being killed, so scanning /proc is rare.
fn has_live_member(pgid: Pid) -> bool {
    live_members(pgid) > 0
}

/// How many processes of group `pgid` are alive (zombies are dead); `usize::MAX` when /proc
/// cannot be read, which must not pass for "none".
pub(crate) fn live_members(pgid: Pid) -> usize {
    let Ok(proc) = std::fs::read_dir("/proc") else {
        return usize::MAX;
    };
    proc.flatten()
        .filter(|entry| {
            entry
                .file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .filter(|entry| {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                return false;
            };
            // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
            let Some(fields) = stat.rfind(')').map(|end| &stat[end + 1..]) else {
                return false;
            };
            let mut fields = fields.split_ascii_whitespace();
            let state = fields.next();
            let group = fields.nth(1).and_then(|g| g.parse::<i32>().ok());
            // Z: a zombie; X: dead, being removed.
            group == Some(pgid.as_raw()) && !matches!(state, Some("Z" | "X"))
        })
        .count()
}

fn reap_group(pgid: Pid) {
    use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
    while let Ok(status) = waitid(Id::PGid(pgid), WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG) {
        if status == WaitStatus::StillAlive {
            break;
        }
    }
}

/// The conventional code for how a process ended: its exit code, or 128 + the signal.
pub fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) const STOP: StopWith = StopWith {
        signal: Signal::SIGTERM,
        grace: Duration::from_secs(5),
    };

    /// A child that runs `command`, with the daemon's environment and no stdin.
    fn spec_of(command: Vec<String>) -> ChildSpec {
        ChildSpec {
            command,
            env: vec![],
            remove_env: vec![],
            working_dir: None,
            pass_stdin: false,
        }
    }

    /// A guard that cannot start (here: its program is missing; in the field: no file
    /// descriptors or processes left) fails the start, and the child that was already forked is
    /// dead with its group before the error is returned.
    #[tokio::test]
    async fn a_child_whose_guard_cannot_start_does_not_run() {
        let mut launcher = Launcher::start().unwrap();
        launcher.guard_program = Some(PathBuf::from("/no/such/guard"));
        // The shell's $0 and its grandchild's argument mark this test's processes in /proc.
        let spec = spec_of(vec![
            "sh".into(),
            "-c".into(),
            "sleep 6543 & wait".into(),
            "unguarded-child".into(),
        ]);
        let far = crate::clock::now() + Duration::from_secs(3600);
        let error = launcher
            .start_child(&spec, far, STOP)
            .await
            .err()
            .expect("the start fails");
        assert!(
            error.to_string().contains("cannot start its guard process"),
            "{error}"
        );
        let survivors = alive_with("unguarded-child", "6543");
        assert!(survivors.is_empty(), "still running: {survivors:?}");
    }

    /// The live processes (not zombies) whose command line holds `marker`, or that run
    /// `sleep seconds`.
    fn alive_with(marker: &str, seconds: &str) -> Vec<String> {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| {
                let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
                let cmdline = String::from_utf8_lossy(&cmdline);
                let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
                (cmdline.contains(marker) || cmdline.split('\0').take(2).eq(["sleep", seconds]))
                    && !stat.contains(") Z ")
            })
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    }

    /// A child that exits at once has its guard killed by its exit collector: telling the
    /// guard its deadlines after that is no lost guard (the supervisor sees the exit, a quick
    /// failure, not a stop for a guard gone).
    #[tokio::test]
    async fn the_guard_of_a_child_that_exited_is_disarmed_not_lost() {
        use std::os::unix::fs::PermissionsExt;
        // A stand-in guard (the daemon's binary is not built for unit tests): it reads its
        // orders until its pipe closes, as the guard does, and is killed as the guard is.
        let dir = tempfile::tempdir().unwrap();
        let stand_in = dir.path().join("guard");
        std::fs::write(&stand_in, "#!/bin/sh\nexec cat >/dev/null\n").unwrap();
        std::fs::set_permissions(&stand_in, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut launcher = Launcher::start().unwrap();
        launcher.guard_program = Some(stand_in);
        let spec = spec_of(vec!["sh".into(), "-c".into(), "exit 1".into()]);
        let far = crate::clock::now() + Duration::from_secs(3600);
        let mut child = launcher.start_child(&spec, far, STOP).await.unwrap();
        let status = child.wait().await.unwrap();
        assert_eq!(exit_code(status), 1, "the child ran and failed");
        let later = far + Duration::from_secs(10);
        assert_eq!(child.kill_by(later, None), Ok(()));
        assert_eq!(child.kill_by(later, Some(crate::clock::now())), Ok(()));
    }

    /// A start whose requester went away before the answer (its future dropped) would run
    /// unsupervised, unguarded and unarmed: the launcher SIGKILLs its group instead.
    #[tokio::test]
    async fn a_start_nobody_waits_for_does_not_run() {
        let launcher = Launcher::start().unwrap();
        let argv: Vec<OsString> = ["sh", "-c", "sleep 6544 & wait", "unclaimed-child"]
            .iter()
            .map(OsString::from)
            .collect();
        let program = || Program::new(&argv, &[], &[], None, Stdin::Null).unwrap();
        let (reply, answer) = oneshot::channel();
        drop(answer);
        launcher
            .jobs
            .send(Job {
                program: program(),
                reply,
            })
            .unwrap();
        // The launcher takes its jobs in turn: once this one is answered, the first is done.
        let mut claimed = launcher.spawn(program()).await.unwrap();
        claimed.start_kill();
        let _ = nix::sys::signal::killpg(Pid::from_raw(claimed.id() as i32), Signal::SIGKILL);
        claimed.wait().await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let alive = alive_with("unclaimed-child", "6544");
            if alive.is_empty() {
                break;
            }
            assert!(Instant::now() < deadline, "still running: {alive:?}");
            sleep(Duration::from_millis(20)).await;
        }
    }

    /// A grandchild orphaned when the child dies is reparented to init, which may be slow to
    /// reap it (here: never; this test process becomes its reaper and does not reap). The
    /// zombie is dead, so the group counts as gone at once.
    #[tokio::test]
    async fn zombies_left_for_a_slow_reaper_do_not_hold_up_the_end_of_a_run() {
        nix::sys::prctl::set_child_subreaper(true).unwrap();
        let launcher = Launcher::start().unwrap();
        let spec = spec_of(vec!["sh".into(), "-c".into(), "sleep 60 & wait".into()]);
        let far = crate::clock::now() + Duration::from_secs(3600);
        let mut child = launcher.start_child(&spec, far, STOP).await.unwrap();
        let pgid = Pid::from_raw(child.pid() as i32);
        // Let the shell start its grandchild (in its group: other tests run `sleep 60` too).
        let deadline = Instant::now() + Duration::from_secs(5);
        while live_members(pgid) < 2 {
            assert!(Instant::now() < deadline, "the grandchild never started");
            sleep(Duration::from_millis(10)).await;
        }
        child.signal(Signal::SIGKILL);
        child.wait().await.unwrap();
        let began = Instant::now();
        assert!(child.clear().await.is_ok(), "the group counts as gone");
        let took = began.elapsed();
        println!("group cleared {took:?} after the leader was reaped, its zombie grandchild left");
        assert!(took < Duration::from_millis(500), "{took:?}");
        assert_eq!(
            killpg(pgid, None),
            Ok(()),
            "the zombie is still there: only its reaper can remove it"
        );
    }
}
