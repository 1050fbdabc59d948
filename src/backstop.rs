//! The backstop: a thread of its own that SIGKILLs a running child's process group at its kill
//! instant, whatever the rest of the daemon is doing.
//!
//! The supervisor enforces the deadlines with tokio's timers, which fire only when a runtime
//! worker is free to run them. Were every worker stuck (a blocking call where none belongs, a
//! bug), the child would outlive its lease. So the backstop holds each running child's process
//! group and the instant by which the group must be dead: the kill deadline `t_s + L - M`, moved
//! by the supervisor on every renew, and brought forward to `stop signal + G` when the stop
//! signal goes out. At that instant, on the lease clock, it kills the group. It shares its lock
//! with nothing that does I/O, and logs only after it has killed. The supervisor still kills at
//! the same instant on its own; the second SIGKILL is harmless.
//!
//! Process group ids are process ids, and the kernel hands a free one out again. A group is
//! disarmed once no process of it is left; the check that finds it gone and the disarming happen
//! under the lock the kills take, so the backstop cannot SIGKILL a newcomer that got the same id
//! (see [`ArmedGroup::kill_or_disarm`]). One window is left: the leader's exit collector reaps
//! it before the supervisor's wait for it returns, and a group that had no other member is gone
//! from that moment until `Child::clear` disarms it a few instructions later. Linux hands out
//! process ids in turn, so a freed one comes back only after the counter has gone round
//! `pid_max`.

use crate::clock::{self, SUSPEND_POLL};
use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::io;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use tokio::time::Instant;

/// The backstop thread's handle; the thread ends when it is dropped.
pub struct Backstop {
    shared: Arc<Shared>,
}

struct Shared {
    armed: Mutex<Armed>,
    /// Signalled when a group is armed, moved or disarmed, and at the end.
    changed: Condvar,
}

#[derive(Default)]
struct Armed {
    next_id: u64,
    groups: Vec<Group>,
    /// The [`Backstop`] is gone: the thread ends.
    closed: bool,
}

struct Group {
    id: u64,
    pgid: Pid,
    /// On the lease clock ([`crate::clock`]).
    kill_at: Instant,
    /// SIGKILL sent; the group only has to be reaped now.
    fired: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Armed> {
        // Nothing panics while holding it; if it ever did, the state is still whole.
        self.armed.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Backstop {
    pub fn start() -> io::Result<Self> {
        let shared = Arc::new(Shared {
            armed: Mutex::new(Armed::default()),
            changed: Condvar::new(),
        });
        let thread = shared.clone();
        std::thread::Builder::new()
            .name("leasehold-backstop".to_owned())
            .spawn(move || run(&thread))?;
        Ok(Self { shared })
    }

    /// Watches the group `pgid`: it is SIGKILLed at `kill_at` unless moved or disarmed first.
    pub fn arm(&self, pgid: Pid, kill_at: Instant) -> ArmedGroup {
        let mut armed = self.shared.lock();
        let id = armed.next_id;
        armed.next_id += 1;
        armed.groups.push(Group {
            id,
            pgid,
            kill_at,
            fired: false,
        });
        drop(armed);
        self.shared.changed.notify_one();
        ArmedGroup {
            shared: self.shared.clone(),
            id,
            pgid,
        }
    }
}

impl Drop for Backstop {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.changed.notify_one();
    }
}

/// The thread: sleeps until the earliest kill instant, kills what is due, and again.
fn run(shared: &Shared) {
    let mut armed = shared.lock();
    loop {
        if armed.closed {
            return;
        }
        let now = clock::now();
        let mut killed = 0;
        for group in armed.groups.iter_mut().filter(|g| !g.fired) {
            if now >= group.kill_at {
                let _ = killpg(group.pgid, Signal::SIGKILL);
                group.fired = true;
                killed += 1;
            }
        }
        if killed > 0 {
            // Logging never blocks (crate::logging), but it is not needed for anything above.
            drop(armed);
            tracing::debug!(groups = killed, "kill instant reached: SIGKILL (backstop)");
            armed = shared.lock();
            continue;
        }
        let next = armed
            .groups
            .iter()
            .filter(|g| !g.fired)
            .map(|g| g.kill_at)
            .min();
        armed = match next {
            None => shared
                .changed
                .wait(armed)
                .unwrap_or_else(|e| e.into_inner()),
            Some(at) => {
                // Condvar timeouts count CLOCK_MONOTONIC, which stands still while the machine
                // is suspended: re-read the lease clock at least every SUSPEND_POLL.
                let wait = clock::timer_instant(at)
                    .saturating_duration_since(Instant::now())
                    .min(SUSPEND_POLL);
                shared
                    .changed
                    .wait_timeout(armed, wait)
                    .unwrap_or_else(|e| e.into_inner())
                    .0
            }
        };
    }
}

/// One watched process group. Dropping it disarms the backstop for the group.
pub struct ArmedGroup {
    shared: Arc<Shared>,
    id: u64,
    pgid: Pid,
}

impl ArmedGroup {
    /// Moves the instant by which the group must be dead: later after a renew, earlier when the
    /// stop signal went out. An instant already passed kills at once; a group already killed
    /// stays killed.
    pub fn kill_by(&self, at: Instant) {
        let mut armed = self.shared.lock();
        let Some(group) = armed.groups.iter_mut().find(|g| g.id == self.id) else {
            return;
        };
        if group.kill_at == at {
            return;
        }
        group.kill_at = at;
        drop(armed);
        self.shared.changed.notify_one();
    }

    /// SIGKILLs the group now. `Err(ESRCH)` means no process of it is left, zombies included:
    /// then the group is disarmed in the same critical section, before its id can be reused,
    /// and the backstop will never signal that id again.
    pub fn kill_or_disarm(&self) -> Result<(), Errno> {
        let mut armed = self.shared.lock();
        let result = killpg(self.pgid, Signal::SIGKILL);
        if result == Err(Errno::ESRCH) {
            armed.groups.retain(|g| g.id != self.id);
        }
        result
    }
}

impl Drop for ArmedGroup {
    /// Called once the group is gone (or, after `kill_or_disarm` gave up on processes that
    /// survive SIGKILL, which keep the id taken): nothing of it is left to kill.
    fn drop(&mut self) {
        self.shared.lock().groups.retain(|g| g.id != self.id);
        self.shared.changed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::child::{ChildSpec, Launcher, StopWith, live_members};
    use std::time::Duration;

    const STOP: StopWith = StopWith {
        signal: Signal::SIGTERM,
        grace: Duration::from_secs(5),
    };

    /// A child with a grandchild in its group.
    fn sleepers() -> ChildSpec {
        ChildSpec {
            command: vec!["sh".into(), "-c".into(), "sleep 60 & wait".into()],
            env: vec![],
            remove_env: vec![],
            working_dir: None,
            pass_stdin: false,
        }
    }

    /// Polls, blocking the calling thread, every millisecond until `cond` holds; returns when.
    fn blocking_wait(limit: Duration, cond: impl Fn() -> bool) -> Option<std::time::Instant> {
        let until = std::time::Instant::now() + limit;
        while std::time::Instant::now() < until {
            if cond() {
                return Some(std::time::Instant::now());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        None
    }

    /// The runtime's only worker is blocked (this test's body sleeps in blocking calls): no tokio
    /// timer fires, nothing is reaped. The backstop kills the child and its grandchild at their
    /// kill instant all the same.
    #[tokio::test]
    async fn the_backstop_kills_on_time_while_the_runtime_is_blocked() {
        let launcher = Launcher::start().unwrap();
        let kill_at = clock::now() + Duration::from_millis(500);
        let child = launcher
            .start_child(&sleepers(), kill_at, STOP)
            .await
            .unwrap();
        let pgid = Pid::from_raw(child.pid() as i32);
        // From here on, this thread never yields to the runtime until the group is dead.
        assert!(
            blocking_wait(Duration::from_secs(5), || live_members(pgid) == 2).is_some(),
            "the child and its grandchild run"
        );
        let dead = blocking_wait(Duration::from_secs(5), || live_members(pgid) == 0)
            .expect("the group was killed");
        let kill_at = kill_at.into_std();
        println!(
            "group dead {:?} after its kill instant, with the runtime blocked (bound 100 ms)",
            dead.saturating_duration_since(kill_at)
        );
        assert!(dead >= kill_at, "killed {:?} early", kill_at - dead);
        assert!(dead - kill_at <= Duration::from_millis(100));
        assert!(child.clear().await.is_ok());
    }

    /// A renew moves the instant later, and the stop signal brings it forward. (The first
    /// instant is 3 s away so that a loaded machine renews before it; the kill is then due at
    /// once, and the bound below it is what a loaded machine takes to kill a group.)
    #[tokio::test]
    async fn the_kill_instant_moves_with_the_lease() {
        let launcher = Launcher::start().unwrap();
        let first = clock::now() + Duration::from_secs(3);
        let mut child = launcher
            .start_child(&sleepers(), first, STOP)
            .await
            .unwrap();
        let pgid = Pid::from_raw(child.pid() as i32);
        let _ = child.kill_by(clock::now() + Duration::from_secs(60), None);
        assert!(clock::now() < first, "renewed before the first instant");
        clock::sleep_until(first + Duration::from_millis(500)).await;
        assert!(live_members(pgid) >= 1, "renewed: still running");

        let kill_at = clock::now() + Duration::from_millis(100);
        let _ = child.kill_by(kill_at, None);
        let dead = blocking_wait(Duration::from_secs(5), || live_members(pgid) == 0)
            .expect("the group was killed");
        let late = dead.saturating_duration_since(kill_at.into_std());
        println!("brought forward: group dead {late:?} after its new kill instant (bound 250ms)");
        assert!(late <= Duration::from_millis(250));
        assert!(child.clear().await.is_ok());
    }
}
