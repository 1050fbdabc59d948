//! The elector: the one loop of leadership, which both `leasehold run` and
//! [`Elector::run_while_leader`] drive. They differ only in the body of a term (the daemon's
//! child supervisor, a library user's task; [`term::Body`]).
//!
//! A round of the loop ([`Elector::lead`]): campaign (`campaign`: the successor acquires every
//! jittered `acquire_interval`, the other members watch the lease blob; then epoch + 1 under the
//! lease) -> keep (`keep`: renew every `R` in a task of its own) -> run the term's body, which
//! holds itself to rule 1 from the keeper's [`Tenure`] -> the body is gone -> stop renewing ->
//! end of term (a voluntary end hands the lease to the successor with Lease Blob `change`, else
//! it is released) -> the pause its end calls for -> campaign again, until shutdown. Around it,
//! `members` keeps this instance's member record and the line of succession, and `wake` takes
//! and sends wake-ups. With `[lease].slots` > 1 (`slots`) a term holds one of N slot leases,
//! each kept and given up by this same loop.
//!
//! Every ordering invariant of the safety model lives here, once: the lease is never given up
//! while the body may run (rule 7); a new term's body starts only after the old one is gone, and
//! only under a held lease with time left before its stop deadline; a stop never cuts an acquire
//! in flight; every instant is on the lease clock ([`crate::clock`]: monotonic, plus any
//! machine suspend). Everything is measured from `t_s`, the instant at which the last successful
//! acquire or renew request was *sent*: the server cannot start its lease clock before that, so
//! the lease cannot expire on the server before `t_s + L`.

mod campaign;
mod error;
#[cfg(test)]
mod forged_tests;
mod handoff;
mod keep;
pub(crate) mod members;
mod observe;
mod preempt;
pub(crate) mod slots;
mod task;
mod term;
#[cfg(test)]
mod testing;
mod vanish;
pub(crate) mod wake;

pub use error::Error;
// The simulator's bound and the unit tests'.
#[cfg(any(test, feature = "test-util"))]
pub(crate) use handoff::confirm_window;
pub(crate) use keep::Tenure;
pub(crate) use observe::{Handoff, LeaseOp, Observer, Unobserved};
pub use task::Leadership;
pub(crate) use term::{Body, Phase, TermEnd};
pub use wake::{HANDOFF_HEADER, WAKE_HEADER, WakeAnswer, Waker};

use crate::clock;
use crate::config::{Config, ConfigError, Election, check_identity};
use crate::fmt::human;
use crate::store::AzureStore;
use crate::store::target::StorageTarget;
use crate::store::{Failure, LeaseId, LeaseStore, StoreError};
use crate::timing::Timing;
use campaign::LateAcquire;
pub(crate) use campaign::Term;
use members::Membership;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use task::TaskBody;
use tokio::time::{Instant, sleep};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// One instance of a leadership group: it campaigns for the group's lease, and while it holds
/// it, runs a task ([`Elector::run_while_leader`]).
///
/// ```no_run
/// use leasehold::{Config, Elector};
///
/// # async fn work(_: leasehold::Leadership) {}
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// let config = Config::from_file("leasehold.toml")?;
/// let elector = Elector::connect(&config).await?;
/// let shutdown = async {
///     let _ = tokio::signal::ctrl_c().await;
/// };
/// elector
///     .run_while_leader(shutdown, |leadership| async move { work(leadership).await })
///     .await?;
/// # Ok(())
/// # }
/// ```
///
/// The store is [`AzureStore`] unless given ([`Elector::with_store`]; the in-memory store of the
/// `test-util` feature lets a test drive leadership on paused tokio time).
pub struct Elector<S = AzureStore> {
    store: Arc<S>,
    identity: String,
    timing: Timing,
    create_if_missing: bool,
    observer: Arc<dyn Observer>,
    /// The id proposed in the next acquire. It is kept across attempts that were answered (a
    /// retry after a 5xx that in fact succeeded on the server still wins), and replaced after a
    /// won term and after an attempt that got no answer in time, which is never resent.
    next_id: LeaseId,
    /// An acquire that got no answer in time and may hold the lease on the server.
    late: Option<LateAcquire>,
    /// Whether storage has ever accepted our credentials; before that, a refusal is fatal.
    authorized: bool,
    /// `Some` for a candidate for one term only (`leasehold run --try`, `--timeout`, the
    /// one-liner): its campaign gives up once this is cancelled, between attempts (never
    /// cutting one), and [`Elector::lead`] returns after that term however it ended.
    one_term: Option<CancellationToken>,
    /// Why the last acquire attempt failed; `None` once one was answered (won, or held by
    /// another). What a one-term campaign that gave up reports.
    last_failure: Option<StoreError>,
    /// `[election]`: this instance's priority and wake-up URL.
    election: Election,
    /// This instance as a member, while [`Elector::lead`] runs.
    membership: Option<Membership>,
    /// Where wake-ups reach this instance.
    waker: Waker,
    /// Sends wake-ups.
    wake_sender: wake::Sender,
    /// `[lease].slots`: how many instances of the group lead at once (design section 12).
    slots: u32,
    /// The stores of slots 1.. (slot 0 is `store`).
    slot_stores: Vec<Arc<S>>,
    /// The group's count as slot 0 records it, while it differs from ours (0: no mismatch):
    /// no campaign.
    mismatch: std::sync::atomic::AtomicU32,
    /// When this instance first saw each slot's blob gone: the lock-delay (design section 16).
    vanished: vanish::Vanished,
}

/// The longest pause of a campaign between two attempts that storage failed: the backoff of
/// the attempts doubles from `acquire_interval` up to this.
pub(crate) fn longest_error_backoff(timing: &Timing) -> Duration {
    timing.acquire_interval.max(Duration::from_secs(10))
}

/// How a term gave its lease up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Surrender {
    /// Released (`true`: confirmed by storage).
    Released(bool),
    /// Handed to this member with Lease Blob `change`.
    HandedTo(String),
    /// Storage said it was no longer ours.
    Lost,
}

/// How the loop ended without an error. (The library reads none of the values: only the
/// daemon's one-shot runs and `on_exit = "exit"` end with one.)
#[derive(Debug, Clone)]
#[cfg_attr(not(feature = "daemon"), allow(dead_code))]
pub(crate) enum Finish {
    /// Shutdown was asked for: the body is gone and the lease released.
    Shutdown,
    /// The body asked to end with this code (`on_exit = "exit"`); the lease is released.
    Exit(i32),
    /// One term only: the campaign gave up without winning. The last attempt's failure, or
    /// `None` when another instance held the lease.
    NotElected(Option<StoreError>),
    /// One term only: it ended before its body did (the lease lost or not renewed in time, the
    /// child unhealthy); the body was stopped and the lease given up as usual.
    CutShort(TermEnd),
}

impl Elector<AzureStore> {
    /// An elector for the group `config` names: checks every rule of the config (all but
    /// `[child]`, of which only `stop_timeout` counts), resolves the storage credential (from
    /// the file, its `*_file` keys, the standard `AZURE_STORAGE_*` variables, or Microsoft
    /// Entra ID), and makes sure the container and lease blob exist (creating them with
    /// `create_if_missing = true`, the default). One attempt: storage that cannot be reached is
    /// [`Error::Unreachable`], refused credentials [`Error::Denied`], a missing container or
    /// blob that may not be created [`Error::ContainerMissing`] or [`Error::BlobMissing`].
    pub async fn connect(config: &Config) -> Result<Self, Error> {
        let env = |name: &str| std::env::var(name).ok();
        let group = config.validate_group(&env)?;
        for warning in &group.warnings {
            tracing::warn!("{warning}");
        }
        let store = AzureStore::new(&group.storage).map_err(Error::Client)?;
        let members = (group.identity.as_str(), group.slots);
        prepare(
            &store,
            &group.storage,
            members,
            &group.timing,
            &Unobserved,
            None,
        )
        .await?;
        Ok(Self::new(
            Arc::new(store),
            group.identity,
            group.timing,
            group.storage.create_if_missing,
            Arc::new(Unobserved),
        )
        .with_election(group.election)
        .with_slots(group.slots))
    }
}

impl<S: LeaseStore> Elector<S> {
    /// An elector on a store of your own: the in-memory store of the `test-util` feature
    /// (`leasehold::store::MemoryStore`), or another [`LeaseStore`]. `identity` is recorded in
    /// the blob's metadata (1-256 printable ASCII characters) and names this instance's member
    /// record; `timing` must keep its rules ([`Timing::check`]). Priority 0, no wake-up URL
    /// ([`Elector::with_priority`], [`Elector::with_advertise`]). Sends nothing yet; a missing
    /// blob is created on the first acquire.
    pub fn with_store(
        store: Arc<S>,
        identity: impl Into<String>,
        timing: Timing,
    ) -> Result<Self, Error> {
        timing.check().map_err(ConfigError::from)?;
        let identity = identity.into();
        check_identity(&identity)?;
        Ok(Self::new(
            store,
            identity,
            timing,
            true,
            Arc::new(Unobserved),
        ))
    }

    /// Its place in the line of succession: a higher priority leads first (default 0; equal
    /// priorities go by seniority), as `[election].priority`.
    pub fn with_priority(mut self, priority: i64) -> Self {
        self.election.priority = priority;
        self
    }

    /// While leading, hand the lease to a live member of strictly higher priority once it has
    /// been a member for this long, as `[election].preempt_after` (default 30 s; `None`:
    /// "off", priority only orders succession). Design section 11.
    pub fn with_preempt_after(mut self, preempt_after: Option<Duration>) -> Self {
        self.election.preempt_after = preempt_after;
        self
    }

    /// Where the other members reach this instance with `POST <advertise>/wake` after handing
    /// it the lease, as `[election].advertise`: serve that route and call [`Waker::wake`] from
    /// [`Elector::waker`] in it.
    pub fn with_advertise(mut self, advertise: impl Into<String>) -> Self {
        self.election.advertise = Some(advertise.into().trim_end_matches('/').to_owned());
        self
    }

    /// How many instances of the group lead at once, each holding one of `slots` slot leases
    /// (as `[lease].slots`, 1 to 64; default 1): slot 0 is the group's blob, slot i the blob
    /// `<blob>.slots/<i>`, each with its own epoch ([`Leadership::slot`]). Every instance of a
    /// group must have the same count: one configured otherwise does not lead.
    pub fn with_slots(mut self, slots: u32) -> Self {
        self.slots = slots.clamp(1, crate::config::MAX_SLOTS);
        self.slot_stores = (1..self.slots).map(|i| self.store.slot(i)).collect();
        self
    }

    /// The receiving end of wake-ups: [`Waker::wake`] makes this elector try its acquire now
    /// (a leader that handed it the lease sends one). Carries no authority: storage refuses
    /// the acquire unless the lease was handed to this instance or is free.
    pub fn waker(&self) -> Waker {
        self.waker.clone()
    }

    /// This instance's identity, as recorded in the blob's metadata.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The lease timings it keeps.
    pub fn timing(&self) -> &Timing {
        &self.timing
    }

    /// Campaigns for the lease until `shutdown` resolves, and runs `task` once for each term
    /// won, with that term's [`Leadership`]. Returns once `shutdown` has resolved, the last
    /// task is gone and the lease is released.
    ///
    /// A term ends in this order (the daemon's rule 7): the task's
    /// [`Leadership::cancelled`] resolves (at the stop deadline `t_s + L - M - G` when no renew
    /// succeeded, at once when storage says the lease is someone else's, or when `shutdown`
    /// resolves); the task gets `G` (`[child].stop_timeout`, default 5 s) to finish, and is
    /// aborted (dropped at its next `.await`) at `t_s + L - M` if it has not; **only then** is
    /// the lease released. The next term's task starts only after the last one is gone. A task
    /// that ends by itself ends its term: the lease is released, and this instance waits a
    /// polling period before campaigning again, so that another gets a fair chance.
    ///
    /// Storage that fails is no error: the term ends safely and the elector keeps trying.
    /// Errors: [`Error::Denied`] when storage refuses the credentials before it ever accepted
    /// them, and [`Error::TaskDidNotStop`] when a task that blocks its thread (so that it cannot
    /// be aborted) is still running when its lease has surely expired; the elector stopped
    /// renewing that lease at the kill deadline and did not release it. Exit then: another
    /// instance may lead beside that task, and its epoch is the only defence.
    pub async fn run_while_leader<F, Fut>(
        mut self,
        shutdown: impl Future<Output = ()>,
        task: F,
    ) -> Result<(), Error>
    where
        F: FnMut(Leadership) -> Fut + Send,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let stop = CancellationToken::new();
        let mut body = TaskBody::new(task, &self.identity, self.timing.stop_timeout);
        let lead = self.lead(&mut body, &stop);
        let stop_on_shutdown = async {
            shutdown.await;
            stop.cancel();
            std::future::pending::<()>().await;
        };
        tokio::select! {
            biased;
            led = lead => led.map(drop),
            () = stop_on_shutdown => unreachable!("never ends"),
        }
    }
}

impl<S: LeaseStore> Elector<S> {
    pub(crate) fn new(
        store: Arc<S>,
        identity: String,
        timing: Timing,
        create_if_missing: bool,
        observer: Arc<dyn Observer>,
    ) -> Self {
        Self {
            store,
            identity,
            timing,
            create_if_missing,
            observer,
            next_id: LeaseId::random(),
            late: None,
            authorized: false,
            one_term: None,
            last_failure: None,
            election: Election::default(),
            membership: None,
            waker: Waker::default(),
            wake_sender: wake::Sender::default(),
            slots: 1,
            slot_stores: Vec::new(),
            mismatch: Default::default(),
            vanished: vanish::Vanished::default(),
        }
    }

    /// The store of slot `slot` (0: the group's blob).
    pub(crate) fn store_of(&self, slot: u32) -> &Arc<S> {
        match slot {
            0 => &self.store,
            i => &self.slot_stores[i as usize - 1],
        }
    }

    /// Makes this a candidate for one term only: the campaign gives up once `give_up` is
    /// cancelled (already cancelled: after one attempt), and [`Elector::lead`] returns after the
    /// term, if one is won. A term won by an attempt that was in flight when `give_up` came is
    /// led. `give_up` must be cancelled on shutdown too (a child token of it).
    #[cfg_attr(not(feature = "daemon"), allow(dead_code))]
    pub(crate) fn for_one_term(mut self, give_up: CancellationToken) -> Self {
        self.one_term = Some(give_up);
        self
    }

    pub(crate) fn with_election(mut self, election: Election) -> Self {
        self.election = election;
        self
    }

    /// Sends its wake-ups through `sender` (the simulator's) instead of HTTP.
    #[cfg(any(test, feature = "test-util"))]
    pub(crate) fn with_wake_sender(mut self, sender: wake::Sender) -> Self {
        self.wake_sender = sender;
        self
    }

    /// The next acquire goes out with `id`; this instance's member record says so, so that a
    /// leader hands the lease to the id this instance will acquire with.
    pub(crate) fn acquire_next_with(&mut self, id: LeaseId) {
        self.next_id = id;
        if let Some(m) = &self.membership {
            m.acquire_with(id);
        }
    }

    /// The loop ([`Elector::lead_terms`]) as a member: this instance joins the line first and
    /// leaves it (deleting its record) once the loop is over, whatever ended it.
    pub(crate) async fn lead<B: Body>(
        &mut self,
        body: &mut B,
        shutdown: &CancellationToken,
    ) -> Result<Finish, Error> {
        self.membership = Some(Membership::start(
            self.store.with_own_connections(),
            self.observer.clone(),
            self.timing,
            &self.identity,
            &self.election,
            self.next_id,
            self.waker.token(),
            self.slots,
        ));
        // The HTTP client wake-ups go out with is made now, not by the first handoff: making one
        // (its TLS settings) takes milliseconds that a handover would wait for.
        self.wake_sender.warm();
        let led = self.lead_terms(body, shutdown).await;
        if let Some(m) = self.membership.take() {
            m.leave().await;
        }
        led
    }

    /// The loop: campaign, keep, run `body`, end the term, pause, again, until `shutdown` (or
    /// until the body asks to end). Returns an error only for what cannot be retried:
    /// credentials refused before storage ever accepted them, or a body that could not be made
    /// to end before its lease expired.
    async fn lead_terms<B: Body>(
        &mut self,
        body: &mut B,
        shutdown: &CancellationToken,
    ) -> Result<Finish, Error> {
        let identity = self.identity.clone();
        let identity = identity.as_str();
        loop {
            let stop = self.one_term.clone().unwrap_or_else(|| shutdown.clone());
            let won = self.campaign(&stop, &mut || body.may_campaign()).await?;
            let Some(term) = won else {
                if !shutdown.is_cancelled() {
                    // Only a one-term campaign ends without a shutdown: it gave up.
                    tracing::info!(identity, "gave up campaigning: not elected");
                    return Ok(Finish::NotElected(self.last_failure.take()));
                }
                tracing::info!(identity, "stopped as a follower");
                return Ok(Finish::Shutdown);
            };
            let epoch = term.epoch;
            if self.slots > 1 {
                tracing::info!(identity, epoch, slot = term.slot, "acquired leadership");
            } else if term.reserved {
                tracing::info!(
                    identity,
                    epoch,
                    "acquired leadership, on the epoch its handoff reserved"
                );
            } else {
                tracing::info!(identity, epoch, "acquired leadership");
            }
            if let Some(m) = &self.membership {
                m.leading(Some((epoch, term.acquired_at, term.lease)));
                m.holding(Some(term.slot));
                self.observer.line(&m.view());
            }
            self.observer
                .acquired(epoch, term.slot, term.acquired_at, term.deadline);
            let keeper = self.keep(&term);
            // A term won while shutting down (the acquire was in flight), or whose epoch write
            // took it past its stop deadline, gets no body.
            let unstarted = Phase::stop_reason(
                &keeper.tenure().borrow(),
                clock::now(),
                shutdown.is_cancelled(),
            );
            let mut preempted = None;
            // From a stop request on, the handoff's listing and notice go on while the body
            // stops.
            let prepared = handoff::prepare(self, &term, keeper.tenure(), shutdown);
            let end = match unstarted {
                Some(end) => end,
                None => {
                    self.run_body(body, &term, keeper.tenure(), shutdown, &mut preempted)
                        .instrument(term_span(identity, epoch))
                        .await
                }
            };
            // The body is gone (or could not be made to go): only now may the lease go (rule 7).
            self.observer.stepping_down();
            let last = keeper.stop().await;
            let outlived = end == TermEnd::Overran
                && !crate::mutant::on(crate::mutant::Mutant::ReleaseTheStuck)
                && !self.outlast(body, &last, epoch).await?;
            let surrender = if outlived {
                // The lease has expired on the server with the body still there: nothing to
                // hand on or release.
                Surrender::Lost
            } else {
                self.end_term(&term, end, &last, preempted.as_ref(), prepared)
                    .await
            };
            if let Some(m) = &self.membership {
                m.leading(None);
                m.holding(None);
                self.observer.line(&m.view());
            }
            // A wake-up that came while leading is stale.
            self.waker.forget();
            self.observer.term_ended();
            let gave = match &surrender {
                Surrender::HandedTo(next) => format!("handed the lease to {next}"),
                Surrender::Released(true) => "released the lease".to_owned(),
                Surrender::Released(false) => {
                    "the lease was not released; it expires on its own".to_owned()
                }
                Surrender::Lost => "the lease was no longer ours".to_owned(),
            };
            match end {
                TermEnd::Released => {
                    tracing::info!(identity, epoch, "released leadership: {}; {gave}", B::ENDED)
                }
                TermEnd::Exit(code) => tracing::info!(
                    identity,
                    epoch,
                    code,
                    "released leadership: {}; {gave}; exiting with its code",
                    B::ENDED
                ),
                TermEnd::Lost => tracing::info!(
                    identity,
                    epoch,
                    "lost leadership: the lease is no longer ours"
                ),
                TermEnd::Expired => tracing::info!(
                    identity,
                    epoch,
                    "lost leadership: no renew succeeded before the stop deadline; {gave}"
                ),
                TermEnd::Shutdown => {
                    tracing::info!(
                        identity,
                        epoch,
                        "released leadership: shutting down; {gave}"
                    )
                }
                TermEnd::Unhealthy { .. } => {
                    tracing::info!(identity, epoch, "stepped down: child unhealthy; {gave}")
                }
                TermEnd::Preempted => {
                    tracing::info!(
                        identity,
                        epoch,
                        "stepped down for a preferred leader; {gave}"
                    )
                }
                TermEnd::Overran if outlived => tracing::warn!(
                    identity,
                    epoch,
                    "lost leadership: {} outlived its kill and its lease; {gave}",
                    B::BODY
                ),
                TermEnd::Overran => tracing::info!(
                    identity,
                    epoch,
                    "released leadership: {} after its kill deadline; {gave}",
                    B::ENDED
                ),
            }
            // A candidate for one term does not stand again.
            if self.one_term.is_some() && !matches!(end, TermEnd::Shutdown | TermEnd::Exit(_)) {
                return Ok(Finish::CutShort(end));
            }
            // The pause before campaigning again.
            let rejoin = match end {
                TermEnd::Shutdown => return Ok(Finish::Shutdown),
                TermEnd::Exit(code) => return Ok(Finish::Exit(code)),
                TermEnd::Overran if shutdown.is_cancelled() => return Ok(Finish::Shutdown),
                TermEnd::Lost => continue,
                TermEnd::Released | TermEnd::Overran | TermEnd::Preempted => {
                    // Give the other instances a fair chance before competing again (a
                    // wake-up means one handed the lease back already).
                    let waker = self.waker.clone();
                    tokio::select! {
                        biased;
                        () = shutdown.cancelled() => return Ok(Finish::Shutdown),
                        () = waker.woken() => continue,
                        () = sleep(self.yield_interval()) => continue,
                    }
                }
                TermEnd::Unhealthy { cooldown } => {
                    // Stay out long enough that a healthy follower wins the lease.
                    tracing::info!(
                        identity,
                        "staying out of the election for {}",
                        human(cooldown)
                    );
                    clock::now() + cooldown
                }
                TermEnd::Expired => {
                    // No renew succeeded: storage is down for everyone, or slow or unreachable
                    // for this instance alone. Nobody can take the lease before the last
                    // successful send + L (the server's lease runs at least that long), so
                    // staying out until then costs nothing in the first case, and in the second
                    // gives a healthy follower the lease instead of this instance winning it
                    // back at once, only to lose it again. (A renew that reached storage without
                    // its answer reaching us makes the lease last longer; the release just sent
                    // ends it, or it expires unrenewed L after that renew.)
                    let rejoin = last.deadline().expiry(&self.timing);
                    let wait = rejoin.saturating_duration_since(clock::now());
                    tracing::info!(
                        identity,
                        "staying out of the election until the lease this instance last renewed has surely expired, for {}",
                        human(wait)
                    );
                    rejoin
                }
            };
            self.observer.cooling_down(clock::timer_instant(rejoin));
            // A cooldown is sat out whatever wakes come (the record says standby meanwhile);
            // the wait for an expired lease may be cut short by one.
            let waker = self.waker.clone();
            let wakeable = !matches!(end, TermEnd::Unhealthy { .. });
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return Ok(Finish::Shutdown),
                () = waker.woken(), if wakeable => {}
                () = clock::sleep_until(rejoin) => {}
            }
            if let Some(m) = &self.membership {
                m.back_in_line();
            }
            self.observer.following();
        }
    }

    /// Runs the body of `term` until it is gone. Meanwhile, as leader, watches the line for a
    /// member of higher priority (section 11, `preempt`); when one is due, logs why, tells the
    /// body to stop (as at shutdown: through a token of this term only) and, once it is gone,
    /// says [`TermEnd::Preempted`] (unless the body ended otherwise meanwhile, or shutdown came).
    async fn run_body<B: Body>(
        &self,
        body: &mut B,
        term: &Term,
        tenure: tokio::sync::watch::Receiver<Tenure>,
        shutdown: &CancellationToken,
        preempted: &mut Option<preempt::Preemption>,
    ) -> TermEnd {
        let stop = shutdown.child_token();
        let run = body.run(term, tenure, &stop);
        tokio::pin!(run);
        let Some(m) = &self.membership else {
            return run.await;
        };
        let watch = preempt::watch(
            &*self.store,
            &*self.observer,
            m,
            &self.timing,
            self.election.preempt_after,
            self.election.priority,
            preempt::Listing::for_slot(term.slot),
            &self.wake_sender,
        );
        let end = tokio::select! {
            biased;
            end = &mut run => {
                m.with(|l| l.preempting = None);
                return end;
            }
            p = watch => {
                tracing::info!(epoch = term.epoch, "{p}; stopping {} to hand the lease over", B::BODY);
                self.observer.preempted();
                *preempted = Some(p);
                stop.cancel();
                run.await
            }
        };
        m.with(|l| l.preempting = None);
        match end {
            TermEnd::Shutdown if !shutdown.is_cancelled() => TermEnd::Preempted,
            end => end,
        }
    }

    /// End of term: the body is gone and the lease is no longer renewed. The one place where a
    /// term gives its lease up. A voluntary end (the body ended by itself, shutdown, a health
    /// step-down) hands it to the successor ([`Elector::hand_over`]); an involuntary one (no
    /// renew in time, a body that overran its kill) releases it; a lost lease is left alone.
    async fn end_term(
        &mut self,
        term: &Term,
        end: TermEnd,
        last: &Tenure,
        preempted: Option<&preempt::Preemption>,
        prepared: Option<handoff::Preparing>,
    ) -> Surrender {
        match (end, last) {
            (TermEnd::Lost, _) | (_, Tenure::Lost(_)) => Surrender::Lost,
            (
                TermEnd::Released
                | TermEnd::Exit(_)
                | TermEnd::Shutdown
                | TermEnd::Unhealthy { .. }
                | TermEnd::Preempted,
                Tenure::Held(deadline),
            ) => {
                let to = preempted.map(|p| p.to.as_str());
                self.hand_over(term, end, deadline, to, prepared).await
            }
            _ => Surrender::Released(self.release_on(term.slot, term.lease).await),
        }
    }

    /// A body that outlived its kill: it is not renewed for any more (it may run on, unbounded),
    /// nor released while it may run. If it ends before the lease it was last renewed under has
    /// surely expired, the term ends as usual (true); if not, another instance may lead beside
    /// it, and the loop gives up, or with [`Body::WAITS_PAST_ITS_LEASE`] goes on without the
    /// lease (false).
    async fn outlast<B: Body>(
        &self,
        body: &mut B,
        last: &Tenure,
        epoch: u64,
    ) -> Result<bool, Error> {
        let expiry = last.deadline().expiry(&self.timing);
        let kill_at = last.deadline().kill_at;
        tracing::error!(
            epoch,
            "{} did not end when killed; no longer renewing its lease, which expires in {} at \
             the latest",
            B::BODY,
            human(expiry.saturating_duration_since(clock::now()))
        );
        tokio::select! {
            biased;
            () = body.gone() => {
                tracing::warn!(
                    epoch,
                    "{} ended {} after its kill deadline",
                    B::BODY,
                    human(clock::now().saturating_duration_since(kill_at))
                );
                Ok(true)
            }
            () = clock::sleep_until(expiry) => {
                if !B::WAITS_PAST_ITS_LEASE {
                    return Err(Error::TaskDidNotStop { epoch });
                }
                tracing::error!(
                    epoch,
                    "{} is still there after its lease expired; not campaigning until it is gone",
                    B::BODY
                );
                Ok(false)
            }
        }
    }

    /// Gives the lease back so that a follower can take it at once. Best effort: when it fails,
    /// the lease simply expires on the server within `L`.
    #[cfg(test)]
    pub(crate) async fn release(&self, id: LeaseId) -> bool {
        self.release_on(0, id).await
    }

    /// Gives slot `slot`'s lease back (slot 0: the group's lease), as [`Elector::release`].
    pub(crate) async fn release_on(&self, slot: u32, id: LeaseId) -> bool {
        let limit = clock::now() + self.timing.request_timeout();
        match self
            .call(LeaseOp::Release, limit, self.store_of(slot).release(id))
            .await
        {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    "could not release the lease; it expires on its own within {}",
                    humantime::format_duration(self.timing.duration)
                );
                false
            }
        }
    }

    async fn call<T>(
        &self,
        op: LeaseOp,
        limit: Instant,
        request: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        timed(&*self.observer, op, limit, request).await
    }
}

/// Makes sure the container and blob exist before the first campaign (and with `[lease].slots`
/// above 1, the slot blobs: created now, a slot blob found missing later was deleted). A blob
/// missing while other members of the group are alive was deleted under its leader: it is
/// created again under the lock-delay (`vanish`). Refused credentials and a missing container
/// or blob that may not be created are errors. An unreachable service is retried with backoff
/// until `shutdown` (the daemon), or is an error when there is none to wait for (a library's
/// connect tries once). `Ok(false)`: shutdown came meanwhile.
pub(crate) async fn prepare<S: LeaseStore>(
    store: &S,
    target: &StorageTarget,
    group: (&str, u32),
    timing: &Timing,
    observer: &dyn Observer,
    shutdown: Option<&CancellationToken>,
) -> Result<bool, Error> {
    let (me, slots) = group;
    let mut backoff = crate::retry::backoff(Duration::from_secs(1), Duration::from_secs(10));
    loop {
        let limit = timing.request_timeout().max(Duration::from_secs(5));
        let prepared = async {
            for slot in 0..slots {
                let blob = match slot {
                    0 => None,
                    i => Some(store.slot(i)),
                };
                let blob = blob.as_deref().unwrap_or(store);
                match blob.prepare(false).await {
                    Ok(()) => continue,
                    Err(e) if e.code() == Some("ContainerNotFound") && target.create_if_missing => {
                        // A container that does not exist holds no member records.
                        blob.prepare(true).await?;
                    }
                    Err(e) if e.failure() == Failure::Missing && target.create_if_missing => {
                        vanish::create(store, blob, me, false, timing, observer).await?;
                    }
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        };
        let error = match timed(observer, LeaseOp::Prepare, clock::now() + limit, prepared).await {
            Ok(()) => return Ok(true),
            Err(e) => e,
        };
        match error.failure() {
            Failure::Denied => return Err(Error::Denied(error)),
            Failure::Missing if error.code() == Some("ContainerNotFound") => {
                return Err(Error::ContainerMissing(target.container.clone()));
            }
            Failure::Missing => return Err(Error::BlobMissing(target.blob.clone())),
            _ => {}
        }
        let Some(shutdown) = shutdown else {
            return Err(Error::Unreachable(error));
        };
        let pause = backoff.next().unwrap_or(Duration::from_secs(10));
        tracing::warn!(
            error = %error,
            endpoint = %target.endpoint,
            "cannot reach the lease blob; retrying in {}",
            human(pause)
        );
        tokio::select! {
            biased;
            () = shutdown.cancelled() => return Ok(false),
            () = sleep(pause) => {}
        }
    }
}

/// The span of one term: every log line of its renew loop and of its child carries the identity
/// and the epoch.
pub(crate) fn term_span(identity: &str, epoch: u64) -> tracing::Span {
    tracing::info_span!("term", identity, epoch)
}

/// Runs one store request with a hard limit, and records its outcome.
async fn timed<T>(
    observer: &dyn Observer,
    op: LeaseOp,
    limit: Instant,
    request: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let started = Instant::now();
    let allowed = limit.saturating_duration_since(clock::now());
    let result = match tokio::time::timeout_at(clock::timer_instant(limit), request).await {
        Ok(r) => r,
        Err(_) => Err(StoreError::TimedOut(allowed)),
    };
    let elapsed = started.elapsed();
    // Under the store's name: a request is the store's doing, and the elector's own target is
    // kept for the deadlines the fault tests read (`log_deadline`).
    match &result {
        Ok(_) => tracing::trace!(
            target: "leasehold::store",
            op = op.as_str(),
            ?elapsed,
            "lease operation succeeded"
        ),
        Err(e) => tracing::debug!(
            target: "leasehold::store",
            op = op.as_str(),
            ?elapsed,
            error = %e,
            "lease operation failed"
        ),
    }
    observer.lease_op(op, elapsed, result.as_ref().err());
    result
}
