//! What the service manager is told (systemd's `Type=notify`, through the `sd-notify` crate):
//! `READY=1` once the daemon is in the group (it reached storage and took its place in the line
//! of members, or leads), `WATCHDOG=1` while its loop is alive, `STATUS=` with its part, and
//! `STOPPING=1` when it is asked to stop. Without `NOTIFY_SOCKET` in the environment nothing is
//! sent.
//!
//! The watchdog ping is the daemon loop's proof of life, the same as `/healthz`: it is sent only
//! while the loop has made a storage request recently ([`Telemetry::liveness`]), so a loop that
//! is stuck stops the pings and systemd restarts the unit after `WatchdogSec`, however healthy
//! the runtime around it still is.

use crate::telemetry::{Role, Telemetry};
use sd_notify::NotifyState;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The environment the service manager passes: leasehold's, not the child's.
pub(crate) const ENV_VARS: [&str; 3] = ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"];

/// Whether a service manager listens (`NOTIFY_SOCKET` is set), and its watchdog period if it
/// asked for pings (`WATCHDOG_USEC`, for this process).
pub(crate) fn from_env() -> Option<Option<Duration>> {
    std::env::var_os("NOTIFY_SOCKET")?;
    Some(sd_notify::watchdog_enabled())
}

/// Sends the notifications to the service manager (failures are logged once, not retried: the
/// service manager's socket is local, and a missed notification is no reason to stop).
pub(crate) fn send(states: &[NotifyState]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::warn!(error = %e, "cannot notify the service manager (NOTIFY_SOCKET)");
    }
}

/// Keeps the service manager informed until `stopping` is cancelled, then says `STOPPING=1`.
/// `watchdog`: the period the service manager expects pings in; they go out three times per
/// period while the loop is alive.
pub(crate) async fn keep_informed(
    telemetry: Arc<Telemetry>,
    watchdog: Option<Duration>,
    stopping: CancellationToken,
    send: impl Fn(&[NotifyState]),
) {
    let mut presence = telemetry.presence();
    let mut ready = false;
    let mut ping = watchdog.map(|period| {
        let mut every = tokio::time::interval((period / 3).max(Duration::from_millis(100)));
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        every
    });
    loop {
        let now = *presence.borrow_and_update();
        let status = match now.role {
            Role::Starting => "starting: reaching storage".to_owned(),
            Role::Follower if !now.joined => "joining the line of members".to_owned(),
            Role::Follower => "following".to_owned(),
            Role::Leader => "leading".to_owned(),
            Role::SteppingDown => "stepping down: stopping the child".to_owned(),
            Role::CoolingDown => "out of the election for a while".to_owned(),
        };
        if now.joined && !ready {
            ready = true;
            send(&[NotifyState::Ready, NotifyState::Status(&status)]);
        } else {
            send(&[NotifyState::Status(&status)]);
        }
        loop {
            tokio::select! {
                () = stopping.cancelled() => {
                    send(&[NotifyState::Stopping, NotifyState::Status("stopping the child, then handing the lease on")]);
                    return;
                }
                changed = presence.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    break;
                }
                () = tick(&mut ping) => {
                    if telemetry.liveness().is_ok() {
                        send(&[NotifyState::Watchdog]);
                    }
                }
            }
        }
    }
}

/// The next watchdog tick; never, without a watchdog.
async fn tick(ping: &mut Option<tokio::time::Interval>) {
    match ping {
        Some(every) => {
            every.tick().await;
        }
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timing::Timing;
    use std::sync::Mutex;
    use tokio::time::advance;

    /// The notifications, as the service manager would read them, with when they went out.
    #[derive(Default)]
    struct Manager(Mutex<Vec<(Duration, String)>>);

    impl Manager {
        fn said(&self) -> Vec<String> {
            self.0
                .lock()
                .unwrap()
                .iter()
                .map(|(_, s)| s.clone())
                .collect()
        }
    }

    /// READY=1 only once the daemon is in the group; WATCHDOG=1 three times per period while
    /// its loop makes storage requests, none once it stalls; STOPPING=1 when asked to stop.
    #[tokio::test(start_paused = true)]
    async fn ready_once_joined_pings_while_alive_and_stopping_at_the_end() {
        let telemetry = Arc::new(Telemetry::new("a", "c", "b", &Timing::default(), 1));
        let manager = Arc::new(Manager::default());
        let stopping = CancellationToken::new();
        let started = tokio::time::Instant::now();
        let task = tokio::spawn({
            let (telemetry, manager, stopping) =
                (telemetry.clone(), manager.clone(), stopping.clone());
            async move {
                keep_informed(
                    telemetry,
                    Some(Duration::from_secs(60)),
                    stopping,
                    |states| {
                        let text: Vec<String> = states.iter().map(|s| s.to_string()).collect();
                        manager
                            .0
                            .lock()
                            .unwrap()
                            .push((started.elapsed(), text.join(" ")));
                    },
                )
                .await
            }
        });
        // Reaching storage, then following before its member record is in the line.
        telemetry.lease_op(crate::store::Op::Prepare, Duration::ZERO, None);
        telemetry.following();
        advance(Duration::from_secs(1)).await;
        assert!(
            !manager.said().iter().any(|s| s.contains("READY=1")),
            "{:?}",
            manager.said()
        );
        telemetry.line(&crate::elector::members::LineView::default());
        advance(Duration::from_millis(10)).await;
        let ready: Vec<String> = manager
            .said()
            .into_iter()
            .filter(|s| s.contains("READY=1"))
            .collect();
        assert_eq!(ready, ["READY=1 STATUS=following"]);

        // The loop alive (a request every 5 s): a ping every 20 s, three per period.
        let pings = |m: &Manager| m.said().iter().filter(|s| *s == "WATCHDOG=1").count();
        let before = pings(&manager);
        // (Sleeping, not advancing: paused time then stops at each timer on the way.)
        for _ in 0..24 {
            telemetry.lease_op(crate::store::Op::Acquire, Duration::ZERO, None);
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
        let sent = pings(&manager) - before;
        assert!(
            (5..=6).contains(&sent),
            "{sent} in 2 min: {:?}",
            manager.0.lock().unwrap()
        );
        // Stalled: no request for longer than the stall limit (30 s): the pings stop.
        tokio::time::sleep(Duration::from_secs(31)).await;
        let before = pings(&manager);
        tokio::time::sleep(Duration::from_secs(120)).await;
        assert_eq!(pings(&manager), before, "{:?}", manager.said());

        stopping.cancel();
        task.await.unwrap();
        assert!(
            manager.said().last().unwrap().starts_with("STOPPING=1"),
            "{:?}",
            manager.said()
        );
    }
}
