//! `leasehold run`: wires the elector, the child supervisor and the signals together, and owns
//! the order of things at the end of a term and at shutdown.
//!
//! The loop is deliberately sequential: campaign -> keep the lease while the supervisor runs the
//! child -> (child and group dead) -> stop renewing -> release. Because release comes after
//! `run_term` returns, and `run_term` returns only once the child's group is gone, the lease is
//! never given up while the child lives (rule 7), and a new term never starts while an old
//! child lives.
//!
//! A one-shot run ([`Candidacy::OneTerm`]: `--try`, `--timeout`, the one-liner) goes through
//! the same loop for one term at most: its campaign gives up when its patience runs out, and
//! the daemon exits after that term whatever ended it.

use crate::child::{ChildSpec, Launcher};
use crate::config::Settings;
use crate::elector::{self, Body, Elector, Error as ElectorError, Finish, Tenure, Term, TermEnd};
use crate::store::LeaseStore;
use crate::supervisor::{Controls, Pauses, Supervisor};
use crate::telemetry::Telemetry;
use nix::sys::signal::Signal;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// How `run` stands for election.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Candidacy {
    /// Term after term, until a stop signal: the daemon.
    Standing,
    /// One term at most (`--try`, `--timeout`, the one-liner): campaign for at most `patience`
    /// (`Some(ZERO)`: one attempt; `None`: until a stop signal), run the child once, exit.
    OneTerm {
        /// How long the campaign may last, from the start.
        patience: Option<Duration>,
    },
}

/// How the daemon ended; `main` turns it into the process exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// SIGTERM/SIGINT handled: child stopped, lease released.
    Clean,
    /// `on_exit = "exit"`: the child's code (128 + signal when it was killed).
    Child(i32),
    /// One term only, stopped by this signal (SIGTERM/SIGINT): child stopped (if it ran), lease
    /// released.
    Stopped(Signal),
    /// One term only: the campaign gave up; the child never ran. Why the last attempt failed, or
    /// `None` when another instance held the lease.
    NotElected(Option<String>),
    /// One term only: the term ended before the child did (the lease was lost, or could not be
    /// renewed in time, or the child failed its health checks); the child was stopped.
    CutShort(String),
}

/// Why the daemon could not run at all. Each maps to a documented exit code.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// What the elector could not get past: refused credentials (exit 3), a missing container or
    /// blob with `create_if_missing = false` (exit 2).
    #[error(transparent)]
    Elector(#[from] ElectorError),
    /// Exit 2: something of the host is unusable (signal handlers, threads).
    #[error("{0}")]
    Setup(String),
    /// Exit 2: `[http].listen` cannot be bound (the port is taken, the address is not this
    /// host's). The command names where the address came from (the file, the flag, the
    /// variable).
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// Runs the daemon until a shutdown request or, with `on_exit = "exit"`, until the child exits;
/// as a candidate for one term, until that term (or the campaign for it) ends. `store` is the
/// group's account (with `[[storage.replica]]`, the first replica's), `replicas` the others' in
/// the set's order (none for one account).
pub async fn run<S: LeaseStore>(
    settings: &Settings,
    store: Arc<S>,
    replicas: Vec<Arc<S>>,
    mut controls: Controls,
    candidacy: Candidacy,
) -> Result<Exit, DaemonError> {
    let telemetry = Arc::new(
        Telemetry::new(
            &settings.group.identity,
            &settings.group.storage.container,
            &settings.group.storage.blob,
            &settings.group.timing,
            settings.group.slots,
        )
        .with_replicas(settings.group.replicas.len()),
    );
    // systemd's Type=notify: told when this instance is in the group, pinged while its loop
    // lives, told when it stops.
    let _notify = crate::notify::from_env().map(|watchdog| {
        AbortOnDrop(tokio::spawn(crate::notify::keep_informed(
            telemetry.clone(),
            watchdog,
            controls.shutdown.clone(),
            crate::notify::send,
        )))
    });
    // Bound before anything else, so that a taken port is a start-up error (exit 2), not a
    // surprise later. The task is aborted when `run` returns.
    let listener = match settings.group.http_listen {
        Some(addr) => Some(bind(addr)?),
        None => None,
    };
    let mut election = settings.group.election.clone();
    if settings.group.advertise_auto
        && let Some(listener) = &listener
    {
        election.advertise = advertise_auto(listener, &settings.group.storage.endpoint);
    }
    let mut elector = Elector::new(
        store.clone(),
        settings.group.identity.clone(),
        settings.group.timing,
        settings.group.storage.create_if_missing,
        telemetry.clone(),
    )
    .with_election(election)
    .with_slots(settings.group.slots);
    if let Some(set) = crate::config::replica_set(&settings.group.replicas) {
        elector = elector.on_replicas(set, replicas);
    }
    let _http = match listener {
        Some(listener) => {
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
                elector.waker(),
                limits,
            ))))
        }
        None => None,
    };
    let launcher = Launcher::start()
        .map_err(|e| DaemonError::Setup(format!("cannot prepare to start the child: {e}")))?;
    // [kubernetes]: the pod label that says whether this instance leads. An API that cannot
    // be reached at all is a start-up error; a patch that fails later is only retried.
    #[cfg(feature = "kubernetes")]
    let pod_label = match &settings.kubernetes {
        Some(label) => Some(
            crate::kubernetes::KeptLabel::start(label, telemetry.presence())
                .await
                .map_err(|e| DaemonError::Setup(e.to_string()))?,
        ),
        None => None,
    };
    let supervisor = Supervisor {
        launcher: &launcher,
        telemetry: &telemetry,
        stop_signal: settings.child.stop_signal,
        stop_timeout: settings.group.timing.stop_timeout,
        on_exit: settings.child.on_exit,
        restart_limit: settings.child.restart_limit,
        health: settings.child.health.clone(),
        crash_backoff: settings.child.crash_backoff,
        crash_loop: Default::default(),
        stuck: Default::default(),
    };
    let identity = settings.group.identity.as_str();
    tracing::info!(
        identity,
        container = %settings.group.storage.container,
        blob = %settings.group.storage.blob,
        endpoint = %settings.group.storage.endpoint,
        credential = %settings.group.storage.credential.describe(),
        "leasehold starting"
    );
    for warning in &settings.group.warnings {
        tracing::warn!("{warning}");
    }

    // A one-term campaign gives up when this is cancelled: at once for `--try` (one attempt),
    // after the patience of `--timeout`, and on shutdown.
    let give_up = match candidacy {
        Candidacy::Standing => None,
        Candidacy::OneTerm { .. } => Some(controls.shutdown.child_token()),
    };
    let _patience = match (candidacy, &give_up) {
        (Candidacy::OneTerm { patience: Some(p) }, Some(give_up)) if p.is_zero() => {
            give_up.cancel();
            None
        }
        (Candidacy::OneTerm { patience: Some(p) }, Some(give_up)) => {
            let give_up = give_up.clone();
            Some(AbortOnDrop(tokio::spawn(async move {
                tokio::time::sleep(p).await;
                give_up.cancel();
            })))
        }
        _ => None,
    };
    let stopped = |controls: &Controls| match (give_up.is_some(), controls.stopped_by.get()) {
        (true, Some(signal)) => Exit::Stopped(*signal),
        _ => Exit::Clean,
    };

    // Storage that cannot be reached is retried until shutdown, or until a one-term campaign
    // gives up (`--try`: one attempt).
    let retry_until = match &give_up {
        Some(give_up) if give_up.is_cancelled() => None,
        Some(give_up) => Some(give_up),
        None => Some(&controls.shutdown),
    };
    // A replica set's blobs are the campaign's to create, each stamped for the set and under
    // its lock-delay (docs/quorum.md); one account's are made sure of first.
    let prepared = match settings.group.replicas.is_empty() {
        true => {
            let group = (settings.group.identity.as_str(), settings.group.slots);
            let (storage, timing) = (&settings.group.storage, &settings.group.timing);
            let clock = crate::clock::Clock::Host;
            elector::prepare(
                store.as_ref(),
                storage,
                group,
                timing,
                clock,
                &*telemetry,
                retry_until,
            )
            .await
        }
        false => Ok(true),
    };
    match prepared {
        Ok(true) => {}
        Ok(false) if controls.shutdown.is_cancelled() => return Ok(stopped(&controls)),
        Ok(false) => {
            let storage = &settings.group.storage;
            return Ok(Exit::NotElected(Some(format!(
                "cannot reach storage at {} in time (the lease blob {}/{}; the warnings above \
                 say what failed); {}",
                crate::secret::redact_urls(&storage.endpoint),
                storage.container,
                storage.blob,
                crate::ops::UNREACHABLE_HINT
            ))));
        }
        Err(ElectorError::Unreachable(e)) => {
            let storage = &settings.group.storage;
            return Ok(Exit::NotElected(Some(crate::ops::storage_error_line(
                &e, storage,
            ))));
        }
        Err(e) => return Err(e.into()),
    }
    telemetry.following();
    let shutdown = controls.shutdown.clone();
    let mut pauses = controls.pause.clone();
    let mut body = ChildBody {
        supervisor,
        controls: &mut controls,
        settings,
        short_of_files: false,
        ran: false,
    };
    // One session of the election after another: SIGTSTP (Ctrl-Z) ends one as SIGTERM would
    // (the child stopped, the lease handed on, the member record deleted), then the daemon
    // stops itself; SIGCONT begins the next.
    let mut tstp_ended_the_run = false;
    let finish = loop {
        let session = shutdown.child_token();
        let paused = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let _pause = {
            let (mut asked, session, paused) = (pauses.clone(), session.clone(), paused.clone());
            let seen = asked.borrow_and_update().asked;
            AbortOnDrop(tokio::spawn(async move {
                if asked.wait_for(|p| p.asked > seen).await.is_ok() {
                    paused.store(true, std::sync::atomic::Ordering::SeqCst);
                    session.cancel();
                }
            }))
        };
        // A one-term campaign gives up when its patience runs out, or with its session.
        let _linked = match &give_up {
            Some(give_up) => {
                let one_term = session.child_token();
                elector = elector.for_one_term(one_term.clone());
                let give_up = give_up.clone();
                Some(AbortOnDrop(tokio::spawn(async move {
                    give_up.cancelled().await;
                    one_term.cancel();
                })))
            }
            None => None,
        };
        let finish = elector.lead(&mut body, &session).await;
        if !paused.load(std::sync::atomic::Ordering::SeqCst) || shutdown.is_cancelled() {
            break finish;
        }
        // Stepped down; a second Ctrl-Z while it did asks for nothing more.
        let asked = *pauses.borrow_and_update();
        let finish = finish?;
        let one_shot_ran = give_up.is_some() && body.ran;
        if asked.continued > asked.continued_at_ask {
            // SIGCONT came while it stepped down: it would never come again to end the stop.
            tracing::info!("SIGTSTP: stepped down; continued meanwhile, so not stopping");
        } else {
            tracing::info!(
                "SIGTSTP: stepped down (the child stopped, the lease given up); stopping until \
                 SIGCONT"
            );
            // The whole process stops here, as the terminal asked, until SIGCONT.
            let _ = nix::sys::signal::raise(Signal::SIGSTOP);
        }
        if shutdown.is_cancelled() {
            break Ok(finish);
        }
        if one_shot_ran {
            // A one-shot runs its command once: it does not campaign again for another run.
            tracing::warn!(
                "continued after SIGTSTP stopped the command; a one-shot runs it once: exiting"
            );
            tstp_ended_the_run = true;
            break Ok(finish);
        }
        tracing::info!("SIGCONT: rejoining the election");
        telemetry.following();
    };
    #[cfg(feature = "kubernetes")]
    if let Some(label) = pod_label {
        label.finish().await;
    }
    let finish = finish?;
    let short_of_files = body.short_of_files;
    if tstp_ended_the_run {
        return Ok(Exit::Stopped(Signal::SIGTSTP));
    }
    Ok(match finish {
        Finish::Shutdown => stopped(&controls),
        Finish::Exit(code) => Exit::Child(code),
        // It never tried: not a conflict with another instance.
        Finish::NotElected(None) if short_of_files => Exit::NotElected(Some(
            "too few free file descriptors to start a child, so it did not campaign (raise \
             the open-files limit, e.g. LimitNOFILE= or ulimit -n)"
                .to_owned(),
        )),
        Finish::NotElected(None) => Exit::NotElected(None),
        Finish::NotElected(Some(e)) => Exit::NotElected(Some(format!(
            "the last attempt to acquire the lease failed: {e}"
        ))),
        Finish::CutShort(end) => Exit::CutShort(
            match end {
                TermEnd::Lost => "the lease was lost (broken, or taken by another instance)",
                TermEnd::Expired => "no renew of the lease succeeded before the stop deadline",
                TermEnd::Unhealthy { .. } => "the child failed its health checks",
                _ => "the term ended early",
            }
            .to_owned(),
        ),
    })
}

/// The daemon's body of a term: the child, run by the supervisor under the term's lease.
struct ChildBody<'a> {
    supervisor: Supervisor<'a>,
    controls: &'a mut Controls,
    settings: &'a Settings,
    /// Whether the last look found too few free files to start a child (logged once).
    short_of_files: bool,
    /// Whether a term ran (a one-shot's command, once).
    ran: bool,
}

impl Body for ChildBody<'_> {
    const BODY: &'static str = "the child";
    const ENDED: &'static str = "the child exited";

    const WAITS_PAST_ITS_LEASE: bool = true;

    /// Short of files, a term could not start its child ([`crate::open_files`]); while a group
    /// of an earlier run survives SIGKILL, another child must not start beside it.
    fn may_campaign(&mut self) -> bool {
        if self.supervisor.stuck_group().is_some() {
            return false;
        }
        match crate::open_files::room_for_a_term() {
            Err(short) => {
                if !self.short_of_files {
                    tracing::warn!(
                        in_use = short.in_use,
                        limit = short.limit,
                        "too few free file descriptors to start a child; not campaigning \
                         until some are free"
                    );
                    self.short_of_files = true;
                }
                false
            }
            Ok(()) => {
                if self.short_of_files {
                    tracing::info!("file descriptors are free again; campaigning");
                    self.short_of_files = false;
                }
                true
            }
        }
    }

    async fn run(
        &mut self,
        term: &Term,
        tenure: watch::Receiver<Tenure>,
        stop: &CancellationToken,
    ) -> TermEnd {
        let spec = child_spec(self.settings, term.epoch, term.slot);
        self.ran = true;
        // The term's own token (cancelled by shutdown, or by a preemption) stops the child.
        let daemon = std::mem::replace(&mut self.controls.shutdown, stop.clone());
        let end = self
            .supervisor
            .run_term(&spec, term.epoch, tenure, self.controls)
            .await;
        self.controls.shutdown = daemon;
        end
    }

    /// The supervisor returns once the child's group is gone, or with [`TermEnd::Overran`] when
    /// some process of it survived SIGKILL: then once that group is gone.
    async fn gone(&mut self) {
        if let Some(stuck) = self.supervisor.stuck_group() {
            stuck.gone().await;
            self.supervisor.stuck_group();
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

/// `advertise = "auto"`: the URL of the bound `listener` (its host from the listen address, or
/// from the local address toward storage when that is a wildcard). None, with a warning, when
/// no address can be picked: wake-ups are then off, and successors find a handoff by polling.
fn advertise_auto(listener: &tokio::net::TcpListener, endpoint: &str) -> Option<String> {
    let picked = listener.local_addr().and_then(|listen| {
        crate::config::auto_advertise(listen, || crate::config::local_address_toward(endpoint))
    });
    match picked {
        Ok(url) => {
            tracing::info!(advertise = %url, "advertising this URL for wake-ups (advertise = \"auto\")");
            Some(url)
        }
        Err(e) => {
            tracing::warn!(
                error = %e,
                "advertise = \"auto\" found no address to advertise; wake-ups are off and a \
                 handover to this instance waits for its poll: set [election].advertise to a URL \
                 peers reach this instance's [http].listen at"
            );
            None
        }
    }
}

fn bind(addr: std::net::SocketAddr) -> Result<tokio::net::TcpListener, DaemonError> {
    std::net::TcpListener::bind(addr)
        .and_then(|l| {
            l.set_nonblocking(true)?;
            tokio::net::TcpListener::from_std(l)
        })
        .map_err(|source| DaemonError::Listen { addr, source })
}

/// The child of one term: the configured command, `[child].env`, what the child learns of its
/// leadership (docs/safety.md, "How it works"), and no storage credentials.
fn child_spec(settings: &Settings, epoch: u64, slot: u32) -> ChildSpec {
    let mut env: Vec<(String, String)> = settings
        .child
        .env
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    env.extend([
        (
            "LEASEHOLD_IDENTITY".to_owned(),
            settings.group.identity.clone(),
        ),
        ("LEASEHOLD_EPOCH".to_owned(), epoch.to_string()),
        ("LEASEHOLD_SLOT".to_owned(), slot.to_string()),
        (
            "LEASEHOLD_CONTAINER".to_owned(),
            settings.group.storage.container.clone(),
        ),
        (
            "LEASEHOLD_BLOB".to_owned(),
            settings.group.storage.blob.clone(),
        ),
    ]);
    // The service manager's variables are the daemon's: a child that spoke to it would speak
    // for the daemon.
    let mut remove_env = settings.child.remove_env.clone();
    remove_env.extend(crate::notify::ENV_VARS.map(str::to_owned));
    ChildSpec {
        command: settings.child.command.clone(),
        env,
        remove_env,
        working_dir: settings.child.working_dir.clone(),
        pass_stdin: settings.child.pass_stdin,
    }
}

/// Turns the process's signals into [`Controls`]: the first SIGTERM/SIGINT asks for a clean
/// stop, a second one for an immediate SIGKILL of the child; SIGTSTP (Ctrl-Z) for a step-down
/// and a stop until SIGCONT; SIGHUP/SIGUSR1/SIGUSR2 are queued for the child.
pub fn signal_controls() -> std::io::Result<Controls> {
    let shutdown = CancellationToken::new();
    let hurry = CancellationToken::new();
    let stopped_by = Arc::new(OnceLock::new());
    let (tx, forward) = mpsc::channel(16);
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut hup = signal(SignalKind::hangup())?;
    let mut usr1 = signal(SignalKind::user_defined1())?;
    let mut usr2 = signal(SignalKind::user_defined2())?;
    let mut tstp = signal(SignalKind::from_raw(nix::libc::SIGTSTP))?;
    let mut cont = signal(SignalKind::from_raw(nix::libc::SIGCONT))?;
    let (pause, paused) = watch::channel(Pauses::default());
    let (s, h, by) = (shutdown.clone(), hurry.clone(), stopped_by.clone());
    tokio::spawn(async move {
        loop {
            let stop = tokio::select! {
                _ = term.recv() => Some(Signal::SIGTERM),
                _ = int.recv() => Some(Signal::SIGINT),
                _ = hup.recv() => { let _ = tx.try_send(Signal::SIGHUP); None }
                _ = usr1.recv() => { let _ = tx.try_send(Signal::SIGUSR1); None }
                _ = usr2.recv() => { let _ = tx.try_send(Signal::SIGUSR2); None }
                _ = cont.recv() => { pause.send_modify(|p| p.continued += 1); None }
                _ = tstp.recv() => {
                    pause.send_modify(|p| {
                        p.asked += 1;
                        p.continued_at_ask = p.continued;
                    });
                    tracing::info!("SIGTSTP: stepping down, then stopping until SIGCONT");
                    None
                }
            };
            // Act first, log afterwards: logging never blocks, and nothing waits on it anyway.
            if let Some(sig) = stop {
                if s.is_cancelled() {
                    h.cancel();
                    tracing::warn!(%sig, "second stop signal: killing the child now");
                } else {
                    let _ = by.set(sig);
                    s.cancel();
                    tracing::info!(%sig, "stop requested: stopping the child, then handing the lease on");
                }
            }
        }
    });
    Ok(Controls {
        shutdown,
        hurry,
        forward,
        stopped_by,
        pause: paused,
    })
}
