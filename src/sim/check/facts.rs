//! The facts of one history, gathered from its trace in one pass: the bodies' lives, when each
//! member was up, frozen, stopping or standing by, the faults, the leases its members heard
//! they held, the epochs written, the handoffs and wake-ups, the lines the world saw, and the
//! causes of the episodes (src/cases.rs). Every rule reads these, never the elector's state.

use super::rules::Rules;
use crate::sim::trace::{Event, InLine, MemberId, What};
use crate::store::{LeaseId, Op};
use leasehold_core::Pace;
use std::collections::BTreeMap;
use std::time::Duration;

/// Intervals `[from, to]` of time.
pub(super) type Spans = Vec<(Duration, Duration)>;

/// Whether any span of `spans` meets `[from, to]`.
pub(super) fn overlaps(spans: &[(Duration, Duration)], from: Duration, to: Duration) -> bool {
    spans.iter().any(|(a, b)| *a <= to && *b >= from)
}

/// Whether `t` lies in one of `spans` (`[from, to)`).
pub(super) fn within(spans: Option<&Spans>, t: Duration) -> bool {
    spans.is_some_and(|s| s.iter().any(|(a, b)| *a <= t && t < *b))
}

/// One body's life.
#[derive(Debug, Clone)]
pub(super) struct Life {
    pub member: MemberId,
    pub slot: u32,
    pub epoch: u64,
    pub lease: LeaseId,
    pub start: Duration,
    /// When it survived its kill, if it did.
    pub stuck: Option<Duration>,
    /// `None`: alive at the end.
    pub gone: Option<Duration>,
    /// It failed at once (a broken deploy's child): its end, by itself, a non-zero exit.
    pub failed: bool,
}

impl Life {
    pub fn gone_or(&self, end: Duration) -> Duration {
        self.gone.unwrap_or(end)
    }

    /// Whether it runs (and can be stopped) at `t`.
    pub fn runs_at(&self, t: Duration) -> bool {
        self.start <= t && self.stuck.or(self.gone).is_none_or(|g| t < g)
    }
}

/// A handoff that landed (Lease Blob `change`), as its leader reported it.
#[derive(Debug, Clone)]
pub(super) struct Handoff {
    pub at: Duration,
    /// When the `change` went out: the lease moved somewhere between then and `at`.
    pub sent: Duration,
    pub slot: u32,
    pub to: String,
    /// Whether a member ran under that identity then, and was not stopping.
    pub alive: bool,
    /// The member that handed it.
    pub by: MemberId,
    /// Whether `to`'s record was there then.
    pub record: bool,
}

/// What happened in the world that may begin an episode (src/cases.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cause {
    /// SIGTERM to the member.
    Stop(MemberId),
    /// SIGKILL of the member.
    Crash(MemberId),
    /// Its body ended by itself.
    Ended(MemberId),
    /// Its body failed its health checks: it stops, and the member stands by.
    Unhealthy(MemberId),
    /// Its body got its stop signal (why is judged from the rest).
    Stopping(MemberId),
    /// Its body survived its kill.
    Stuck(MemberId),
    /// A slot's blob was deleted.
    Deleted(u32),
    /// Member records were deleted.
    RecordsDeleted,
    /// The member's process started.
    Up(MemberId),
    /// The member came back from a cooldown, or its stuck body is gone at last.
    Cooled(MemberId),
    /// A fault ended (its span is in `faults`).
    FaultEnded,
}

/// Everything the rules read.
#[derive(Default)]
pub(super) struct Facts<'a> {
    pub end: Duration,
    /// On a replica set, how many replicas a lease needs (a majority; 0 on one account).
    pub majority: usize,
    pub lives: Vec<Life>,
    pub frozen: BTreeMap<MemberId, Spans>,
    /// The freezes no guard runs on through: a pause of the whole machine, or a freeze of a
    /// member without a guard (the library's, whose body is a task of its own process).
    pub paused: BTreeMap<MemberId, Spans>,
    /// Each member's starts: when, and whether it was a daemon whose children have a guard.
    pub guarded: BTreeMap<MemberId, Vec<(Duration, bool)>>,
    pub up: BTreeMap<MemberId, Spans>,
    pub stopping: BTreeMap<MemberId, Spans>,
    pub standby: BTreeMap<MemberId, Spans>,
    /// Faults: the spans of those that last (instant ones are `[at, at]`).
    pub faults: Spans,
    /// Instant faults: crashes, deletions (a crash of a member is the crash's own cause).
    pub instant_faults: Vec<(Duration, Option<Cause>)>,
    /// Each member's identities, from each start on.
    pub identities: BTreeMap<MemberId, Vec<(Duration, String)>>,
    /// The URL each member advertised, from each start on (`None`: none).
    pub urls: BTreeMap<MemberId, Vec<(Duration, Option<String>)>>,
    /// Heard successes of acquires and renews, by lease: (member, sent, heard).
    pub heard: BTreeMap<LeaseId, Vec<(MemberId, Duration, Duration)>>,
    /// On a replica set, the same by replica: (member, replica, sent, heard).
    pub heard_on: BTreeMap<LeaseId, Vec<(MemberId, usize, Duration, Duration)>>,
    /// On a replica set, the releases the service applied, by lease: (replica, sent, when
    /// applied).
    pub released_on: BTreeMap<LeaseId, Vec<(usize, Duration, Duration)>>,
    /// On a replica set, the epochs written and confirmed, by lease: (epoch, when applied,
    /// replica).
    pub written_on: BTreeMap<LeaseId, Vec<(u64, Duration, usize)>>,
    pub handoffs: Vec<Handoff>,
    pub releases: Vec<(Duration, MemberId)>,
    /// Epochs written and confirmed by the service, by lease: (epoch, when applied).
    pub written: BTreeMap<LeaseId, Vec<(u64, Duration)>>,
    /// When each slot's blob was created plainly while no record but its creator's was leased
    /// (the group's whole state in storage gone), and by whom.
    pub erased: BTreeMap<u32, Vec<(Duration, MemberId)>>,
    /// The lines the world saw, in time order.
    pub lines: Vec<(Duration, &'a [InLine])>,
    /// Each member's listings: when the service applied them, and the line then.
    pub listings: BTreeMap<MemberId, Vec<(Duration, usize)>>,
    /// Wake-ups: (when answered, from, to, answer).
    pub wakes: Vec<(Duration, MemberId, String, &'static str)>,
    /// A leader's probes before a preemption that nothing answered: (when, leader, member).
    /// The leader passes that member over (it alone: nothing in storage says so).
    pub unanswered_probes: Vec<(Duration, MemberId, String)>,
    /// Epoch writes the store got, whatever their answer: (member, sent).
    pub epoch_writes: Vec<(MemberId, Duration)>,
    /// Each member's lease requests (acquires), by when they were sent.
    pub acquires: BTreeMap<MemberId, Vec<Duration>>,
    /// When each member heard an answer that showed a blob of its group led.
    pub saw_led: BTreeMap<MemberId, Vec<Duration>>,
    /// When each member's record was created (the service applied its create).
    pub joins: Vec<(Duration, MemberId)>,
    /// When a member's record was kept (created, acquired or renewed: the service applied it),
    /// by whom, on which replica (`None`: one account).
    pub records_kept: Vec<(Duration, MemberId, Option<usize>)>,
    /// When a member read another's record (the service applied the read), by whom, on which
    /// replica.
    pub record_reads: Vec<(Duration, MemberId, Option<usize>)>,
    /// The causes of episodes, in time order.
    pub causes: Vec<(Duration, Cause)>,
}

impl<'a> Facts<'a> {
    /// The identity `member` ran under at `t`.
    pub fn identity_at(&self, member: MemberId, t: Duration) -> Option<&str> {
        self.identities
            .get(&member)?
            .iter()
            .rev()
            .find(|(at, _)| *at <= t)
            .map(|(_, i)| i.as_str())
    }

    /// The URL `member` advertised at `t` (`None`: none, or not started yet).
    pub fn url_at(&self, member: MemberId, t: Duration) -> Option<&str> {
        self.urls
            .get(&member)?
            .iter()
            .rev()
            .find(|(at, _)| *at <= t)
            .and_then(|(_, url)| url.as_deref())
    }

    /// The URL that the last process of `identity` started by `t` advertised.
    pub fn url_of(&self, identity: &str, t: Duration) -> Option<&str> {
        let started = (self.identities.iter())
            .flat_map(|(m, ids)| ids.iter().map(move |(at, id)| (*at, *m, id)))
            .filter(|(at, _, id)| *at <= t && id.as_str() == identity)
            .max_by_key(|(at, m, _)| (*at, *m))?;
        self.url_at(started.1, started.0)
    }

    /// The line as the world last saw it at or before `t`.
    pub fn line_at(&self, t: Duration) -> Option<&[InLine]> {
        let i = self.lines.partition_point(|(at, _)| *at <= t);
        i.checked_sub(1).map(|i| self.lines[i].1)
    }

    /// Whether `m` could lead at `t`: up, not frozen, not standing by, not stopping.
    pub fn able(&self, m: MemberId, t: Duration) -> bool {
        within(self.up.get(&m), t)
            && !within(self.frozen.get(&m), t)
            && !within(self.standby.get(&m), t)
            && !within(self.stopping.get(&m), t)
    }

    /// Whether the lease `h` handed ran out by `until` (a lease duration after the last renew
    /// its leader heard of): from then on it is a free lease, which rule (d) holds the group
    /// to.
    pub fn lapsed(&self, h: &Handoff, lease: Duration, until: Duration) -> bool {
        self.lives
            .iter()
            .filter(|l| l.member == h.by && l.slot == h.slot && l.start <= h.at)
            .max_by_key(|l| l.start)
            .and_then(|l| self.expiry(l, lease))
            .is_some_and(|x| x <= until)
    }

    /// When a body's lease has surely expired on the service: a lease duration after the last
    /// acquire or renew of it that its member heard had succeeded. On a replica set, when fewer
    /// than a majority of its leases can be live: the k-th latest of its replicas' expiries
    /// (docs/quorum.md: from then on another member may hold a majority), a replica's lease
    /// ending earlier where the service applied its release after that acquire or renew (a
    /// replica won back that never counted for the body is given back while the body runs;
    /// not one after the body stuck: rule 7 gives nothing up then).
    pub fn expiry(&self, life: &Life, lease: Duration) -> Option<Duration> {
        if self.majority > 0 {
            let mut last: BTreeMap<usize, Duration> = BTreeMap::new();
            let heard = self.heard_on.get(&life.lease).into_iter().flatten();
            for (_, r, sent, _) in heard.filter(|(m, ..)| *m == life.member) {
                let at = last.entry(*r).or_insert(*sent);
                *at = (*at).max(*sent);
            }
            let released = self.released_on.get(&life.lease).into_iter().flatten();
            let mut ends: Vec<Duration> = (last.into_iter())
                .map(|(r, sent)| {
                    // One sent after the body stuck is rule 7's to judge (nothing is given
                    // up then): it does not shorten the lease here.
                    let before_stuck = |sent: &Duration| life.stuck.is_none_or(|s| *sent <= s);
                    let release = (released.clone())
                        .filter(|(on, sent_r, at)| *on == r && *at > sent && before_stuck(sent_r))
                        .map(|(_, _, at)| *at)
                        .min();
                    release.map_or(sent + lease, |at| at.min(sent + lease))
                })
                .collect();
            ends.sort_unstable_by(|a, b| b.cmp(a));
            return ends.get(self.majority - 1).copied();
        }
        self.heard
            .get(&life.lease)
            .into_iter()
            .flatten()
            .filter(|(m, ..)| *m == life.member)
            .map(|(_, sent, _)| *sent + lease)
            .max()
    }

    /// Whether `identity` may be passed over at `t`: it was handed the lease within
    /// [`Pace::PASSED_OVER_FOR`](Pace::PASSED_OVER_FOR) and did not take it (a
    /// notice passing it over tells every member that reads it, itself included).
    pub fn passed_over_at(&self, identity: &str, t: Duration) -> bool {
        let took = |from: Duration| {
            self.lives.iter().any(|l| {
                l.start >= from
                    && l.start <= from + Duration::from_secs(10)
                    && self.identity_at(l.member, l.start) == Some(identity)
            })
        };
        self.handoffs.iter().any(|h| {
            h.to == identity && h.at <= t && t < h.at + Pace::PASSED_OVER_FOR && !took(h.at)
        })
    }

    /// Whether `leader` passed `identity` over at `t` by a probe of its own that nothing
    /// answered.
    pub fn passed_by(&self, leader: MemberId, identity: &str, t: Duration) -> bool {
        self.unanswered_probes.iter().any(|(at, by, to)| {
            *by == leader && to == identity && *at <= t && t < *at + Pace::PASSED_OVER_FOR
        })
    }

    /// Whether `m` was frozen (in any way) at some time in `[from, to]`.
    pub fn frozen_in(&self, m: MemberId, from: Duration, to: Duration) -> bool {
        self.frozen.get(&m).is_some_and(|s| overlaps(s, from, to))
    }

    /// Whether `m` was frozen beyond its guard's reach at some time in `[from, to]`: its whole
    /// machine paused, or, without a guard, its process frozen. (A daemon frozen alone is not:
    /// its child's guard holds the child to its deadlines.)
    pub fn paused_in(&self, m: MemberId, from: Duration, to: Duration) -> bool {
        self.paused.get(&m).is_some_and(|s| overlaps(s, from, to))
    }

    /// Gathers the facts of `events`.
    pub fn gather(events: &'a [Event], rules: &Rules) -> Self {
        let mut g = Gathering {
            facts: Facts {
                end: rules.end,
                majority: match rules.replicas > 1 {
                    true => rules.majority(),
                    false => 0,
                },
                ..Facts::default()
            },
            slots: rules.slots > 1,
            ..Gathering::default()
        };
        for e in events {
            g.take(e);
        }
        g.finish()
    }
}

/// The state of the one pass.
#[derive(Default)]
struct Gathering<'a> {
    facts: Facts<'a>,
    open: BTreeMap<MemberId, usize>,
    frozen_since: BTreeMap<MemberId, Duration>,
    paused_since: BTreeMap<MemberId, Duration>,
    up_since: BTreeMap<MemberId, Duration>,
    stop_since: BTreeMap<MemberId, Duration>,
    /// The lease requests applied to a blob that was led, by (member, op, sent): their answer
    /// shows it led. Only an acquire, a read or a listing can ([`shows_led`]).
    led: std::collections::BTreeSet<(MemberId, Op, Duration)>,
    /// The last listing applied, waiting for the line the world saw then.
    listed: Option<(Duration, MemberId)>,
    /// The group has slots: a listing shows the slot blobs (the lease blob among them), their
    /// leases and holders.
    slots: bool,
    /// The replica the request being taken was on ([`What::OnReplica`]).
    replica: Option<usize>,
    /// The send of each member's latest `change` answered with a success.
    changed: BTreeMap<MemberId, Duration>,
}

/// Whether an answer to a request of kind `op` may show the blob led (its apply kept in
/// [`Gathering::led`] until then): an acquire, a read, a listing (as `take_what` says when).
fn shows_led(op: Op) -> bool {
    matches!(op, Op::Acquire | Op::Read | Op::List)
}

fn close(
    spans: &mut BTreeMap<MemberId, Spans>,
    since: &mut BTreeMap<MemberId, Duration>,
    m: MemberId,
    at: Duration,
) {
    if let Some(from) = since.remove(&m) {
        spans.entry(m).or_default().push((from, at));
    }
}

impl<'a> Gathering<'a> {
    fn take(&mut self, e: &'a Event) {
        self.take_what(e.at, &e.what);
    }

    fn take_what(&mut self, at: Duration, what: &'a What) {
        let f = &mut self.facts;
        match what {
            What::OnReplica { replica, what } => {
                self.replica = Some(*replica);
                self.take_what(at, what);
                self.replica = None;
            }
            What::Up {
                member,
                identity,
                guarded,
                url,
                ..
            } => {
                self.up_since.insert(*member, at);
                f.urls.entry(*member).or_default().push((at, url.clone()));
                f.guarded.entry(*member).or_default().push((at, *guarded));
                f.identities
                    .entry(*member)
                    .or_default()
                    .push((at, identity.clone()));
                f.causes.push((at, Cause::Up(*member)));
            }
            What::Crash { member } => {
                close(&mut f.up, &mut self.up_since, *member, at);
                // Killed while frozen: the freeze was a fault until the kill.
                if let Some(from) = self.frozen_since.get(member) {
                    f.faults.push((*from, at));
                    f.causes.push((at, Cause::FaultEnded));
                }
                close(&mut f.frozen, &mut self.frozen_since, *member, at);
                close(&mut f.paused, &mut self.paused_since, *member, at);
                close(&mut f.stopping, &mut self.stop_since, *member, at);
                f.faults.push((at, at));
                f.instant_faults.push((at, Some(Cause::Crash(*member))));
                f.causes.push((at, Cause::Crash(*member)));
            }
            What::Exit { member } => {
                close(&mut f.up, &mut self.up_since, *member, at);
                close(&mut f.stopping, &mut self.stop_since, *member, at);
            }
            What::Stop { member } => {
                self.stop_since.insert(*member, at);
                f.causes.push((at, Cause::Stop(*member)));
            }
            What::Freeze { member, machine } => {
                self.frozen_since.entry(*member).or_insert(at);
                let guarded = f
                    .guarded
                    .get(member)
                    .and_then(|g| g.last())
                    .is_some_and(|(_, g)| *g);
                if *machine || !guarded {
                    self.paused_since.entry(*member).or_insert(at);
                }
            }
            What::Thaw { member } => {
                close(&mut f.paused, &mut self.paused_since, *member, at);
                if let Some(from) = self.frozen_since.remove(member) {
                    f.frozen.entry(*member).or_default().push((from, at));
                    f.faults.push((from, at));
                    f.causes.push((at, Cause::FaultEnded));
                }
            }
            What::Fault {
                kind,
                detail,
                until,
            } => {
                let until = until.unwrap_or(at);
                f.faults.push((at, until));
                match *kind {
                    "deleted" => {
                        // "slot N's blob"
                        let slot = detail
                            .strip_prefix("slot ")
                            .and_then(|d| d.split('\'').next())
                            .and_then(|n| n.parse().ok())
                            .unwrap_or(0);
                        f.instant_faults.push((at, Some(Cause::Deleted(slot))));
                        f.causes.push((at, Cause::Deleted(slot)));
                    }
                    "records deleted" => {
                        f.instant_faults.push((at, Some(Cause::RecordsDeleted)));
                        f.causes.push((at, Cause::RecordsDeleted));
                    }
                    _ => f.causes.push((until, Cause::FaultEnded)),
                }
            }
            // Its bodies' failures tell of it ([`Life::failed`]); (j) reads the trace itself.
            What::Broken { .. } | What::StoodStill { .. } => {}
            What::Erased { slot, by } => f.erased.entry(*slot).or_default().push((at, *by)),
            What::Standby { member, until } => {
                f.standby.entry(*member).or_default().push((at, *until));
                f.causes.push((at, Cause::Unhealthy(*member)));
                f.causes.push((*until, Cause::Cooled(*member)));
            }
            What::StandbyMoved { member, until } => {
                if let Some(last) = f.standby.get_mut(member).and_then(|s| s.last_mut()) {
                    let was = last.1;
                    last.1 = *until;
                    for cause in f.causes.iter_mut() {
                        if *cause == (was, Cause::Cooled(*member)) {
                            cause.0 = *until;
                        }
                    }
                }
            }
            What::BodyStart {
                member,
                slot,
                epoch,
                lease,
            } => {
                self.open.insert(*member, f.lives.len());
                f.lives.push(Life {
                    member: *member,
                    slot: *slot,
                    epoch: *epoch,
                    lease: *lease,
                    start: at,
                    stuck: None,
                    gone: None,
                    failed: false,
                });
            }
            What::BodyStuck { member, .. } => {
                if let Some(&i) = self.open.get(member) {
                    f.lives[i].stuck = Some(at);
                }
                f.causes.push((at, Cause::Stuck(*member)));
            }
            What::BodyGone { member, how, .. } => {
                if let Some(i) = self.open.remove(member) {
                    f.lives[i].gone = Some(at);
                    f.lives[i].failed = *how == "failed at once";
                    if let Some(stuck) = f.lives[i].stuck {
                        f.standby.entry(*member).or_default().push((stuck, at));
                        f.causes.push((at, Cause::Cooled(*member)));
                    }
                }
                if how.starts_with("ended by itself") {
                    f.causes.push((at, Cause::Ended(*member)));
                }
            }
            What::BodyStopping { member, .. } => f.causes.push((at, Cause::Stopping(*member))),
            What::Released { member } => f.releases.push((at, *member)),
            What::HandedTo {
                to,
                slot,
                member,
                record,
            } => {
                // Alive: a member runs under that identity now, and is not stopping.
                let alive = f.identities.iter().any(|(m, ids)| {
                    ids.last().is_some_and(|(_, i)| i == to)
                        && self.up_since.contains_key(m)
                        && !self.stop_since.contains_key(m)
                });
                let sent = (self.changed.get(member).copied())
                    .filter(|sent| *sent <= at)
                    .unwrap_or(at);
                f.handoffs.push(Handoff {
                    at,
                    sent,
                    slot: *slot,
                    to: to.clone(),
                    alive,
                    by: *member,
                    record: *record,
                });
            }
            What::Wake {
                member,
                to,
                answer,
                token,
            } => {
                f.wakes.push((at, *member, to.clone(), answer));
                if !token && matches!(*answer, "timeout" | "unreachable") {
                    f.unanswered_probes.push((at, *member, to.clone()));
                }
            }
            What::Line { records } => {
                // Borrowed from the trace: its lines are most of its bytes.
                f.lines.push((at, records));
                if let Some((listed_at, m)) = self.listed.take() {
                    let index = f.lines.len() - 1;
                    f.listings.entry(m).or_default().push((listed_at, index));
                }
            }
            What::Applied {
                member,
                op,
                lease,
                sent,
                ok,
                epoch,
                led,
            } => {
                if *op == Op::WriteEpoch
                    && *ok
                    && let (Some(lease), Some(epoch)) = (lease, epoch)
                {
                    f.written.entry(*lease).or_default().push((*epoch, at));
                    if let Some(r) = self.replica {
                        f.written_on
                            .entry(*lease)
                            .or_default()
                            .push((*epoch, at, r));
                    }
                }
                if *op == Op::WriteEpoch {
                    f.epoch_writes.push((*member, *sent));
                }
                if *op == Op::Release
                    && *ok
                    && let (Some(lease), Some(r)) = (lease, self.replica)
                {
                    let on = f.released_on.entry(*lease).or_default();
                    on.push((r, *sent, at));
                }
                if *op == Op::Acquire {
                    f.acquires.entry(*member).or_default().push(*sent);
                }
                if *op == Op::MemberCreate && *ok {
                    f.joins.push((at, *member));
                }
                if matches!(op, Op::MemberCreate | Op::MemberAcquire | Op::MemberRenew) && *ok {
                    f.records_kept.push((at, *member, self.replica));
                }
                if *op == Op::MemberRead {
                    f.record_reads.push((at, *member, self.replica));
                }
                if *op == Op::List && *ok {
                    self.listed = Some((at, *member));
                }
                // An acquire refused by the holder shows it led; a read shows it only in an
                // answer the member could read (one refused, say for metadata that is not a
                // number, told it nothing of a holder), and a listing only of a group with
                // slots (a listing of the members alone shows no lease blob).
                let shown = match op {
                    Op::Acquire => true,
                    Op::Read => *ok,
                    Op::List => *ok && self.slots,
                    _ => false,
                };
                if *led && shown {
                    self.led.insert((*member, *op, *sent));
                }
            }
            What::Answered {
                member,
                op: op @ (Op::Acquire | Op::Renew),
                lease: Some(lease),
                sent,
                ok: true,
            } => {
                f.heard
                    .entry(*lease)
                    .or_default()
                    .push((*member, *sent, at));
                if let Some(r) = self.replica {
                    let on = f.heard_on.entry(*lease).or_default();
                    on.push((*member, r, *sent, at));
                }
                if shows_led(*op) && self.led.remove(&(*member, *op, *sent)) {
                    f.saw_led.entry(*member).or_default().push(at);
                }
            }
            What::Answered {
                member,
                op,
                sent,
                ok,
                ..
            } => {
                if *op == Op::Change && *ok {
                    let latest = self.changed.entry(*member).or_insert(*sent);
                    *latest = (*latest).max(*sent);
                }
                if *op == Op::Acquire {
                    f.acquires.entry(*member).or_default().push(*sent);
                }
                if shows_led(*op) && self.led.remove(&(*member, *op, *sent)) {
                    f.saw_led.entry(*member).or_default().push(at);
                }
            }
        }
    }

    fn finish(mut self) -> Facts<'a> {
        let f = &mut self.facts;
        let end = f.end;
        for (m, from) in std::mem::take(&mut self.frozen_since) {
            // Still frozen at the end.
            f.frozen.entry(m).or_default().push((from, end));
            f.faults.push((from, end));
        }
        for (m, from) in std::mem::take(&mut self.paused_since) {
            f.paused.entry(m).or_default().push((from, end));
        }
        for (m, from) in std::mem::take(&mut self.up_since) {
            f.up.entry(m).or_default().push((from, end));
        }
        for (m, from) in std::mem::take(&mut self.stop_since) {
            f.stopping.entry(m).or_default().push((from, end));
        }
        for life in f.lives.iter().filter(|l| l.gone.is_none()) {
            if let Some(stuck) = life.stuck {
                f.standby.entry(life.member).or_default().push((stuck, end));
            }
        }
        for list in f.acquires.values_mut() {
            list.sort();
            list.dedup();
        }
        f.causes.sort_by_key(|(at, _)| *at);
        self.facts
    }
}
