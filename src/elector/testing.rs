//! What the elector's unit tests share: the design's timings, an elector on the in-memory
//! store, and one that leads already; member records; instances of a group on one store.

use super::{Elector, Error};
use crate::store::Op;
use crate::store::memory::MemoryStore;
use crate::store::{ETag, LeaseId, LeaseState, Member, MemberKey, MemberRecord, StoreError};
use crate::timing::Timing;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The defaults: L = 15 s, R = 4 s, acquire_interval = 1 s, M = 1 s, G = 5 s.
pub fn timing() -> Timing {
    Timing::default()
}

/// The record of a live member `identity` of `priority`, as a listing shows it: joined at a
/// fixed date, not settled, with no wake-up URL and no cooldown.
pub fn record(identity: &str, priority: i64) -> MemberRecord {
    MemberRecord {
        key: MemberKey::of(identity),
        member: Member {
            identity: identity.into(),
            priority,
            acquires_with: LeaseId::random(),
            advertise: None,
            wake_token: None,
            standby_until: None,
            slots: 1,
            settled: None,
        },
        joined: time::OffsetDateTime::from_unix_timestamp(1_700_000_000).unwrap(),
        lease: LeaseState::Leased,
        etag: ETag("1".into()),
        age: std::time::Duration::ZERO,
    }
}

pub fn transient() -> StoreError {
    StoreError::Status {
        status: 503,
        code: Some("ServerBusy".into()),
    }
}

/// What the tasks of a group did: who ran which epoch from when to when (paused time).
#[derive(Clone, Default)]
pub struct Lives(Arc<std::sync::Mutex<Vec<Life>>>);

/// One task's run.
#[derive(Debug, Clone)]
pub struct Life {
    pub identity: String,
    pub epoch: u64,
    /// The slot it held (0 without slots).
    pub slot: u32,
    pub start: tokio::time::Instant,
    pub gone: Option<tokio::time::Instant>,
}

impl Lives {
    pub fn all(&self) -> Vec<Life> {
        self.0.lock().unwrap().clone()
    }

    /// The `n`th task started (from 1), once it has, waiting on paused time (a scenario where
    /// it never starts fails after an hour of it, rather than running for ever).
    pub async fn nth(&self, n: usize) -> Life {
        self.waiting(&format!("task {n} to start"), |all| all.get(n - 1).cloned())
            .await
    }

    /// The `n`th task's end, once it has ended (as [`Lives::nth`] waits).
    pub async fn gone(&self, n: usize) -> tokio::time::Instant {
        self.waiting(&format!("task {n} to end"), |all| {
            all.get(n - 1).and_then(|l| l.gone)
        })
        .await
    }

    /// What `found` finds in the lives, once it does; a panic naming `what` and the lives
    /// after an hour of paused time without it.
    async fn waiting<T>(&self, what: &str, found: impl Fn(&[Life]) -> Option<T>) -> T {
        let until = tokio::time::Instant::now() + std::time::Duration::from_secs(3600);
        loop {
            if let Some(t) = found(&self.all()) {
                return t;
            }
            let now = tokio::time::Instant::now();
            assert!(now < until, "waited an hour for {what}: {:?}", self.all());
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
    }

    /// Never two tasks at once: each starts after the one before it is gone, with a larger
    /// epoch.
    pub fn assert_one_at_a_time(&self) {
        let lives = self.all();
        for w in lives.windows(2) {
            let gone = w[0]
                .gone
                .unwrap_or_else(|| panic!("{:?} still runs: {lives:?}", w[0]));
            assert!(w[1].start >= gone, "overlap: {lives:?}");
            assert!(w[1].epoch > w[0].epoch, "epochs: {lives:?}");
        }
    }
}

/// Marks its life gone when dropped: at its end, or when aborted.
struct Gone(Lives, usize);

impl Drop for Gone {
    fn drop(&mut self) {
        self.0.0.lock().unwrap()[self.1].gone = Some(tokio::time::Instant::now());
    }
}

/// The variable that replays a scenario's random draws (the poll and watch jitter, lease ids,
/// wake tokens): the seed a run printed.
pub const SCENARIO_SEED: &str = "LEASEHOLD_SCENARIO_SEED";

thread_local! {
    /// Whether this test's thread has had its seed (each test runs on a thread of its own).
    static SEEDED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Seeds this thread's random draws once, at a scenario's first instance: from
/// [`SCENARIO_SEED`] when set, else a fresh seed, printed (a failing test shows its output), so
/// that a failure that hangs on where a jittered poll fell replays exactly. Its instances draw
/// their lease ids and wake tokens from it too ([`crate::random::Source::Seed`]).
fn seed_jitter() {
    if SEEDED.replace(true) {
        return;
    }
    let seed = match std::env::var(SCENARIO_SEED) {
        Ok(s) => s
            .parse()
            .unwrap_or_else(|_| panic!("{SCENARIO_SEED}={s:?} is not a number")),
        Err(_) => uuid::Uuid::new_v4().as_u64_pair().0,
    };
    println!("scenario seed {seed} (replay: {SCENARIO_SEED}={seed})");
    fastrand::seed(seed);
}

/// How an [`Instance`]'s task and connection behave.
#[derive(Debug, Clone, Copy, Default)]
pub struct Shape {
    /// The task ends by itself after this long (`None`: it runs until cancelled).
    pub runs: Option<std::time::Duration>,
    /// Once cancelled, the task takes this long to end (a child that takes its time to stop).
    pub stops_in: std::time::Duration,
    /// Each answer of its connection to storage comes this late.
    pub answers_in: std::time::Duration,
}

/// An instance of a group on the in-memory store (through a client of its own), running
/// `run_while_leader` with a task that records its life in `lives` and runs until cancelled
/// (or for `runs`, then ends by itself).
pub struct Instance {
    pub identity: String,
    pub client: Arc<MemoryStore>,
    pub waker: super::Waker,
    stop: CancellationToken,
    pub running: tokio::task::JoinHandle<Result<(), Error>>,
}

impl Instance {
    pub fn start(
        store: &Arc<MemoryStore>,
        identity: &str,
        lives: &Lives,
        runs: Option<std::time::Duration>,
    ) -> Self {
        Self::start_with(store, identity, lives, runs, |e| e)
    }

    pub fn start_with(
        store: &Arc<MemoryStore>,
        identity: &str,
        lives: &Lives,
        runs: Option<std::time::Duration>,
        setup: impl FnOnce(Elector<MemoryStore>) -> Elector<MemoryStore>,
    ) -> Self {
        let shape = Shape {
            runs,
            ..Shape::default()
        };
        Self::start_as(store, identity, lives, shape, setup)
    }

    /// An instance whose task and connection are as `shape` says.
    pub fn start_as(
        store: &Arc<MemoryStore>,
        identity: &str,
        lives: &Lives,
        shape: Shape,
        setup: impl FnOnce(Elector<MemoryStore>) -> Elector<MemoryStore>,
    ) -> Self {
        let client = Arc::new(store.client(shape.answers_in));
        Self::start_on(client, identity, lives, shape, setup)
    }

    /// An instance that reaches the store through `client` (its `answers_in` left aside).
    pub fn start_on(
        client: Arc<MemoryStore>,
        identity: &str,
        lives: &Lives,
        shape: Shape,
        setup: impl FnOnce(Elector<MemoryStore>) -> Elector<MemoryStore>,
    ) -> Self {
        seed_jitter();
        let Shape { runs, stops_in, .. } = shape;
        let elector = Elector::with_store(client.clone(), identity, timing()).unwrap();
        let elector = setup(elector.with_random(crate::random::Source::Seed));
        let waker = elector.waker();
        let stop = CancellationToken::new();
        let shutdown = stop.clone();
        let (lives, me) = (lives.clone(), identity.to_owned());
        let running = tokio::spawn(elector.run_while_leader(
            async move { shutdown.cancelled().await },
            move |leadership: crate::Leadership| {
                let (lives, me) = (lives.clone(), me.clone());
                async move {
                    let index = {
                        let mut all = lives.0.lock().unwrap();
                        all.push(Life {
                            identity: me,
                            epoch: leadership.epoch(),
                            slot: leadership.slot(),
                            start: tokio::time::Instant::now(),
                            gone: None,
                        });
                        all.len() - 1
                    };
                    let _gone = Gone(lives, index);
                    match runs {
                        Some(runs) => tokio::time::sleep(runs).await,
                        None => {
                            leadership.cancelled().await;
                            tokio::time::sleep(stops_in).await;
                        }
                    }
                }
            },
        ));
        Self {
            identity: identity.to_owned(),
            client,
            waker,
            stop,
            running,
        }
    }

    /// Shutdown, as SIGTERM: returns once the elector has.
    pub async fn stop(self) {
        self.stop.cancel();
        self.running.await.unwrap().unwrap();
    }

    /// A crash: the elector and its task vanish at once, releasing nothing.
    pub fn crash(self) {
        self.running.abort();
    }

    /// A SIGKILL: a crash, and nothing it had in flight reaches storage any more.
    pub fn kill(self) {
        self.client.cut_off(true);
        self.crash();
    }
}

/// Shuts down each of `instances`, in order.
pub async fn stop_all(instances: impl IntoIterator<Item = Instance>) {
    for i in instances {
        i.stop().await;
    }
}

/// Wake-ups delivered in memory: each goes, at once, to the waker of the instance that
/// advertises the URL it names ([`Wakes::serve`]), with what it carries passed through
/// `carried` (to forge or spoil the [`HANDOFF_HEADER`](super::HANDOFF_HEADER) value).
#[derive(Clone, Default)]
pub struct Wakes(Arc<std::sync::Mutex<std::collections::BTreeMap<String, super::Waker>>>);

impl Wakes {
    /// `waker` answers the wake-ups sent to `url`.
    pub fn serve(&self, url: &str, waker: &super::Waker) {
        self.0.lock().unwrap().insert(url.to_owned(), waker.clone());
    }

    /// Nothing answers at `url` any more (its process died): wake-ups sent there are refused
    /// (no connection).
    pub fn gone(&self, url: &str) {
        self.0.lock().unwrap().remove(url);
    }

    /// The sender a leader's elector sends its wake-ups with.
    pub fn sender(
        &self,
        carried: impl Fn(Option<String>) -> Option<String> + Send + Sync + 'static,
    ) -> super::wake::Sender {
        let wakes = self.0.clone();
        let carried = Arc::new(carried);
        super::wake::Sender::Simulated(Arc::new(
            move |url: &str,
                  token: Option<&crate::secret::Secret>,
                  handoff: Option<String>,
                  probe: bool| {
                let waker = wakes.lock().unwrap().get(url).cloned();
                let token = token.map_or_else(String::new, |t| t.expose().to_owned());
                let handoff = carried(handoff);
                Box::pin(async move {
                    use super::wake::WakeSent;
                    let answer = waker.map(|w| match probe {
                        true => w.probe(&token),
                        false => w.wake_handed(&token, handoff.as_deref()),
                    });
                    match answer {
                        Some(super::WakeAnswer::Accepted) => WakeSent::Ok,
                        Some(super::WakeAnswer::TooSoon) => WakeSent::Later,
                        // Without the member's token.
                        Some(_) => WakeSent::Refused,
                        // Nothing listens there: the connection is refused.
                        None => WakeSent::Unreachable,
                    }
                })
            },
        ))
    }
}

/// Waits (on paused time) until `identity`'s record is in the line and alive.
pub async fn joined(store: &MemoryStore, identity: &str) {
    while !store.member(identity).is_some_and(|r| r.is_alive()) {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// What one member sent over a while, by price class (docs/slots.md's table).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Cost {
    /// Lease Blob operations on slots and records ("other" operations, billed as reads).
    pub lease: usize,
    /// Get Blob Properties of the group's blob, a slot, or a record.
    pub read: usize,
    /// Set Blob Metadata, Put Blob, Delete Blob (the write class).
    pub write: usize,
    /// List Blobs (the list class: about ten reads).
    pub list: usize,
}

impl Cost {
    pub fn of(sent: &[Op]) -> Self {
        let mut c = Cost::default();
        for op in sent {
            match op {
                Op::Prepare => c.write += 1,
                Op::Acquire
                | Op::Renew
                | Op::Release
                | Op::Change
                | Op::MemberAcquire
                | Op::MemberRenew => c.lease += 1,
                Op::Read | Op::MemberRead => c.read += 1,
                Op::WriteEpoch
                | Op::Notice
                | Op::MemberCreate
                | Op::MemberWrite
                | Op::MemberDelete => c.write += 1,
                Op::List => c.list += 1,
            }
        }
        c
    }

    /// Requests, a List counted as ten.
    pub fn units(&self) -> usize {
        self.lease + self.read + self.write + 10 * self.list
    }

    /// Per minute, over an hour, as the docs' table says it.
    pub fn per_minute(&self) -> String {
        let m = |n: usize| n as f64 / 60.0;
        format!(
            "lease {:.1}, read {:.1}, write {:.2}, list {:.2}, total {:.1} (a List = 10)",
            m(self.lease),
            m(self.read),
            m(self.write),
            m(self.list),
            m(self.units())
        )
    }
}

/// A client's network on which requests arrive `up` late while `on` is set (their answers
/// come back at once): every request, or with `only` just the next of that kind (then `on`
/// goes off again, and `sent` says it went out).
pub struct Arrives {
    pub on: std::sync::atomic::AtomicBool,
    pub up: std::time::Duration,
    pub only: Option<Op>,
    pub sent: std::sync::atomic::AtomicBool,
    /// The requests of this client the store applied: when each arrived, and whether it went
    /// through.
    pub landed: std::sync::Mutex<Vec<(Op, tokio::time::Instant, bool)>>,
}

impl Arrives {
    /// Every request `up` late once `on` is set.
    pub fn late(up: std::time::Duration) -> Self {
        Self {
            on: Default::default(),
            up,
            only: None,
            sent: Default::default(),
            landed: Default::default(),
        }
    }

    /// The next request of kind `op` `up` late once `on` is set.
    pub fn next(op: Op, up: std::time::Duration) -> Self {
        Self {
            only: Some(op),
            ..Self::late(up)
        }
    }
}

impl crate::store::memory::Network for Arrives {
    fn trip(&self, op: Op, _: Option<crate::store::LeaseId>) -> crate::store::memory::Trip {
        use std::sync::atomic::Ordering::SeqCst;
        let late = match self.only {
            None => self.on.load(SeqCst),
            Some(kind) => kind == op && self.on.swap(false, SeqCst),
        };
        self.sent.fetch_or(late, SeqCst);
        crate::store::memory::Trip {
            up: if late {
                self.up
            } else {
                std::time::Duration::ZERO
            },
            down: std::time::Duration::ZERO,
            fate: crate::store::memory::Fate::Deliver,
        }
    }
    fn applied(
        &self,
        op: Op,
        _: Option<crate::store::LeaseId>,
        _: tokio::time::Instant,
        outcome: Result<(), &StoreError>,
        _: crate::store::memory::Applied,
    ) {
        let at = tokio::time::Instant::now();
        self.landed.lock().unwrap().push((op, at, outcome.is_ok()));
    }
    fn answered(
        &self,
        _: Op,
        _: Option<crate::store::LeaseId>,
        _: tokio::time::Instant,
        _: Result<(), &StoreError>,
    ) {
    }
}
