//! `leasehold run`: wires the elector, the child supervisor and the signals together, and owns
//! the order of things at the end of a term and at shutdown.
//!
//! The loop is deliberately sequential: campaign -> keep the lease while the supervisor runs the
//! child -> (child and group dead) -> stop renewing -> release. Because release comes after
//! `run_term` returns, and `run_term` returns only once the child's group is gone, the lease is
//! never given up while the child lives (rule 7), and a new term never starts while an old
//! child lives.

use crate::child::{ChildSpec, Launcher};
use crate::config::Settings;
use crate::elector::{CampaignError, Elector, Tenure};
use crate::store::{Failure, LeaseStore, StoreError};
use crate::supervisor::{Controls, Supervisor, TermEnd};
use crate::telemetry::{LeaseOp, Telemetry};
use nix::sys::signal::Signal;
use std::sync::Arc;
use std::time::Duration;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// How the daemon ended; `main` turns it into the process exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// SIGTERM/SIGINT handled: child stopped, lease released.
    Clean,
    /// `on_exit = "exit"`: the child's code (128 + signal when it was killed).
    Child(i32),
}

/// Why the daemon could not run at all. Each maps to a documented exit code.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// Exit 3: storage refused the credentials or their permissions at start-up.
    #[error("storage refused the credentials at start-up ({0}); {hint}", hint = .0.denied_hint())]
    Denied(StoreError),
    /// Exit 2: the container or blob is missing and `create_if_missing = false`.
    #[error("{0}")]
    Missing(String),
    /// Exit 2: something of the host is unusable (signal handlers, threads).
    #[error("{0}")]
    Setup(String),
}

/// Runs the daemon until a shutdown request or, with `on_exit = "exit"`, until the child exits.
pub async fn run<S: LeaseStore>(
    settings: &Settings,
    store: Arc<S>,
    mut controls: Controls,
) -> Result<Exit, DaemonError> {
    let telemetry = Arc::new(Telemetry::new(
        &settings.identity,
        &settings.storage.container,
        &settings.storage.blob,
        &settings.timing,
    ));
    // Bound before anything else, so that a taken port is a start-up error (exit 2), not a
    // surprise later. The task is aborted when `run` returns.
    let _http = match settings.http_listen {
        Some(addr) => {
            let listener = bind(addr)?;
            let limits = crate::http::Limits::for_this_process();
            if limits.max_connections < crate::open_files::MAX_HTTP_CONNECTIONS / 4 {
                tracing::warn!(
                    open_file_limit = crate::open_files::limit(),
                    "the open-file limit leaves room for only {} connections to the HTTP \
                     endpoint; raise it (LimitNOFILE=, ulimit -n)",
                    limits.max_connections
                );
            }
            Some(AbortOnDrop(tokio::spawn(crate::http::serve(
                listener,
                telemetry.clone(),
                limits,
            ))))
        }
        None => None,
    };
    let launcher = Launcher::start()
        .map_err(|e| DaemonError::Setup(format!("cannot prepare to start the child: {e}")))?;
    let supervisor = Supervisor {
        launcher: &launcher,
        telemetry: &telemetry,
        stop_signal: settings.child.stop_signal,
        stop_timeout: settings.timing.stop_timeout,
        on_exit: settings.child.on_exit,
        restart_limit: settings.child.restart_limit,
        health: settings.child.health.clone(),
    };
    let identity = settings.identity.as_str();
    tracing::info!(
        identity,
        container = %settings.storage.container,
        blob = %settings.storage.blob,
        endpoint = %settings.storage.endpoint,
        credential = %settings.storage.credential.describe(),
        "leasehold starting"
    );
    for warning in &settings.warnings {
        tracing::warn!("{warning}");
    }

    if !prepare(settings, store.as_ref(), &telemetry, &controls.shutdown).await? {
        return Ok(Exit::Clean);
    }
    telemetry.following();
    let mut elector = Elector::new(
        store,
        settings.identity.clone(),
        settings.timing,
        settings.storage.create_if_missing,
        telemetry.clone(),
    );
    loop {
        let campaign = elector.campaign(&controls.shutdown).await;
        let Some(term) = campaign.map_err(|CampaignError::Denied(e)| DaemonError::Denied(e))?
        else {
            tracing::info!(identity, "stopped as a follower");
            return Ok(Exit::Clean);
        };
        tracing::info!(identity, epoch = term.epoch, "acquired leadership");
        telemetry.acquired(term.epoch, term.acquired_at, term.deadline);
        let keeper = elector.keep(&term);
        let spec = child_spec(settings, term.epoch);
        let end = supervisor
            .run_term(&spec, term.epoch, keeper.tenure(), &mut controls)
            .instrument(crate::elector::term_span(identity, term.epoch))
            .await;
        // The child and its group are gone: only now may the lease go (rule 7).
        telemetry.stepping_down();
        let last = keeper.stop().await;
        let released = match (end, last) {
            (TermEnd::Lost, _) | (_, Tenure::Lost(_)) => false,
            _ => elector.release(term.lease).await,
        };
        telemetry.term_ended();
        let epoch = term.epoch;
        match end {
            TermEnd::Released => tracing::info!(
                identity,
                epoch,
                released,
                "released leadership: the child exited"
            ),
            TermEnd::Exit(code) => tracing::info!(
                identity,
                epoch,
                released,
                code,
                "released leadership: the child exited; exiting with its code"
            ),
            TermEnd::Lost => tracing::info!(
                identity,
                epoch,
                "lost leadership: the lease is no longer ours"
            ),
            TermEnd::Expired => tracing::info!(
                identity,
                epoch,
                released,
                "lost leadership: no renew succeeded before the stop deadline"
            ),
            TermEnd::Shutdown => tracing::info!(
                identity,
                epoch,
                released,
                "released leadership: shutting down"
            ),
            TermEnd::Unhealthy => {
                tracing::info!(identity, epoch, released, "stepped down: child unhealthy")
            }
        }
        match end {
            TermEnd::Shutdown => return Ok(Exit::Clean),
            TermEnd::Exit(code) => return Ok(Exit::Child(code)),
            TermEnd::Released => {
                // Give the other instances a fair chance before competing again.
                tokio::select! {
                    () = sleep(elector.yield_interval()) => {}
                    () = controls.shutdown.cancelled() => return Ok(Exit::Clean),
                }
            }
            TermEnd::Unhealthy => {
                // Stay out long enough that a healthy follower wins the lease.
                let cooldown = settings
                    .child
                    .health
                    .as_ref()
                    .map_or(Duration::ZERO, |h| h.cooldown);
                tracing::info!(
                    identity,
                    "staying out of the election for {}",
                    crate::human(cooldown)
                );
                telemetry.cooling_down(Instant::now() + cooldown);
                tokio::select! {
                    () = sleep(cooldown) => {}
                    () = controls.shutdown.cancelled() => return Ok(Exit::Clean),
                }
                telemetry.following();
            }
            TermEnd::Expired => {
                // No renew succeeded: storage is down for everyone, or slow or unreachable for
                // this instance alone. Nobody can take the lease before the last successful send
                // + L (the server's lease runs at least that long), so staying out until then
                // costs nothing in the first case, and in the second gives a healthy follower the
                // lease instead of this instance winning it back at once, only to lose it again.
                // (A renew that reached storage without its answer reaching us makes the lease
                // last longer; the release just sent ends it, or it expires unrenewed L after
                // that renew.)
                let rejoin = last.deadline().sent + settings.timing.duration;
                let wait = rejoin.saturating_duration_since(crate::clock::now());
                tracing::info!(
                    identity,
                    "staying out of the election until the lease this instance last renewed has surely expired, for {}",
                    crate::human(wait)
                );
                telemetry.cooling_down(crate::clock::timer_instant(rejoin));
                tokio::select! {
                    () = crate::clock::sleep_until(rejoin) => {}
                    () = controls.shutdown.cancelled() => return Ok(Exit::Clean),
                }
                telemetry.following();
            }
            TermEnd::Lost => {}
        }
    }
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn bind(addr: std::net::SocketAddr) -> Result<tokio::net::TcpListener, DaemonError> {
    std::net::TcpListener::bind(addr)
        .and_then(|l| {
            l.set_nonblocking(true)?;
            tokio::net::TcpListener::from_std(l)
        })
        .map_err(|e| DaemonError::Setup(format!("cannot listen on [http].listen = {addr}: {e}")))
}

/// The child of one term: the configured command, `[child].env`, what the child learns of its
/// leadership (design section 3), and no storage credentials.
fn child_spec(settings: &Settings, epoch: u64) -> ChildSpec {
    let mut env: Vec<(String, String)> = settings
        .child
        .env
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    env.extend([
        ("LEASEHOLD_IDENTITY".to_owned(), settings.identity.clone()),
        ("LEASEHOLD_EPOCH".to_owned(), epoch.to_string()),
        (
            "LEASEHOLD_CONTAINER".to_owned(),
            settings.storage.container.clone(),
        ),
        ("LEASEHOLD_BLOB".to_owned(), settings.storage.blob.clone()),
    ]);
    ChildSpec {
        command: settings.child.command.clone(),
        env,
        remove_env: settings.child.remove_env.clone(),
        working_dir: settings.child.working_dir.clone(),
    }
}

/// Makes sure the container and blob exist before the first campaign. Refused credentials and a
/// missing blob that may not be created end the daemon; an unreachable service is retried.
/// Returns false when shutdown was requested meanwhile.
async fn prepare<S: LeaseStore>(
    settings: &Settings,
    store: &S,
    telemetry: &Telemetry,
    shutdown: &CancellationToken,
) -> Result<bool, DaemonError> {
    let target = &settings.storage;
    let mut backoff = crate::backoff(Duration::from_secs(1), Duration::from_secs(10));
    loop {
        let started = Instant::now();
        let limit = settings
            .timing
            .request_timeout()
            .max(Duration::from_secs(5));
        let result =
            match tokio::time::timeout(limit, store.prepare(target.create_if_missing)).await {
                Ok(r) => r,
                Err(_) => Err(StoreError::TimedOut(limit)),
            };
        telemetry.lease_op(LeaseOp::Prepare, started.elapsed(), result.as_ref().err());
        let error = match result {
            Ok(()) => return Ok(true),
            Err(e) => e,
        };
        match error.failure() {
            Failure::Denied => return Err(DaemonError::Denied(error)),
            Failure::Missing => {
                return Err(DaemonError::Missing(format!(
                    "{} {:?} does not exist and [storage].create_if_missing = false; create it, \
                     or set create_if_missing = true",
                    if error.code() == Some("ContainerNotFound") {
                        "container"
                    } else {
                        "blob"
                    },
                    if error.code() == Some("ContainerNotFound") {
                        &target.container
                    } else {
                        &target.blob
                    },
                )));
            }
            _ => {}
        }
        let pause = backoff.next().unwrap_or(Duration::from_secs(10));
        tracing::warn!(
            error = %error,
            endpoint = %target.endpoint,
            "cannot reach the lease blob; retrying in {}",
            crate::human(pause)
        );
        tokio::select! {
            () = sleep(pause) => {}
            () = shutdown.cancelled() => return Ok(false),
        }
    }
}

/// Turns the process's signals into [`Controls`]: the first SIGTERM/SIGINT asks for a clean
/// stop, a second one for an immediate SIGKILL of the child; SIGHUP/SIGUSR1/SIGUSR2 are queued
/// for the child.
pub fn signal_controls() -> std::io::Result<Controls> {
    let shutdown = CancellationToken::new();
    let hurry = CancellationToken::new();
    let (tx, forward) = mpsc::channel(16);
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut hup = signal(SignalKind::hangup())?;
    let mut usr1 = signal(SignalKind::user_defined1())?;
    let mut usr2 = signal(SignalKind::user_defined2())?;
    let (s, h) = (shutdown.clone(), hurry.clone());
    tokio::spawn(async move {
        loop {
            let stop = tokio::select! {
                _ = term.recv() => Some(Signal::SIGTERM),
                _ = int.recv() => Some(Signal::SIGINT),
                _ = hup.recv() => { let _ = tx.try_send(Signal::SIGHUP); None }
                _ = usr1.recv() => { let _ = tx.try_send(Signal::SIGUSR1); None }
                _ = usr2.recv() => { let _ = tx.try_send(Signal::SIGUSR2); None }
            };
            // Act first, log afterwards: logging never blocks, and nothing waits on it anyway.
            if let Some(sig) = stop {
                if s.is_cancelled() {
                    h.cancel();
                    tracing::warn!(%sig, "second stop signal: killing the child now");
                } else {
                    s.cancel();
                    tracing::info!(%sig, "stop requested: stopping the child, then releasing the lease");
                }
            }
        }
    });
    Ok(Controls {
        shutdown,
        hurry,
        forward,
    })
}
