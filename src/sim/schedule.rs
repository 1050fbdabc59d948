//! Scripted schedules of faults: what happens to whom, and when, written down. Each fault the
//! simulator, the benchmark, chaos or a review found is kept as one ([`regressions`]), so that
//! it is replayed against whatever the elector becomes: a script names its members, its slots,
//! how its bodies stop, and its steps, each at an instant, a while after the step before, or a
//! while after a slot is led again; a step names its member outright or by its part now (the
//! holder of a slot, the member first in line after the leader). Nothing in a script depends on
//! the protocol's random draws (its network draws from a stream of its own, src/sim/dice.rs),
//! so a script keeps its meaning when the elector's draws change, where a seed would replay
//! another history.

use super::body::{Ends, Plans};
use super::network::{ms, secs};
use super::trace::MemberId;
use super::world::{Member, World};
use std::time::Duration;
use tokio::time::Instant;

/// One member of a scripted group.
#[derive(Debug, Clone)]
pub struct Cast {
    /// Its identity.
    pub identity: &'static str,
    /// Its `[election].priority`.
    pub priority: i64,
    /// Whether it advertises a wake-up URL (`advertise`).
    pub advertised: bool,
    /// Its `[election].preempt_after` (`None`: off).
    pub preempt_after: Option<Duration>,
    /// A daemon, whose children have a guard (`true`); or the library's, without one.
    pub guarded: bool,
}

impl Cast {
    /// A member of priority 0 that advertises, without preemption.
    pub fn new(identity: &'static str) -> Self {
        Self {
            identity,
            priority: 0,
            advertised: true,
            preempt_after: None,
            guarded: true,
        }
    }

    /// A program that runs the library: its body is a task of its own, with no guard.
    pub fn library(mut self) -> Self {
        self.guarded = false;
        self
    }

    /// Without a wake-up URL.
    pub fn silent(mut self) -> Self {
        self.advertised = false;
        self
    }

    /// With this priority, preempting after `after`.
    pub fn priority(mut self, priority: i64, after: Option<Duration>) -> Self {
        self.priority = priority;
        self.preempt_after = after;
        self
    }
}

/// Who a step is done to.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    /// This member (by its place in the cast).
    Member(usize),
    /// Whoever holds this slot now.
    Holder(u32),
    /// The member whose record is first in line after the holder of slot 0, whose process
    /// runs.
    Successor,
    /// The member the step before was done to.
    Last,
}

/// What happens.
#[derive(Debug, Clone, Copy)]
pub enum Step {
    /// Its process starts (again), under its identity.
    Start(Target),
    /// Its process starts again elsewhere, under a new identity (a new pod).
    StartElsewhere(Target),
    /// Its process starts again under its identity, on another port (a service manager's
    /// restart with `listen` on port 0; a pod's new address): its old URL answers nothing.
    StartOnAnotherPort(Target),
    /// SIGTERM; it does not come back unless a step starts it.
    Stop(Target),
    /// SIGKILL; it does not come back unless a step starts it.
    Crash(Target),
    /// SIGSTOP of its process alone for this long, then SIGCONT (a daemon's children and
    /// their guards run on).
    Freeze(Target, Duration),
    /// A pause of its whole machine for this long (a paused VM, `docker pause`).
    Pause(Target, Duration),
    /// Its deploy is broken for this long (its children fail at once), then fixed.
    Break(Target, Duration),
    /// Cut off from storage for this long.
    CutOff(Target, Duration),
    /// Storage answers 503 to all for this long.
    Outage(Duration),
    /// This slot's blob is deleted.
    DeleteBlob(u32),
    /// Every member record is deleted.
    DeleteRecords,
    /// Every member record and every slot's blob is deleted.
    Wipe,
    /// Its body ends by itself (`on_exit = "release"`).
    EndBody(Target),
}

/// When a step comes.
#[derive(Debug, Clone, Copy)]
pub enum When {
    /// This long after the history began.
    At(Duration),
    /// This long after the step before.
    After(Duration),
    /// Once a body of this slot runs that started after the step before, this long after it
    /// started.
    Led(u32, Duration),
}

/// A scripted schedule.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// Its name (`simulate --schedule NAME`).
    pub name: &'static str,
    /// What it found, and where.
    pub found: &'static str,
    /// `[lease].slots`.
    pub slots: u32,
    /// The group, each started at once.
    pub members: Vec<Cast>,
    /// How long each body takes to stop once told to.
    pub stops_in: Duration,
    /// The steps, in order.
    pub steps: Vec<(When, Step)>,
    /// How long the history runs.
    pub length: Duration,
    /// The seed of the protocol's draws (jitter, lease ids).
    pub seed: u64,
    /// Whether the history must log no WARN or ERROR line (what it does is routine): each
    /// one is a violation (`w`) beside the rules'.
    pub quiet: bool,
}

impl Schedule {
    /// The members as the world keeps them.
    pub(super) fn cast(&self) -> Vec<Member> {
        self.members
            .iter()
            .map(|c| Member {
                identity: c.identity.to_owned(),
                priority: c.priority,
                preempt_after: c.preempt_after,
                advertised: c.advertised,
                guarded: c.guarded,
                broken: Default::default(),
                incarnation: 0,
                port: 0,
                running: None,
                restart_at: None,
                after_exit: None,
            })
            .collect()
    }

    /// How its bodies live.
    pub(super) fn plans(&self) -> Plans {
        Plans::Scripted {
            stops_in: self.stops_in,
            ends: Ends::default(),
        }
    }
}

impl World {
    /// Plays a script: its members start at once, then its steps, each when it says.
    pub(super) async fn play_script(&mut self, script: Schedule) {
        let end = self.start + script.length;
        for id in 0..self.members.len() {
            if id > 0 {
                // In the order of the cast, a moment apart (each joins the line in turn).
                self.run_until(Instant::now() + ms(50)).await;
            }
            self.start_member(id);
        }
        // (A first step waiting for a slot to be led counts a body started with the cast.)
        let mut last_at = self.start;
        let mut last: Option<MemberId> = None;
        for (when, step) in &script.steps {
            let at = match *when {
                When::At(d) => self.start + d,
                When::After(d) => last_at + d,
                When::Led(slot, then) => {
                    let since = self.recorder.since_start(last_at);
                    loop {
                        if let Some((_, started)) = self.holder(slot)
                            && started >= since
                        {
                            break self.start + started + then;
                        }
                        if Instant::now() >= end {
                            return;
                        }
                        self.run_until(Instant::now() + ms(10)).await;
                    }
                }
            };
            self.run_until(at.min(end)).await;
            if Instant::now() >= end {
                return;
            }
            last = self.carry_out_step(*step, last);
            last_at = Instant::now();
        }
        self.run_until(end).await;
    }

    /// The member `target` names now.
    fn target(&self, target: Target, last: Option<MemberId>) -> Option<MemberId> {
        match target {
            Target::Member(i) => Some(i),
            Target::Holder(slot) => self.holder(slot).map(|(m, _)| m),
            Target::Last => last,
            Target::Successor => {
                let leader = self
                    .holder(0)
                    .map(|(m, _)| self.members[m].identity.clone());
                self.recorder
                    .look()
                    .into_iter()
                    .filter(|r| Some(&r.identity) != leader.as_ref())
                    .find_map(|r| r.owner)
            }
        }
    }

    /// Does `step`; returns the member it was done to (or the last one, for a step to none).
    fn carry_out_step(&mut self, step: Step, last: Option<MemberId>) -> Option<MemberId> {
        let now = Instant::now();
        let member = |world: &Self, t| world.target(t, last);
        match step {
            Step::Start(t) | Step::StartElsewhere(t) | Step::StartOnAnotherPort(t) => {
                let id = member(self, t)?;
                if self.members[id].running.is_none() {
                    self.members[id].restart_at = None;
                    if matches!(step, Step::StartOnAnotherPort(_)) {
                        self.members[id].port += 1;
                    }
                    self.start_member_as(id, matches!(step, Step::StartElsewhere(_)));
                }
                Some(id)
            }
            Step::Stop(t) => {
                let id = member(self, t)?;
                self.stop_member(id, None);
                Some(id)
            }
            Step::Crash(t) => {
                let id = member(self, t)?;
                self.crash_member(id, None);
                Some(id)
            }
            Step::Freeze(t, long) | Step::Pause(t, long) => {
                let id = member(self, t)?;
                self.freeze_member(id, long, matches!(step, Step::Pause(..)));
                Some(id)
            }
            Step::Break(t, long) => {
                let id = member(self, t)?;
                self.break_deploy(id, long);
                Some(id)
            }
            Step::CutOff(t, long) => {
                let id = member(self, t)?;
                self.link(id, |l| l.cut_until = Some(now + long));
                self.fault(
                    "cut off",
                    format!("m{id} cannot reach storage"),
                    Some(now + long),
                );
                Some(id)
            }
            Step::Outage(long) => {
                self.faults
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .outage_until = Some(now + long);
                self.fault(
                    "outage",
                    "storage answers 503 to all".into(),
                    Some(now + long),
                );
                last
            }
            Step::DeleteBlob(slot) => {
                self.delete_blob(slot);
                last
            }
            Step::DeleteRecords | Step::Wipe => {
                if matches!(step, Step::Wipe) {
                    for slot in 0..self.slots {
                        self.delete_blob(slot);
                    }
                }
                let all: Vec<String> = self.members.iter().map(|m| m.identity.clone()).collect();
                self.delete_records(&all);
                last
            }
            Step::EndBody(t) => {
                let id = member(self, t)?;
                self.end_body(id);
                Some(id)
            }
        }
    }
}

/// How long after the crash in `crashed-holder-ahead` the holder of slot 2 stops (and hands its
/// slot to the poller): late enough that the member behind the poller sees the change only
/// after the crashed holder's lease ran out.
const HANDOFF_AFTER_CRASH: Duration = Duration::from_millis(12_000);

/// The faults found so far, each kept as a script (docs/testing.md says what each found).
pub fn regressions() -> Vec<Schedule> {
    // The others' bodies end by themselves 3 s into each term, so that the lease comes back
    // to the crash-looping member as soon as it is out of its backoff.
    let mut turns = vec![
        (When::At(secs(1)), Step::Break(Target::Member(0), secs(120))),
        (
            When::After(Duration::ZERO),
            Step::EndBody(Target::Member(0)),
        ),
    ];
    for _ in 0..40 {
        turns.push((When::Led(0, secs(3)), Step::EndBody(Target::Holder(0))));
    }
    let mut refills = Vec::new();
    for _ in 0..10 {
        refills.push((When::Led(1, secs(2)), Step::Crash(Target::Holder(1))));
        refills.push((When::After(ms(10)), Step::StartElsewhere(Target::Last)));
    }
    vec![
        Schedule {
            name: "hop-to-the-dead",
            found: "a review, on Azurite: a rolling restart, the successor SIGKILLed a second \
                    before the leader's SIGTERM while another dead member's record was still \
                    leased; the hand-on to the second dead member, its wake-up refused, waited \
                    its whole 7.5 s window (4 s documented)",
            slots: 1,
            members: cast(4),
            stops_in: ms(10),
            steps: vec![
                (When::Led(0, secs(10)), Step::Crash(Target::Successor)),
                (When::After(secs(3)), Step::Crash(Target::Successor)),
                (When::After(secs(1)), Step::Stop(Target::Holder(0))),
            ],
            length: secs(90),
            seed: 1,
            quiet: false,
        },
        Schedule {
            name: "slot-refills-behind-a-ghost",
            found: "a review, on Azurite: slots = 3, five members, the holder of slot 1 \
                    SIGKILLed and restarted ten times in a row; 4 of 10 refills took 27.7-32.1 s \
                    (17.2 s documented): the member killed the step before still held its \
                    record, and its place ahead in line. Each comes back as a new pod (a new \
                    identity), so the dead one's record stays until its lease runs out",
            slots: 3,
            members: cast(5),
            stops_in: ms(10),
            steps: refills,
            length: secs(600),
            seed: 1,
            quiet: false,
        },
        Schedule {
            name: "slot-wipe",
            found: "a review, on Azurite: slots = 3, five members, every member record and every \
                    slot blob deleted 120 ms before a holder's renew; the holder of slot 1 lost \
                    its slot and led slot 2 for 766 ms beside slot 2's live child",
            slots: 3,
            members: cast(5),
            stops_in: ms(10),
            steps: vec![
                // Slot 2 led at a moment of its own (its holder renews out of step with
                // slot 1's), then everything wiped just after its renew: slot 2's holder
                // learns of it only a renew interval later.
                (When::Led(2, secs(1)), Step::Crash(Target::Holder(2))),
                (When::After(Duration::ZERO), Step::Start(Target::Last)),
                (When::Led(2, ms(4050)), Step::Wipe),
            ],
            length: secs(120),
            seed: 1,
            quiet: false,
        },
        Schedule {
            name: "crashed-holder-ahead",
            found: "the simulator, seeds 1361 and 3495 of the stream without the old backoff \
                    crate's draws: slots = 3, a slot holder ranked ahead of the waiting members \
                    crashed; the poller took another slot by a handoff, and the member behind \
                    it, listing after the crashed holder's lease ran out, found that holder \
                    waiting ahead of it and probed it only a watch later: slot 0 was led again \
                    after 19-20 s (17.2 s documented)",
            slots: 3,
            members: cast(5),
            stops_in: ms(10),
            steps: vec![
                // m0 holds slot 0 and ranks first; m3 polls, m4 watches m3.
                (When::Led(0, secs(10)), Step::Crash(Target::Member(0))),
                // The poller takes slot 2 by a handoff once slot 0's lease is nearly out.
                (
                    When::After(HANDOFF_AFTER_CRASH),
                    Step::Stop(Target::Holder(2)),
                ),
            ],
            length: secs(90),
            seed: 1,
            quiet: false,
        },
        Schedule {
            name: "freeze-the-daemon",
            found: "issue 40, on Azurite: SIGSTOP to the leading daemon alone let its child run \
                    7.8 s beside the next leader's (the daemon's timers and backstop froze with \
                    it); its guard now stops it at the stop deadline and kills it at the kill \
                    deadline, so rule (b) holds for it without the frozen exemption",
            slots: 1,
            members: cast(3),
            stops_in: ms(10),
            steps: vec![(
                When::Led(0, secs(2)),
                Step::Freeze(Target::Holder(0), secs(25)),
            )],
            length: secs(90),
            seed: 1,
            quiet: false,
        },
        Schedule {
            name: "crash-loop-alone",
            found: "issue 40, on Azurite: a lone member whose child exits 1 at once started it 7 \
                    times in 8 s, each term spending an epoch; the backoff doubles from 1 s (at \
                    most 7 starts in 60 s), and the fixed deploy leads at its next attempt",
            slots: 1,
            members: cast(1),
            stops_in: ms(10),
            steps: vec![
                (When::At(secs(1)), Step::Break(Target::Member(0), secs(90))),
                (
                    When::After(Duration::ZERO),
                    Step::EndBody(Target::Member(0)),
                ),
            ],
            length: secs(180),
            seed: 1,
            quiet: false,
        },
        Schedule {
            name: "crash-loop-in-a-group",
            found: "issue 40: in a group of three, a member whose child fails at once stands \
                    aside for its backoff after each failure, and the others lead between its \
                    attempts",
            slots: 1,
            members: cast(3),
            stops_in: ms(10),
            steps: turns,
            length: secs(180),
            seed: 1,
            quiet: false,
        },
        Schedule {
            name: "passed-over-then-led",
            found: "the simulator, seed 7865 of the stream before the core's holder: a member \
                    passed over (its wake-up refused: it had just restarted) led within seconds \
                    of it, unseen by a member that had read the pass-over in the blob's notice \
                    and was cut off meanwhile; that member, leading later, skipped it (restarted \
                    since, first in line) for a member that did not take the lease, and slot 0 \
                    went without a leader past the 2 s a body's end promises",
            slots: 1,
            members: {
                let mut members = cast(4);
                members[0] = Cast::new("m0").silent();
                members
            },
            stops_in: ms(10),
            steps: vec![
                (When::Led(0, secs(5)), Step::Stop(Target::Member(3))),
                // m1 restarts (m0's line still has its old wake token) and m2 dies.
                (When::After(secs(5)), Step::Crash(Target::Member(1))),
                (When::After(ms(10)), Step::Start(Target::Last)),
                (When::After(ms(500)), Step::Crash(Target::Member(2))),
                // m0 hands to m1 (refused: passed over), then to m2 (nothing listens: a first
                // hop's window, the notice that passes m1 over in the blob meanwhile) ...
                (When::After(Duration::ZERO), Step::Stop(Target::Member(0))),
                // ... where m3, starting as a new pod, reads it; then m3 is cut off, and m1,
                // polling once m0 gives up, leads unseen by it.
                (
                    When::After(ms(200)),
                    Step::StartElsewhere(Target::Member(3)),
                ),
                (
                    When::After(ms(800)),
                    Step::CutOff(Target::Member(3), secs(30)),
                ),
                (When::Led(0, secs(2)), Step::Stop(Target::Member(1))),
                // m3 leads once it is back; m1 joins again (a new record), then m0 behind it.
                (When::Led(0, secs(1)), Step::Start(Target::Member(1))),
                (When::After(secs(2)), Step::Start(Target::Member(0))),
                // m3's body ends, with m1 first in line and m0 (no URL: it takes a lease
                // handed to it only at its watch) after it.
                (When::After(secs(40)), Step::EndBody(Target::Member(3))),
            ],
            length: secs(150),
            seed: 1,
            quiet: false,
        },
        Schedule {
            name: "stop-at-start",
            found: "a review, on Azurite: a daemon SIGTERMed 3-50 ms after its start wrote an \
                    epoch on a fresh blob and released it without a child",
            slots: 1,
            members: cast(1),
            stops_in: ms(10),
            steps: vec![(When::At(ms(5)), Step::Stop(Target::Member(0)))],
            length: secs(30),
            seed: 1,
            quiet: false,
        },
        Schedule {
            name: "deleted-while-nobody-runs",
            found: "the simulator, seed 18835 of the synchronous engine: the leader crashed with \
                    the other member stopped, and the lease blob was deleted while no member \
                    ran; the member that started 13 s later found it missing (the dead leader's \
                    record still leased), created it marked and waited out its lock-delay from \
                    then, as it must; the checker counted the deletion's bound from the \
                    deletion, though nobody could find it missing before that start",
            slots: 1,
            members: cast(2),
            stops_in: ms(10),
            steps: vec![
                (When::Led(0, secs(5)), Step::Stop(Target::Member(1))),
                (When::After(secs(1)), Step::Crash(Target::Member(0))),
                (When::After(ms(1500)), Step::DeleteBlob(0)),
                (When::After(secs(13)), Step::Start(Target::Member(1))),
            ],
            length: secs(90),
            seed: 1,
            quiet: false,
        },
        Schedule {
            name: "quit-followers-first",
            found: "the demo's quit: the followers stop first, then the leader, whose line still \
                    names them; it waited a hop's window for each, and warned of each",
            slots: 1,
            members: cast(4),
            stops_in: ms(10),
            steps: vec![
                (When::Led(0, secs(5)), Step::Stop(Target::Member(1))),
                (When::After(ms(100)), Step::Stop(Target::Member(2))),
                (When::After(ms(100)), Step::Stop(Target::Member(3))),
                (When::After(secs(1)), Step::Stop(Target::Member(0))),
            ],
            length: secs(60),
            seed: 1,
            quiet: true,
        },
        restarted_behind_the_successor(
            "restarted-behind-the-successor",
            "modelled on the full bench's quorum phase (one account), which starts each daemon \
             killed again at once under its identity: its old record, still leased, stood ahead \
             of the member behind it, which went on watching after the restarted daemon took its \
             record back with a new join date, behind it: the leader killed then was followed \
             after 19.5 s (17.2 s documented); now the watcher probes the member ahead, and finds \
             its record a ghost's",
            Step::Start(Target::Last),
        ),
        restarted_behind_the_successor(
            "restarted-on-another-port",
            "the same, started again on a new port (a new pod's address, `listen` on port 0): the \
             member behind its old record probed the old URL, found nothing listening, and took \
             it for a live member whose URL is wrong: the leader killed later was followed after \
             19.5 s (17.2 s documented); now nothing listening makes the watcher read that \
             record, and list once it ran out",
            Step::StartOnAnotherPort(Target::Last),
        ),
        three_at_once(
            "leader-restarted-on-another-port",
            "the bench's quorum phase (one account), as it runs since its daemons advertise: the \
             leader killed and started again on a new port once the next led, and the next leader \
             killed once the restarted one is back in line (its old record, ahead of the others, \
             ran out): a crash with a live successor, held to the crash's bound (without \
             advertise, 20.2 s: the watcher behind the old record learns of its end only at a \
             listing)",
            vec![
                (When::Led(0, secs(10)), Step::Crash(Target::Holder(0))),
                (
                    When::Led(0, ms(100)),
                    Step::StartOnAnotherPort(Target::Last),
                ),
                (When::After(secs(45)), Step::Crash(Target::Holder(0))),
            ],
            secs(150),
        ),
    ]
}

/// The first `n` of five members, each as [`Cast::new`] makes it.
fn cast(n: usize) -> Vec<Cast> {
    ["m0", "m1", "m2", "m3", "m4"][..n]
        .iter()
        .map(|i| Cast::new(i))
        .collect()
}

/// A group of three, started at once, one slot, bodies that stop at once, played by `steps`.
fn three_at_once(
    name: &'static str,
    found: &'static str,
    steps: Vec<(When, Step)>,
    length: Duration,
) -> Schedule {
    Schedule {
        name,
        found,
        slots: 1,
        members: cast(3),
        stops_in: ms(10),
        steps,
        length,
        seed: 1,
        quiet: false,
    }
}

/// The successor killed and started again at once by `start` (at its URL or on another
/// port), and the leader killed once the restarted member surely took its record back.
fn restarted_behind_the_successor(
    name: &'static str,
    found: &'static str,
    start: Step,
) -> Schedule {
    let steps = vec![
        (When::Led(0, secs(10)), Step::Crash(Target::Successor)),
        (When::After(ms(10)), start),
        (
            When::After(RESTARTED_REJOINS),
            Step::Crash(Target::Holder(0)),
        ),
    ];
    three_at_once(name, found, steps, secs(120))
}

/// Faults found and not fixed yet, each kept as a script that breaks a rule today
/// (docs/development.md says what each is and where its fix belongs): `simulate --schedule
/// NAME` plays one, and a test holds each to its violation, so that its fix moves it to
/// [`regressions`]. None today.
pub fn open_faults() -> Vec<Schedule> {
    Vec::new()
}

/// How long after its start again the member crashed in `restarted-behind-the-successor` has
/// surely taken its record back: its old record's lease (30 s) ran out, and its next join went.
const RESTARTED_REJOINS: Duration = Duration::from_secs(42);
