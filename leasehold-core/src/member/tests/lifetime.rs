//! A member from its start to its end on virtual instants, its requests answered by a store
//! kept in the test: it joins, wins a term, runs and stops its body, gives the lease up and
//! leaves; answers go by tag to the role that asked, whatever their order; an acquire without
//! an answer in time is settled by the member while its campaign sits it out; a rest is cut
//! short by a wake-up only when it may be; a handoff's reservation is taken by the next
//! attempt.

use super::*;
use crate::campaign::Failed;
use crate::exchange::{Answer, Send, Tag};
use crate::failure::Failure;
use crate::holder;
use crate::leading::{self, Stop};
use crate::record;
use crate::term::{Done, TermEnd};
use crate::testing::{Rec, record as rec};
use crate::wake::WakeAnswer;

/// A store error of the tests: its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Fails(pub(super) Failure);

impl crate::failure::StoreFailure for Fails {
    fn failure(&self) -> Failure {
        self.0
    }
    /// The tests' 412 (`ConditionNotMet`: the blob written since) is a `Permanent`, which no
    /// other answer of theirs is.
    fn condition_failed(&self) -> bool {
        self.0 == Failure::Permanent
    }
    fn service_answered(&self) -> bool {
        true
    }
}

impl Failed for Fails {
    fn timed_out(_: Duration) -> Self {
        Fails(Failure::Transient)
    }
    fn last_epoch(_: u64) -> Self {
        Fails(Failure::Permanent)
    }
}

impl std::fmt::Display for Fails {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

/// The shell's draws, lease ids and wall clock.
#[derive(Default)]
struct Shell {
    ids: u32,
}

impl Env<Test> for Shell {
    fn draw(&mut self) -> f64 {
        0.5
    }
    fn lease_id(&mut self) -> String {
        self.ids += 1;
        format!("id-{}", self.ids)
    }
    fn wall_ms(&mut self) -> u64 {
        100_000
    }
}

pub(super) type Out = Output<Instant, Test, Fails>;
pub(super) type Req = Request<Instant, Test>;

/// The store kept in the test: the member records, slot 0's blob, who holds its lease.
pub(super) struct Store {
    pub(super) records: Vec<Rec>,
    pub(super) blob: Blob,
    /// The acquire is not answered (it hangs) while this holds.
    pub(super) acquire_hangs: bool,
    /// Another member holds the lease.
    pub(super) held: bool,
    /// Storage refuses the credentials of the acquire.
    pub(super) refuses: bool,
    /// A term's release, and the write of a reserved epoch, fail (the service unavailable).
    pub(super) fails: bool,
    /// The replicas' blobs, of a group on several storage accounts (empty: one account).
    pub(super) replicas: Vec<Replica>,
}

/// One replica's blob in the test's store.
#[derive(Debug, Clone)]
pub(super) struct Replica {
    pub(super) blob: Blob,
    pub(super) stamp: crate::quorum::Stamp,
    /// It answers nothing (its region is down).
    pub(super) down: bool,
    /// Another member holds its lease.
    pub(super) held: bool,
    /// The member records it lists (`None`: the store's).
    pub(super) records: Option<Vec<Rec>>,
}

impl Replica {
    /// A replica of `set`, `id`, with an old blob that carries an epoch.
    pub(super) fn of(set: &crate::quorum::ReplicaSet, id: u128) -> Self {
        let stamp = crate::quorum::Stamp::new(set, crate::quorum::ReplicaId(id));
        Self {
            blob: Blob {
                etag: format!("r{id}"),
                named: Some("old".into()),
                age: Duration::from_secs(3600),
                ..Blob::default()
            },
            stamp,
            down: false,
            held: false,
            records: None,
        }
    }
}

impl Store {
    pub(super) fn of(me: &str) -> Self {
        Self {
            records: vec![rec(me, 0, 1, true)],
            blob: Blob {
                etag: "e0".into(),
                age: Duration::from_secs(3600),
                ..Blob::default()
            },
            acquire_hangs: false,
            held: false,
            refuses: false,
            fails: false,
            replicas: Vec::new(),
        }
    }

    /// What replica `request` names answers it; `None`: nothing (it is down).
    fn replica(&mut self, request: &crate::quorum::Request<Instant>) -> Option<Reply<Test, Fails>> {
        use crate::quorum::Request as Q;
        let r = &mut self.replicas[request.replica()];
        if r.down {
            return None;
        }
        Some(match request {
            Q::Acquire { .. } if r.held => Reply::Acquired(Err(Fails(Failure::Held))),
            Q::Acquire { .. } => {
                r.blob.leased = true;
                Reply::Acquired(Ok(()))
            }
            Q::Read { .. } => Reply::Stamped(Ok(Box::new((r.blob.clone(), r.stamp)))),
            Q::WriteEpoch { .. } => {
                r.blob.named = Some("a".into());
                Reply::Written(Ok(r.blob.etag.clone()))
            }
            Q::Create { .. } => Reply::Done(Err(Fails(Failure::Transient))),
            Q::Release { .. } => {
                r.blob.leased = false;
                Reply::Done(Ok(()))
            }
        })
    }

    /// What `request` gets back; `None`: no answer (yet).
    pub(super) fn answer(&mut self, request: &Req) -> Option<Reply<Test, Fails>> {
        use crate::attempt::Request as A;
        use crate::campaign::Request as C;
        let listing = Listing {
            records: self.records.clone(),
            slots: None,
        };
        let blob = Ok(Box::new(self.blob.clone()));
        Some(match request {
            Req::Campaign(C::Attempt { request, .. }) => match request {
                A::Acquire if self.acquire_hangs => return None,
                A::Acquire if self.refuses => Reply::Acquired(Err(Fails(Failure::Denied))),
                A::Acquire if self.held => Reply::Acquired(Err(Fails(Failure::Held))),
                A::Acquire => {
                    self.blob.leased = true;
                    Reply::Acquired(Ok(()))
                }
                A::ReadBeside { .. } | A::Read { .. } | A::ReadCount { .. } => Reply::Blob(blob),
                A::WriteReserved { .. } if self.fails => {
                    Reply::Written(Err(Fails(Failure::Transient)))
                }
                A::WriteEpoch { .. } | A::WriteReserved { .. } => {
                    self.blob.named = Some("a".into());
                    self.blob.etag = "e1".into();
                    Reply::Written(Ok("e1".into()))
                }
                A::Recreate => Reply::Recreated(Some(Ok(false))),
                A::Release => Reply::Done(Ok(())),
            },
            Req::Campaign(C::List { .. }) => Reply::Listed(Ok(listing)),
            Req::Campaign(C::Watch(crate::watch::Request::List { .. })) => {
                Reply::Listed(Ok(listing))
            }
            Req::Campaign(C::Watch(crate::watch::Request::ReadAhead { .. })) => Reply::Nothing,
            Req::Campaign(C::Watch(crate::watch::Request::ProbeAhead)) => {
                Reply::Probed(crate::line::Found::NoAnswer)
            }
            Req::Campaign(C::Wait(crate::slots::WaitRequest::List { .. })) => {
                Reply::Listed(Ok(listing))
            }
            Req::Campaign(C::Wait(crate::slots::WaitRequest::Read { .. })) => {
                Reply::Member(Ok((true, "r".into())))
            }
            Req::Campaign(C::Wait(crate::slots::WaitRequest::Probe(_))) => {
                Reply::Probed(crate::line::Found::NoAnswer)
            }
            Req::Campaign(C::Recreate { .. }) => Reply::Recreated(None),
            Req::Campaign(C::Replica(request)) => return self.replica(request),
            Req::Campaign(_) => Reply::Blob(blob),
            Req::Keeper(record::Request::List) => Reply::Listed(Ok(listing)),
            Req::Keeper(record::Request::Read) => Reply::Blob(blob),
            Req::Keeper(_) => Reply::Done(Ok(())),
            Req::Leading(leading::Request::List { .. } | leading::Request::Relist { .. }) => {
                Reply::Listed(Ok(listing))
            }
            Req::Leading(leading::Request::Choice { request, .. })
                if matches!(**request, crate::choice::Request::List) =>
            {
                Reply::Listed(Ok(listing))
            }
            Req::Leading(leading::Request::WinBack(request)) => return self.replica(request),
            Req::OnReplica { replica, request } => return self.on_replica(*replica, request),
            Req::Leading(request) => Reply::Leading(self.lead(request)?),
            Req::Release { .. } => {
                self.blob.leased = false;
                Reply::Done(Ok(()))
            }
        })
    }

    /// What replica `replica` answers `request`, a record's or a listing: as the store does,
    /// with its own records if it has any; down, it fails as a request cut at its limit.
    fn on_replica(&mut self, replica: usize, request: &Req) -> Option<Reply<Test, Fails>> {
        let (down, own) = (
            self.replicas[replica].down,
            self.replicas[replica].records.clone(),
        );
        let all = own.map(|own| std::mem::replace(&mut self.records, own));
        let reply = self.answer(request);
        if let Some(all) = all {
            self.records = all;
        }
        let reply = reply?;
        if !down {
            return Some(reply);
        }
        let cut = Fails(Failure::Transient);
        Some(match reply {
            Reply::Listed(_) => Reply::Listed(Err(cut)),
            _ => Reply::Done(Err(cut)),
        })
    }

    fn lead(
        &mut self,
        request: &leading::Request<Instant, Rec, String>,
    ) -> Option<leading::Reply<Rec, String, String, Fails>> {
        use leading::{Reply as L, Request as R};
        Some(match request {
            // Down, a renew fails as a request cut at its limit.
            R::Renew(renew) if self.replicas.get(renew.replica).is_some_and(|r| r.down) => {
                L::Renew(holder::Reply::Failed)
            }
            R::Renew(_) => L::Renew(holder::Reply::Renewed),
            R::List { .. } => L::Listed(Some(Vec::new())),
            R::Probe { .. } => L::Probed(true),
            R::Standby { .. } => L::StoodBy,
            R::Relist { .. } => L::Relisted(true),
            R::Store { request, .. } if !matches!(**request, crate::handoff::Request::Release) => {
                panic!("a lone member asked {request:?}")
            }
            R::Store { .. } if self.fails => L::Released(Err(Fails(Failure::Transient))),
            R::Store { .. } => {
                self.blob.leased = false;
                L::Released(Ok(()))
            }
            other => panic!("a lone member asked {other:?}"),
        })
    }
}

/// The settings of a member `a` of one slot, that stands for many terms.
pub(super) fn settings() -> Settings {
    Settings {
        timing: crate::Timing::default(),
        slots: 1,
        me: "a".into(),
        priority: 0,
        preempt_after: None,
        create_if_missing: true,
        set: crate::quorum::ReplicaSet::one(),
        one_term: false,
        authorized: false,
        mutants: Mutants::default(),
    }
}

/// A member driven by the test: the instant, the requests on their way, all it said.
pub(super) struct Run {
    pub(super) m: Member<Instant, Test, Fails>,
    pub(super) t0: Instant,
    pub(super) now: Instant,
    shell: Shell,
    pub(super) open: Vec<(Tag, Req)>,
    pub(super) said: Vec<Out>,
}

impl Run {
    /// A member `a` of one slot, that stands for many terms.
    pub(super) fn new() -> Self {
        Self::standing(false)
    }

    /// A member `a` of one slot, that stands for one term only with `one_term`.
    pub(super) fn standing(one_term: bool) -> Self {
        Self::of(Settings {
            one_term,
            ..settings()
        })
    }

    /// A member `a` with `settings`.
    pub(super) fn of(settings: Settings) -> Self {
        let t0 = Instant::now();
        Self {
            m: Member::new(settings, Says(None), "id-0".into()),
            t0,
            now: t0,
            shell: Shell::default(),
            open: Vec::new(),
            said: Vec::new(),
        }
    }

    fn wall(&self) -> u64 {
        100 + (self.now - self.t0).as_secs()
    }

    /// Steps the member with `input`: what it said.
    pub(super) fn step(&mut self, input: Input<Instant, Test, Fails>) -> Vec<Out> {
        let wall = self.wall();
        let out = self.m.handle(self.now, wall, input, &mut self.shell);
        for o in &out {
            match o {
                Output::Send(Send { tag, request }) => self.open.push((*tag, request.clone())),
                Output::Forget(tag) => self.open.retain(|(t, _)| t != tag),
                _ => {}
            }
        }
        let awaited = self.m.awaits().waiting.answers;
        for (tag, _) in &self.open {
            assert!(awaited.contains(tag), "{tag:?} is routed");
        }
        self.said.extend(out.iter().cloned());
        out
    }

    /// Answers the request under `tag` with `reply`.
    pub(super) fn answer(&mut self, tag: Tag, reply: Reply<Test, Fails>) -> Vec<Out> {
        self.open.retain(|(t, _)| *t != tag);
        let sent = self.now;
        self.step(Input::Answer(Answer {
            tag,
            sent,
            answer: reply,
        }))
    }

    /// Answers what `store` answers, and wakes the member at its instants, until `done` says
    /// so of what it said (or a long while passed).
    pub(super) fn until(&mut self, store: &mut Store, done: impl Fn(&Out) -> bool) -> bool {
        let mut seen = self.said.len();
        for _ in 0..10_000 {
            if self.said[seen..].iter().any(&done) {
                return true;
            }
            seen = self.said.len();
            if self.m.awaits().may_campaign {
                self.step(Input::MayCampaign(true));
                continue;
            }
            let answerable = (self.open.iter()).find_map(|(t, r)| Some((*t, store.answer(r)?)));
            if let Some((tag, reply)) = answerable {
                self.answer(tag, reply);
                continue;
            }
            match self.m.awaits().waiting.until {
                Some(at) => {
                    self.now = self.now.max(at);
                    self.step(Input::Timer);
                }
                None => return self.said[seen..].iter().any(&done),
            }
        }
        false
    }

    /// The requests sent so far that `f` picks.
    pub(super) fn sent(&self, f: impl Fn(&Req) -> bool) -> usize {
        let sends = self.said.iter().filter_map(|o| match o {
            Output::Send(s) => Some(&s.request),
            _ => None,
        });
        sends.filter(|r| f(r)).count()
    }
}

pub(super) fn acquire(r: &Req) -> bool {
    use crate::attempt::Request as A;
    matches!(
        r,
        Req::Campaign(crate::campaign::Request::Attempt {
            request: A::Acquire,
            ..
        })
    )
}

fn epoch_written(r: &Req) -> Option<u64> {
    use crate::attempt::Request as A;
    match r {
        Req::Campaign(crate::campaign::Request::Attempt {
            request: A::WriteEpoch { epoch, .. } | A::WriteReserved { epoch, .. },
            ..
        }) => Some(*epoch),
        _ => None,
    }
}

pub(super) fn body_started(o: &Out) -> bool {
    matches!(o, Output::StartBody(_))
}

/// A member `a` started with its store, and led to its first term's body.
pub(super) fn leading() -> (Run, Store) {
    let (mut run, mut store) = (Run::new(), Store::of("a"));
    run.step(Input::Start);
    assert!(run.until(&mut store, body_started), "{:#?}", run.said);
    (run, store)
}

/// (a) A lone member joins, wins a term with its epoch written, starts its body; at shutdown
/// it stops the body, gives the lease up once the body is gone, and leaves the line.
#[test]
fn a_lone_member_joins_leads_and_leaves() {
    let (mut run, mut store) = leading();
    let joined = run.sent(|r| matches!(r, Req::Keeper(record::Request::Create(_))));
    assert_eq!(joined, 1, "the keeper joined");
    let written: Vec<u64> = (run.said.iter())
        .filter_map(|o| match o {
            Output::Send(s) => epoch_written(&s.request),
            _ => None,
        })
        .collect();
    let start = run.said.iter().position(body_started).unwrap();
    let Output::StartBody(term) = &run.said[start] else {
        unreachable!()
    };
    assert_eq!(written, [term.epoch], "the epoch written is the term's");
    let leader = Role::Leader {
        epoch: term.epoch,
        slot: 0,
    };
    let role = |o: &Out| matches!(o, Output::Role(r) if *r == leader);
    assert!(run.said[..start].iter().any(role));
    assert!(run.m.known().line.leading);
    let out = run.step(Input::Shutdown);
    let stop = |o: &Out| matches!(o, Output::StopBody(Stop::Shutdown));
    assert!(out.iter().any(stop), "{out:?}");
    assert!(store.blob.leased, "nothing given up while the body runs");
    let releases = |r: &Req| {
        matches!(
            r,
            Req::Leading(leading::Request::Store { request, .. })
                if matches!(**request, crate::handoff::Request::Release)
        )
    };
    assert_eq!(
        run.sent(releases),
        0,
        "nothing given up while the body runs"
    );
    run.step(Input::BodyGone(TermEnd::Shutdown));
    let ended = |o: &Out| matches!(o, Output::End(_));
    assert!(run.until(&mut store, ended), "{:#?}", run.said);
    assert_eq!(run.sent(releases), 1, "the lease was given up");
    let left = run.sent(|r| matches!(r, Req::Keeper(record::Request::Leave)));
    assert_eq!(left, 1, "the member left the line");
    assert!(matches!(
        run.said.last(),
        Some(Output::End(Ok(Done::Shutdown)))
    ));
    assert!(run.m.is_over() && run.m.awaits().over);
    assert!(!run.m.known().line.leading);
}

/// (b) With the keeper's and the campaign's requests on their way together, each answer, in
/// whatever order, goes to the role that sent it: the keeper's listing fills the line, the
/// campaign's reads and writes win the term.
#[test]
fn answers_go_by_tag_to_the_role_that_asked() {
    let (mut run, mut store) = (Run::new(), Store::of("a"));
    run.step(Input::Start);
    // Answer the keeper only until the campaign has a request out beside the keeper's.
    for _ in 0..100 {
        let keeper = run.open.iter().any(|(_, r)| matches!(r, Req::Keeper(_)));
        let campaign = run.open.iter().any(|(_, r)| matches!(r, Req::Campaign(_)));
        if keeper && campaign {
            break;
        }
        if run.m.awaits().may_campaign {
            run.step(Input::MayCampaign(true));
            continue;
        }
        let (tag, request) = run.open[0].clone();
        let reply = store.answer(&request).expect("answered");
        run.answer(tag, reply);
    }
    let open = run.open.clone();
    assert!(open.iter().any(|(_, r)| matches!(r, Req::Keeper(_))));
    assert!(open.iter().any(|(_, r)| matches!(r, Req::Campaign(_))));
    // The latest first: the campaign's before the keeper's that went out earlier.
    for (tag, request) in open.iter().rev() {
        let reply = store.answer(request).expect("answered");
        run.answer(*tag, reply);
    }
    // An answer to a tag nobody sent goes nowhere.
    let mut others = crate::exchange::Tags::default();
    let nobodys = (0..1000).map(|_| others.fresh()).last().expect("a tag");
    assert!(run.answer(nobodys, Reply::Nothing).is_empty());
    assert!(run.until(&mut store, body_started), "{:#?}", run.said);
    // While the term runs, the keeper's and the leader's requests go out side by side.
    let t = run.now + Duration::from_secs(60);
    while run.now < t {
        assert!(run.until(&mut store, |o| matches!(o, Output::Send(_))));
    }
    let renews = run.sent(|r| matches!(r, Req::Leading(leading::Request::Renew(_))));
    let renewals = (run.said.iter()).filter(|o| matches!(o, Output::Say(Say::Renewal(_))));
    assert!(
        renews > 1 && renewals.count() >= renews - 1,
        "renews answered"
    );
    let line = &run.m.known().line;
    assert!(
        line.members.iter().any(|r| r.id == "a"),
        "the keeper's listing: {line:?}"
    );
    assert_eq!(line.standing, crate::line::Standing::Joined);
}

/// (c) An acquire without an answer in time: the member settles it (a late success is
/// released, with the lease id it went out with), and the campaign sits it out until then,
/// then campaigns again with a new lease id.
#[test]
fn a_late_acquire_is_settled_and_sat_out() {
    let (mut run, mut store) = (Run::new(), Store::of("a"));
    store.acquire_hangs = true;
    run.step(Input::Start);
    // Until the acquire's answer is past its time: the attempt gives up on it.
    while run.m.known().late.is_none() {
        if run.m.awaits().may_campaign {
            run.step(Input::MayCampaign(true));
            continue;
        }
        let answerable = (run.open.iter()).find_map(|(t, r)| Some((*t, store.answer(r)?)));
        match answerable {
            Some((tag, reply)) => drop(run.answer(tag, reply)),
            None => {
                run.now = run.m.awaits().waiting.until.expect("a timer");
                run.step(Input::Timer);
            }
        }
    }
    let (tag, _) = (run.open.iter().find(|(_, r)| acquire(r)).cloned()).expect("the acquire");
    assert!(run.m.known().late.is_some(), "an acquire without an answer");
    let acquires = run.sent(acquire);
    // It comes late, and took the lease: released at once, with its own lease id.
    store.acquire_hangs = false;
    run.answer(tag, Reply::Acquired(Ok(())));
    let release = run
        .open
        .iter()
        .find(|(_, r)| matches!(r, Req::Release { .. }));
    let Some((release, Req::Release { id, .. })) = release.cloned() else {
        panic!("no release: {:#?}", run.open)
    };
    assert_eq!(id.as_deref(), Some("id-0"), "the late acquire's lease id");
    assert_eq!(run.sent(acquire), acquires, "sat out: no acquire meanwhile");
    let out = run.answer(release, Reply::Done(Ok(())));
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::Say(Say::Settled(crate::late::Settled::Released)))),
        "{out:?}"
    );
    assert!(run.m.known().late.is_none());
    assert!(run.until(&mut store, body_started), "{:#?}", run.said);
    assert!(run.sent(acquire) > acquires, "campaigned again");
    assert_ne!(
        run.m.next_id(),
        "id-0",
        "the spent lease id is not used again"
    );
}

/// The requests of a term's end on the store `store` answered, and the rest begun.
pub(super) fn ended(run: &mut Run, store: &mut Store, end: TermEnd) {
    run.step(Input::BodyGone(end));
    let stepped = |o: &Out| matches!(o, Output::Say(Say::TermEnded(_)));
    assert!(run.until(store, stepped), "{:#?}", run.said);
}

/// (d) After a health step-down the rest is sat out whatever wakes come; after a release, a
/// wake-up ends it at once.
#[test]
fn a_rest_ends_at_a_wake_up_only_when_it_may() {
    for (end, wakeable) in [
        (
            TermEnd::Unhealthy {
                cooldown: Duration::from_secs(600),
            },
            false,
        ),
        (TermEnd::Released, true),
    ] {
        let (mut run, mut store) = leading();
        ended(&mut run, &mut store, end);
        run.now += Duration::from_secs(5);
        let out = run.step(Input::Wake {
            token_matches: true,
            handoff: None,
        });
        let accepted = |o: &Out| matches!(o, Output::Woken(WakeAnswer::Accepted));
        assert!(out.iter().any(accepted), "{out:?}");
        // Campaigning again: it asks the body first.
        let campaigns = out.iter().any(|o| matches!(o, Output::AskBody));
        assert_eq!(campaigns, wakeable, "{end:?}: {out:#?}");
        if !wakeable {
            let resting = |o: &Out| matches!(o, Output::Say(Say::Resting { .. }));
            assert!(run.said.iter().any(resting));
            assert!(run.until(&mut store, |o| matches!(o, Output::AskBody)));
            assert!(
                run.now >= run.t0 + Duration::from_secs(600),
                "after the cooldown"
            );
        }
    }
}

/// (e) A member that follows a leader, woken by its handoff with the epoch reserved for it,
/// takes the reservation in its next attempt: it writes that epoch beside its acquire, and
/// leads on it, from the wall clock of that write; a wake-up without the token does nothing.
#[test]
fn a_wake_up_with_a_reservation_is_taken_by_the_next_attempt() {
    let (mut run, mut store) = (Run::new(), Store::of("a"));
    store.records.insert(0, rec("z", 0, 0, true));
    (store.blob.leased, store.blob.named, store.held) = (true, Some("z".into()), true);
    run.step(Input::Start);
    let following = |o: &Out| {
        matches!(
            o,
            Output::Say(Say::Campaign(crate::campaign::Say::Candidate(
                crate::candidate::Note::Following
            )))
        )
    };
    assert!(run.until(&mut store, following), "{:#?}", run.said);
    let refused = run.step(Input::Wake {
        token_matches: false,
        handoff: Some("90 e0".into()),
    });
    assert!(matches!(
        refused[..],
        [Output::Woken(WakeAnswer::WrongToken)]
    ));
    // `z` hands the lease over, and wakes `a` with the epoch it reserved for it.
    store.held = false;
    run.step(Input::Wake {
        token_matches: true,
        handoff: Some("90 e0".into()),
    });
    assert!(run.until(&mut store, body_started), "{:#?}", run.said);
    let reserved = run.sent(|r| {
        matches!(
            r,
            Req::Campaign(crate::campaign::Request::Attempt {
                request: crate::attempt::Request::WriteReserved { epoch: 90, .. },
                ..
            })
        )
    });
    assert_eq!(reserved, 1, "the reserved epoch was written");
    let Some(Output::StartBody(term)) = run.said.iter().rev().find(|o| body_started(o)) else {
        unreachable!()
    };
    assert_eq!((term.epoch, term.reserved), (90, true));
    // Its start is the wall clock its reserved epoch was written at (no epoch was drawn).
    assert!(term.acquired.is_some(), "{term:?}");
    assert_eq!(run.m.kept().epoch, Some(90));
}

/// (f) A term won keeps its epoch for its handoff's notices; a health step-down's standby:
/// from the term's request on, the record is to say it (the member's record is not written so
/// until the request's answer says it was).
#[test]
fn a_term_keeps_its_epoch_and_a_standby_is_the_records_to_say_from_its_request_on() {
    let (mut run, _store) = leading();
    let won = (run.said.iter()).find_map(|o| match o {
        Output::StartBody(term) => Some(term.epoch),
        _ => None,
    });
    assert_eq!(run.m.kept().epoch, won, "the epoch written is the term's");
    run.m.known.own.written = true;
    let cooldown = Duration::from_secs(600);
    let out = run.step(Input::BodyGone(TermEnd::Unhealthy { cooldown }));
    let standby = |o: &Out| matches!(o, Output::Send(Send { request: Req::Leading(leading::Request::Standby { cooldown: c, .. }), .. }) if *c == cooldown);
    assert!(out.iter().any(standby), "{out:#?}");
    assert!(!run.m.known().own.written, "the record does not say it yet");
}

/// (f) A one-term member that gives up campaigning while another leads ends not elected,
/// and leaves the line without another acquire; one whose acquire is on its way when it gives
/// up leads the term that acquire wins; a member standing for many terms campaigns on.
#[test]
fn a_one_term_member_gives_up_between_attempts() {
    let following = |o: &Out| {
        matches!(
            o,
            Output::Say(Say::Campaign(crate::campaign::Say::Candidate(
                crate::candidate::Note::Following
            )))
        )
    };
    let held = || {
        let mut store = Store::of("a");
        store.records.insert(0, rec("z", 0, 0, true));
        (store.blob.leased, store.blob.named, store.held) = (true, Some("z".into()), true);
        store
    };
    let (mut run, mut store) = (Run::standing(true), held());
    run.step(Input::Start);
    assert!(run.until(&mut store, following), "{:#?}", run.said);
    let acquires = run.sent(acquire);
    run.step(Input::GiveUp);
    let ended = |o: &Out| matches!(o, Output::End(_));
    assert!(run.until(&mut store, ended), "{:#?}", run.said);
    assert!(matches!(
        run.said.last(),
        Some(Output::End(Ok(Done::NotElected)))
    ));
    assert_eq!(run.sent(acquire), acquires, "no acquire after giving up");
    let left = run.sent(|r| matches!(r, Req::Keeper(record::Request::Leave)));
    assert_eq!(left, 1, "the member left the line");

    // An acquire on its way is not cut: it wins, and its term is led.
    let (mut run, mut store) = (Run::standing(true), Store::of("a"));
    store.acquire_hangs = true;
    run.step(Input::Start);
    let on_its_way = |run: &Run| run.open.iter().find(|(_, r)| acquire(r)).map(|(t, _)| *t);
    while on_its_way(&run).is_none() {
        assert!(run.until(&mut store, |o| matches!(o, Output::Send(_))));
    }
    run.step(Input::GiveUp);
    store.acquire_hangs = false;
    let tag = on_its_way(&run).expect("the acquire");
    store.blob.leased = true;
    run.answer(tag, Reply::Acquired(Ok(())));
    assert!(run.until(&mut store, body_started), "{:#?}", run.said);

    // Many terms: giving up means nothing, the campaign goes on.
    let (mut run, mut store) = (Run::new(), held());
    run.step(Input::Start);
    assert!(run.until(&mut store, following), "{:#?}", run.said);
    let acquires = run.sent(acquire);
    assert!(run.step(Input::GiveUp).is_empty());
    let t = run.now + Duration::from_secs(30);
    while run.now < t {
        assert!(run.until(&mut store, |o| matches!(o, Output::Send(_))));
    }
    assert!(run.sent(acquire) > acquires, "campaigned on");
    assert!(!run.said.iter().any(ended));
}
