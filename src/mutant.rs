//! Deliberately broken rules (docs/testing.md, "The simulator"): the simulator switches one on for
//! a run to prove that its checker catches what each rule prevents, handing a [`Switch`] to the
//! electors and guards of that history. They can be switched on only in builds with the `test-util`
//! feature; everywhere else [`Switch::on`] is `false` (a constant, in builds without it).

/// A rule of the safety model, broken on purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(not(any(test, feature = "test-util")), allow(dead_code))]
pub enum Mutant {
    /// The deadline of a lease counted from the answer to the acquire or renew, not from the
    /// moment the request was sent (`deadline-from-answer`).
    DeadlineFromAnswer,
    /// The lease handed on (Lease Blob `change`) before the body of the term is gone
    /// (`change-before-gone`).
    ChangeBeforeGone,
    /// The body started before the epoch write is confirmed (`start-before-epoch`).
    StartBeforeEpoch,
    /// A woken successor leads on the handoff notice alone, without an acquire of its own
    /// (`trust-the-notice`).
    TrustTheNotice,
    /// A body that survived its kill is taken for gone: the lease is handed on or released at
    /// once (`release-the-stuck`).
    ReleaseTheStuck,
    /// A woken successor leads on the epoch its handoff reserved for it once its acquire is
    /// answered, its epoch write still on its way (`lead-on-the-reservation`): the reserved
    /// epoch of docs/succession.md, "The handoff", without the write its confirmation needs.
    LeadOnTheReservation,
    /// A hand-on waits its whole confirm window after a wake-up refused (nothing, or another
    /// process, at the member's URL) (`hop-waits-out-refusal`): rule (g).
    HopWaitsOutRefusal,
    /// A follower that read a change of leader does not move up: it neither lists nor looks
    /// at the member ahead of it (`watcher-stays`): rule (f).
    WatcherStays,
    /// A member waiting for a slot learns of a free slot only at its listing: a poller's round
    /// acquires only the slots its last listing showed free (`slot-refill-late`).
    SlotRefillLate,
    /// The child's guard never comes due: it obeys no deadline the daemon tells it, and kills
    /// only when the daemon dies (`guard-sleeps`): rule (b) for a member frozen alone.
    GuardSleeps,
    /// The elector takes a crash loop's end of term for a plain release: no backoff, the
    /// member campaigns again at once (`no-crash-backoff`): rule (h).
    NoCrashBackoff,
    /// A member that saw its group led creates the blob it finds missing plainly, as a
    /// brand-new group's, when its listing shows no other live member (`create-unmarked`):
    /// the lock-delay of docs/safety.md, "Recovery from anything", skipped after a wipe.
    CreateUnmarked,
    /// A member that saw any slot of its group led takes every slot's blob for one led: a
    /// brand-new group's other slot, a blob no leader took yet, waits out a lock-delay before
    /// its first epoch (`brand-new-slot-delayed`): rule (d), a free slot filled late.
    BrandNewSlotDelayed,
    /// A member on a replica set leads on fewer than a majority of its replicas (`k - 1`)
    /// (`minority-leads`, docs/quorum.md): rules (a), (b).
    MinorityLeads,
    /// A member on a replica set counts its kill deadline from the latest of its replicas'
    /// deadlines instead of the k-th latest (`deadline-from-latest`): rule (b).
    DeadlineFromLatest,
    /// A member on a replica set takes its term's epoch from one counted replica instead of
    /// the largest of them (`epoch-from-one`): rule (c).
    EpochFromOne,
    /// A replica found missing or younger than `L + M` counts at once, without its lock-delay
    /// (`no-replica-lock-delay`): rule (a), after a replica wiped or rolled back.
    NoReplicaLockDelay,
    /// A request on a replica whose outcome is unknown is counted as a success
    /// (`count-unknown-outcome`): rules (a), (b).
    CountUnknownOutcome,
}

#[cfg_attr(not(any(test, feature = "test-util")), allow(dead_code))]
impl Mutant {
    /// Every mutant.
    pub const ALL: [Mutant; 18] = [
        Mutant::DeadlineFromAnswer,
        Mutant::ChangeBeforeGone,
        Mutant::StartBeforeEpoch,
        Mutant::TrustTheNotice,
        Mutant::ReleaseTheStuck,
        Mutant::LeadOnTheReservation,
        Mutant::HopWaitsOutRefusal,
        Mutant::WatcherStays,
        Mutant::SlotRefillLate,
        Mutant::GuardSleeps,
        Mutant::NoCrashBackoff,
        Mutant::CreateUnmarked,
        Mutant::BrandNewSlotDelayed,
        Mutant::MinorityLeads,
        Mutant::DeadlineFromLatest,
        Mutant::EpochFromOne,
        Mutant::NoReplicaLockDelay,
        Mutant::CountUnknownOutcome,
    ];

    /// Its name on the command line (`--mutant NAME`).
    pub fn name(self) -> &'static str {
        match self {
            Mutant::DeadlineFromAnswer => "deadline-from-answer",
            Mutant::ChangeBeforeGone => "change-before-gone",
            Mutant::StartBeforeEpoch => "start-before-epoch",
            Mutant::TrustTheNotice => "trust-the-notice",
            Mutant::ReleaseTheStuck => "release-the-stuck",
            Mutant::LeadOnTheReservation => "lead-on-the-reservation",
            Mutant::HopWaitsOutRefusal => "hop-waits-out-refusal",
            Mutant::WatcherStays => "watcher-stays",
            Mutant::SlotRefillLate => "slot-refill-late",
            Mutant::GuardSleeps => "guard-sleeps",
            Mutant::NoCrashBackoff => "no-crash-backoff",
            Mutant::CreateUnmarked => "create-unmarked",
            Mutant::BrandNewSlotDelayed => "brand-new-slot-delayed",
            Mutant::MinorityLeads => "minority-leads",
            Mutant::DeadlineFromLatest => "deadline-from-latest",
            Mutant::EpochFromOne => "epoch-from-one",
            Mutant::NoReplicaLockDelay => "no-replica-lock-delay",
            Mutant::CountUnknownOutcome => "count-unknown-outcome",
        }
    }

    /// The mutant named `name`, if there is one.
    pub fn from_name(name: &str) -> Option<Mutant> {
        Mutant::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// The mutant a simulated history runs with, handed to the elector and the guard's rules it
/// breaks (never read from a global, so that the production code keeps no hidden state). In
/// a build without the `test-util` feature it is empty and [`Switch::on`] is `false`, a
/// constant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Switch {
    #[cfg(any(test, feature = "test-util"))]
    mutant: Option<Mutant>,
}

impl Switch {
    /// `mutant` switched on (`None`: none).
    #[cfg(any(test, feature = "test-util"))]
    pub(crate) fn of(mutant: Option<Mutant>) -> Self {
        Self { mutant }
    }

    /// Whether `mutant` is switched on.
    #[cfg(any(test, feature = "test-util"))]
    pub(crate) fn on(self, mutant: Mutant) -> bool {
        self.mutant == Some(mutant)
    }

    /// Whether `mutant` is switched on: never, in a build without the `test-util` feature.
    #[cfg(not(any(test, feature = "test-util")))]
    #[inline(always)]
    pub(crate) const fn on(self, _mutant: Mutant) -> bool {
        false
    }
}
