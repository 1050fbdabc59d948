//! One instance of a leadership group ([`Elector`]): what it is made of (the store of each
//! slot, its identity, the timings, its part in the election, where wake-ups reach it), how it
//! is built ([`Elector::connect`], [`Elector::with_store`] and the `with_*` settings), and what
//! a program calls on it: [`Elector::run_while_leader`], [`Elector::waker`],
//! [`Elector::watch`].

use super::error::Error;
use super::observe::{Observer, Unobserved};
use super::prepare::prepare;
use super::role::Role;
use super::task::{Leadership, TaskBody};
use super::wake::{self, Waker};
use crate::clock::Clock;
use crate::config::{Config, ConfigError, Election, check_identity};
use crate::mutant::Switch;
use crate::random;
use crate::store::AzureStore;
use crate::store::{LeaseId, LeaseStore};
use crate::timing::Timing;
use leasehold_core::quorum::ReplicaSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

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
    pub(super) store: Arc<S>,
    /// With a lease on several storage accounts (docs/quorum.md), the set, and the stores of
    /// its accounts beyond the first (`store`); empty for the one account.
    pub(super) set: ReplicaSet,
    pub(super) replicas: Vec<Arc<S>>,
    pub(super) identity: String,
    pub(super) timing: Timing,
    pub(super) create_if_missing: bool,
    pub(super) observer: Arc<dyn Observer>,
    /// The id proposed in the next acquire. It is kept across attempts that were answered (a
    /// retry after a 5xx that in fact succeeded on the server still wins), and replaced after a
    /// won term and after an attempt that got no answer in time, which is never resent.
    pub(super) next_id: LeaseId,
    /// Storage accepted the credentials in an earlier member of this elector (a session
    /// before a SIGTSTP): a refusal is retried from then on (docs/configuration.md, "Exit
    /// codes").
    pub(super) authorized: bool,
    /// `Some` for a candidate for one term only (`leasehold run --try`, `--timeout`, the
    /// one-liner): its campaign gives up once this is cancelled, between attempts (never
    /// cutting one), and [`Elector::lead`] returns after that term however it ended.
    pub(super) one_term: Option<CancellationToken>,
    /// `[election]`: this instance's priority and wake-up URL.
    pub(super) election: Election,
    /// Where wake-ups reach this instance.
    pub(super) waker: Waker,
    /// Sends wake-ups.
    pub(super) wake_sender: wake::Sender,
    /// `[lease].slots`: how many instances of the group lead at once (docs/slots.md).
    pub(super) slots: u32,
    /// This instance's part now, for [`Elector::watch`].
    pub(super) role: watch::Sender<Role>,
    /// The rule a simulated history breaks on purpose (none, outside the simulator).
    pub(super) mutant: Switch,
    /// The lease clock and the wall clock it reads: the host's, outside a simulated history.
    pub(super) clock: Clock,
    /// Where its lease ids and wake token come from: the operating system, outside a simulated
    /// history or a paused-time scenario.
    pub(super) random: random::Source,
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
        let mut stores = AzureStore::for_replicas(&group.replicas)
            .map_err(|(replica, source)| Error::ReplicaClient { replica, source })?
            .into_iter()
            .map(Arc::new);
        let store = match stores.next() {
            Some(first) => first,
            None => Arc::new(AzureStore::new(&group.storage).map_err(Error::Client)?),
        };
        let members = (group.identity.as_str(), group.slots);
        // A replica set's blobs are its campaign's to create (`prepare`'s doc).
        if group.replicas.is_empty() {
            let (storage, timing) = (&group.storage, &group.timing);
            prepare(
                &*store,
                storage,
                members,
                timing,
                Clock::Host,
                &Unobserved,
                None,
            )
            .await?;
        }
        let elector = Self::new(
            store,
            group.identity,
            group.timing,
            group.storage.create_if_missing,
            Arc::new(Unobserved),
        )
        .with_election(group.election)
        .with_slots(group.slots);
        Ok(match crate::config::replica_set(&group.replicas) {
            Some(set) => elector.on_replicas(set, stores.collect()),
            None => elector,
        })
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

    /// While leading, hand the lease to a live member of strictly higher priority once it has been
    /// a member for this long, as `[election].preempt_after` (default 30 s; `None`: "off", priority
    /// only orders succession). docs/preferred.md.
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
        self
    }

    /// The receiving end of wake-ups: [`Waker::wake`] makes this elector try its acquire now
    /// (a leader that handed it the lease sends one). Carries no authority: storage refuses
    /// the acquire unless the lease was handed to this instance or is free.
    pub fn waker(&self) -> Waker {
        self.waker.clone()
    }

    /// This instance's part in its group, now and as it changes: [`Role::Leader`] with the
    /// term's epoch while a term's task runs here, [`Role::Follower`] otherwise. For the code
    /// outside the leader's task (a readiness probe, a router, a metric): it observes
    /// leadership without polling. The channel closes once the elector is gone
    /// ([`Elector::run_while_leader`] returned).
    ///
    /// The task of a term learns of its end first ([`Leadership::cancelled`]); the role turns
    /// back to follower once that task is gone, before the lease is given up.
    ///
    /// ```no_run
    /// use leasehold::{Config, Elector, Role};
    ///
    /// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
    /// let config = Config::from_file("leasehold.toml")?;
    /// let elector = Elector::connect(&config).await?;
    /// let mut role = elector.watch();
    /// tokio::spawn(async move {
    ///     // Ends when the elector is gone.
    ///     while role.changed().await.is_ok() {
    ///         match *role.borrow_and_update() {
    ///             Role::Leader { epoch, .. } => println!("leading, epoch {epoch}"),
    ///             _ => println!("following"),
    ///         }
    ///     }
    /// });
    /// let shutdown = async {
    ///     let _ = tokio::signal::ctrl_c().await;
    /// };
    /// elector
    ///     .run_while_leader(shutdown, |leadership| async move {
    ///         leadership.cancelled().await;
    ///     })
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn watch(&self) -> watch::Receiver<Role> {
        self.role.subscribe()
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
        let mut body = TaskBody::new(task, &self.identity, self.timing.stop_timeout, self.clock);
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
            set: ReplicaSet::one(),
            replicas: Vec::new(),
            identity,
            timing,
            create_if_missing,
            observer,
            next_id: LeaseId::random(),
            authorized: false,
            one_term: None,
            election: Election::default(),
            waker: Waker::default(),
            wake_sender: wake::Sender::default(),
            slots: 1,
            role: watch::channel(Role::Follower).0,
            mutant: Switch::default(),
            clock: Clock::Host,
            random: random::Source::Os,
        }
    }

    /// Leads on a majority of the accounts of `set` (docs/quorum.md): this elector's store is
    /// the first, `others` the rest in the set's order.
    pub(crate) fn on_replicas(mut self, set: ReplicaSet, others: Vec<Arc<S>>) -> Self {
        debug_assert_eq!(others.len() + 1, set.len(), "one store an account");
        (self.set, self.replicas) = (set, others);
        self
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

    /// Breaks the rule `mutant` names (the simulator's proof that its checker catches it).
    #[cfg(any(test, feature = "test-util"))]
    pub(crate) fn with_mutant(mut self, mutant: Switch) -> Self {
        self.mutant = mutant;
        self
    }

    /// Reads `clock` (a simulated history's) instead of the host's clocks.
    #[cfg(any(test, feature = "test-util"))]
    pub(crate) fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Draws its lease ids and wake token from `random` (a history's or a scenario's seed): the
    /// next acquire's id and the wake token it was built with are drawn again, in that order.
    #[cfg(any(test, feature = "test-util"))]
    pub(crate) fn with_random(mut self, random: random::Source) -> Self {
        self.random = random;
        self.next_id = LeaseId::drawn(random);
        self.waker = Waker::new(random);
        self
    }

    /// A new lease id, for an acquire or a member record, from where this elector draws them.
    pub(crate) fn new_lease_id(&self) -> LeaseId {
        LeaseId::drawn(self.random)
    }
}
