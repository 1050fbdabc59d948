//! Starting the processes a test owns (Azurite, daemons) so that they die with it.

use nix::sys::signal::Signal;
use std::process::{Child, Command};

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
