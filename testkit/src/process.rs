//! Starting the processes a test owns (Azurite, etcd, daemons) so that they die with it, running
//! a command to its end within a time limit, and judging a one-shot command that ought to
//! refuse its input.

use crate::wait::wait_until;
use nix::sys::signal::Signal;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// Spawns `command` so that it dies with this process, however this process ends (a test run
/// or a benchmark killed with SIGKILL leaves no Azurite and no daemon behind). The parent-death
/// signal fires when the *thread* that forked the child exits, and tests, the chaos command and
/// the benchmark start processes from threads that come and go; so every such child is forked
/// by one thread that lives as long as the process, the way the daemon forks its own children.
pub fn spawn_tied_to_this_process(mut command: Command) -> std::io::Result<Child> {
    use std::os::unix::process::CommandExt;
    use std::sync::mpsc::{Sender, channel};
    use std::sync::{Mutex, OnceLock};
    type Job = (Command, Sender<std::io::Result<Child>>);
    static LAUNCHER: OnceLock<Mutex<Sender<Job>>> = OnceLock::new();
    let launcher = LAUNCHER.get_or_init(|| {
        let (jobs, queue) = channel::<Job>();
        std::thread::spawn(move || {
            for (mut command, reply) in queue {
                let _ = reply.send(command.spawn());
            }
        });
        Mutex::new(jobs)
    });
    let parent = nix::unistd::getpid();
    // SAFETY: between fork and exec, only prctl and getppid, which are async-signal-safe.
    unsafe {
        command.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)?;
            if nix::unistd::getppid() != parent {
                return Err(std::io::Error::from(nix::errno::Errno::ESRCH));
            }
            Ok(())
        });
    }
    let (reply, answer) = channel();
    launcher
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((command, reply))
        .map_err(|_| std::io::Error::other("the launcher thread is gone"))?;
    answer
        .recv()
        .map_err(|_| std::io::Error::other("the launcher thread is gone"))?
}

/// Starts a server `command` tied to this process (what: its name, for the panic if it cannot
/// be run at all) and waits up to `timeout` until `ready`: the process, once ready and still
/// running; None, the process killed and reaped, if it exited first (another took its port,
/// say) or never got ready.
pub fn spawn_until_ready(
    command: Command,
    what: &str,
    timeout: Duration,
    mut ready: impl FnMut() -> bool,
) -> Option<Child> {
    let mut process =
        spawn_tied_to_this_process(command).unwrap_or_else(|e| panic!("start {what}: {e}"));
    let ready = wait_until(timeout, || {
        process.try_wait().ok().flatten().is_some() || ready()
    });
    if ready && process.try_wait().ok().flatten().is_none() {
        Some(process)
    } else {
        let _ = process.kill();
        let _ = process.wait();
        None
    }
}

/// How a command refuses bad input: exit 2 and one line on stderr naming `needle`, never a
/// panic or a backtrace. `name` labels the case in a failure.
pub fn assert_refused(name: &str, out: &Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "{name}: one line: {stderr}"
    );
    assert!(
        stderr.contains(needle),
        "{name}: should name {needle:?}: {stderr}"
    );
    assert!(
        !stderr.contains("panicked") && !stderr.contains("backtrace"),
        "{name}: {stderr}"
    );
}

/// No secret, and not even its first 12 characters, in `output` (a log, a command's output);
/// `name` says whose it is.
pub fn assert_no_secret(name: &str, output: &str, secrets: &[&str]) {
    for secret in secrets {
        assert!(
            !output.contains(secret) && !output.contains(&secret[..12]),
            "{name}: a secret ({}...) is in the output:\n{output}",
            &secret[..4]
        );
    }
}

/// [`assert_refused`] for input the command might wrongly accept (a daemon would then wait for
/// storage): it must end within 10 s, or it is killed and the case fails. Returns its stderr.
pub fn assert_refused_within(name: &str, command: Command, needle: &str) -> String {
    let (out, ended) = output_within(command, Duration::from_secs(10));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        ended,
        "{name}: accepted, still running after 10 s: {stderr}"
    );
    assert_refused(name, &out, needle);
    stderr
}

/// Runs `command` (a [`leasehold_command`](crate::leasehold_command), set up further) for at
/// most `timeout`, as [`leasehold_within`](crate::leasehold_within) does: its output, and
/// whether it ended in time (if not, it was killed).
pub fn output_within(command: Command, timeout: Duration) -> (Output, bool) {
    output_within_fed(command, None, timeout)
}

/// [`output_within`], with `input` written to the command's stdin (then closed).
pub fn output_within_fed(
    mut command: Command,
    input: Option<&[u8]>,
    timeout: Duration,
) -> (Output, bool) {
    if input.is_some() {
        command.stdin(Stdio::piped());
    }
    let mut process = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run leasehold");
    if let Some(input) = input {
        use std::io::Write;
        let mut stdin = process.stdin.take().expect("piped stdin");
        stdin.write_all(input).expect("write the command's stdin");
    }
    let ended = wait_until(timeout, || process.try_wait().unwrap().is_some());
    if !ended {
        let _ = process.kill();
    }
    (process.wait_with_output().unwrap(), ended)
}
