//! The actions of the model, which are enabled in a state, and what each does to it.

use std::fmt;

use crate::mapping;
use crate::mapping::may_start;
use crate::rules::{Config, FIRST_EPOCH, Fault, LEASE, LOCK_DELAY, Mixed, Mutant};
use crate::state::{Blob, Body, Hold, State};

/// What became of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Heard {
    /// Applied (or refused) and answered.
    Answered,
    /// Applied, its answer lost: the outcome is unknown to the member.
    AppliedLost,
    /// Never applied, and no answer: the member cannot tell this from `AppliedLost`.
    NotApplied,
}

/// One step of a history.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Real time moves on one tick.
    Tick,
    /// A member sends an acquire (or a renew, if it holds the lease) to a replica.
    Request(usize, u8, Heard),
    /// A member gives up: its body stopped first, then every replica its requests reached
    /// released.
    GiveUp(usize),
    /// A replica's blob is deleted: its lease and epoch are gone.
    Wipe(u8),
    /// A replica is restored from an old copy: a new blob, the first epoch, no lease.
    Rollback(u8),
    /// A replica is restored in place: the first epoch, no lease, its creation time kept.
    RestoreInPlace(u8),
    /// A member freezes.
    Freeze(usize),
    /// A frozen member thaws.
    Thaw(usize),
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Tick => write!(f, "tick"),
            Self::Request(m, a, heard) => write!(f, "m{m} acquire/renew r{a}: {heard:?}"),
            Self::GiveUp(m) => write!(f, "m{m} gives up and releases"),
            Self::Wipe(a) => write!(f, "r{a} wiped"),
            Self::Rollback(a) => write!(f, "r{a} restored from an old copy"),
            Self::RestoreInPlace(a) => write!(f, "r{a} restored in place, its creation time kept"),
            Self::Freeze(m) => write!(f, "m{m} freezes"),
            Self::Thaw(m) => write!(f, "m{m} thaws"),
        }
    }
}

/// Every action enabled in `state`, in a fixed order (the search is deterministic).
#[must_use]
pub fn enabled(config: &Config, state: &State) -> Vec<Action> {
    let mut out = Vec::new();
    if state.now < config.horizon {
        out.push(Action::Tick);
    }
    for m in 0..state.members.len() {
        member_actions(config, state, m, &mut out);
    }
    // One replica's faults stand for all three's (the replicas are alike but for the split
    // vote's order and the mixed sets, which both list r1); a fault later than the first ticks
    // could not play its lock-delay out before the horizon.
    let replica = usize::from(FAULTY);
    if state.faults_left > 0
        && state.now <= config.faults_until
        && state.replicas[replica].is_some()
    {
        if config.allows(Fault::Wipe) {
            out.push(Action::Wipe(FAULTY));
        }
        if config.allows(Fault::Rollback) {
            out.push(Action::Rollback(FAULTY));
        }
        if config.allows(Fault::RestoreInPlace) {
            out.push(Action::RestoreInPlace(FAULTY));
        }
    }
    out
}

/// The replica that wipes and restores strike.
pub const FAULTY: u8 = 1;

/// The actions of member `m`.
fn member_actions(config: &Config, state: &State, m: usize, out: &mut Vec<Action>) {
    let member = &state.members[m];
    if member.frozen {
        out.push(Action::Thaw(m));
        return;
    }
    // A member frozen without a body is one that takes no step, which the search has anyway.
    if state.faults_left > 0 && config.allows(Fault::Freeze) && member.body.is_some() {
        out.push(Action::Freeze(m));
    }
    let busy = member.body.is_some()
        || member.epoch.is_some()
        || member.unknown != 0
        || member.holds.iter().any(Option::is_some);
    if busy {
        out.push(Action::GiveUp(m));
    }
    if yields_split(state, m) {
        return;
    }
    if !member.resting {
        requests(config, state, m, out);
    }
}

/// The requests member `m` may send: to each account it lists, once per account, and none to
/// an account a request of unknown outcome reached (that request is never sent again).
fn requests(config: &Config, state: &State, m: usize, out: &mut Vec<Action>) {
    let member = &state.members[m];
    let set = config.set_of(m);
    for (slot, &a) in set.iter().enumerate() {
        if set[..slot].contains(&a) || member.unknown & (1 << a) != 0 {
            continue;
        }
        out.push(Action::Request(m, a, Heard::Answered));
        if state.faults_left > 0 && config.allows(Fault::Silence) {
            if grants(state, m, a) {
                out.push(Action::Request(m, a, Heard::AppliedLost));
            }
            out.push(Action::Request(m, a, Heard::NotApplied));
        }
    }
}

/// A split vote: every member of the group holds one replica of the group's set and nobody a
/// majority. The rule: the holder of the first replica in the set's order retries the others;
/// every other member releases at once and waits (here: for the next tick).
#[must_use]
pub fn split(state: &State) -> bool {
    if state.members.len() < 3 {
        return false;
    }
    let mut holders = [None; 3];
    for (m, member) in state.members.iter().enumerate() {
        let held: Vec<usize> = (0..3).filter(|&a| member.holds[a].is_some()).collect();
        match held.as_slice() {
            [a] if holders[*a].is_none() => holders[*a] = Some(m),
            _ => return false,
        }
    }
    true
}

/// Whether member `m` must yield a split vote: its only step is to give up.
fn yields_split(state: &State, m: usize) -> bool {
    split(state) && mapping::yields(state, m)
}

/// Whether replica `a`'s server would grant member `m`'s acquire or renew now.
fn grants(state: &State, m: usize, a: u8) -> bool {
    let holds = state.members[m].holds[usize::from(a)].is_some();
    let holder = state.replicas[usize::from(a)].map(|b| b.holder(state.now));
    match holder {
        // An acquire creates a missing blob; a renew on a missing blob is a 404.
        None => !holds,
        // A renew needs the lease still its own (a new blob never had it: 409); an acquire
        // needs it free or its own.
        Some(Some(h)) => usize::from(h) == m,
        Some(None) => !holds,
    }
}

/// The state after `action`.
#[must_use]
pub fn apply(config: &Config, state: &State, action: Action) -> State {
    let mut next = state.clone();
    match action {
        Action::Tick => tick(config, &mut next),
        Action::Request(m, a, heard) => request(config, &mut next, m, a, heard),
        Action::GiveUp(m) => give_up(config, &mut next, m),
        Action::Wipe(a) => {
            next.faults_left -= 1;
            next.replicas[usize::from(a)] = None;
        }
        Action::Rollback(a) => rollback(&mut next, a, true),
        Action::RestoreInPlace(a) => rollback(&mut next, a, false),
        Action::Freeze(m) => {
            next.faults_left -= 1;
            next.members[m].frozen = true;
        }
        Action::Thaw(m) => {
            let member = &mut next.members[m];
            member.frozen = false;
            // The daemon, awake again, stops a body whose deadline passed while it slept.
            if member.body.is_some_and(|b| b.kill <= next.now) {
                member.body = None;
                member.epoch = None;
            }
            campaign(config, &mut next, m, true);
        }
    }
    next
}

/// A tick: leases run out on the servers, holds past their deadlines stop counting, and a body
/// past its kill deadline is killed (by the guard, even if its member is frozen).
fn tick(config: &Config, state: &mut State) {
    state.now += 1;
    let now = state.now;
    // Once out of its lock-delay a blob's age no longer matters: one value for all old ages
    // keeps states that differ in nothing else one state.
    let old = now - LOCK_DELAY;
    for blob in state.replicas.iter_mut().flatten() {
        if blob.holder(now).is_none() {
            blob.lease = None;
        }
        blob.created = blob.created.max(old);
    }
    for member in &mut state.members {
        member.resting = false;
        for hold in &mut member.holds {
            if hold.is_some_and(|h| mapping::deadline(h.sent) <= now) {
                *hold = None;
            }
            if let Some(h) = hold {
                h.created = h.created.max(old);
            }
        }
        let guarded = !(config.breaks(Mutant::NoGuard) && member.frozen);
        if guarded && member.body.is_some_and(|b| b.kill <= now) {
            member.body = None;
            member.epoch = None;
        }
    }
    for m in 0..state.members.len() {
        if !state.members[m].frozen {
            campaign(config, state, m, false);
        }
    }
}

/// A request from member `m` to replica `a`, and what the member hears of it.
fn request(config: &Config, state: &mut State, m: usize, a: u8, heard: Heard) {
    let now = state.now;
    let granted = grants(state, m, a);
    let applied = heard != Heard::NotApplied;
    if applied && granted {
        let blob = state.replicas[usize::from(a)].get_or_insert(Blob {
            created: now,
            epoch: None,
            fingerprint: config.fingerprint(m),
            lease: None,
        });
        blob.lease = Some((member_id(m), now + LEASE));
    }
    if heard != Heard::Answered {
        state.faults_left -= 1;
        state.members[m].unknown |= 1 << a;
        if !config.breaks(Mutant::CountUnknownOutcome) {
            return;
        }
    }
    let read = state.replicas[usize::from(a)];
    let member = &mut state.members[m];
    let was = member.holds[usize::from(a)];
    member.holds[usize::from(a)] = if granted || heard != Heard::Answered {
        Some(Hold {
            sent: now,
            epoch: read.and_then(|b| b.epoch),
            created: read.map_or(now, |b| b.created),
            fingerprint: read.map_or(config.fingerprint(m), |b| b.fingerprint),
            written: was.is_some_and(|h| h.written),
        })
    } else {
        None
    };
    campaign(config, state, m, true);
}

/// A member's id as a lease holder.
fn member_id(m: usize) -> u8 {
    u8::try_from(m).unwrap_or(u8::MAX)
}

/// After member `m`'s view changed: a body whose member no longer counts a majority stops at
/// once; otherwise its kill deadline is the k-th latest counted deadline.
fn settle(config: &Config, state: &mut State, m: usize) {
    let Some(body) = state.members[m].body else {
        return;
    };
    let count = mapping::count(config, state, m);
    let member = &mut state.members[m];
    match mapping::kill_deadline(&count) {
        Some(kill) if kill > state.now => member.body = Some(Body { kill, ..body }),
        _ => {
            member.body = None;
            member.epoch = None;
        }
    }
}

/// What member `m` does as soon as its view allows, each step as the rules order it: once it
/// counts a majority, it computes its campaign's epoch; it writes that epoch to every replica
/// it holds (and to one won later, before that one counts); once a majority confirmed the
/// write and the kill deadline is at least `G` away, it starts its body; a body's kill
/// deadline follows the counted replicas after each answer (`answered`); between answers, the
/// timer of the deadline it set stops the body.
fn campaign(config: &Config, state: &mut State, m: usize, answered: bool) {
    let member = &mut state.members[m];
    let held = member.holds.iter().flatten().count();
    if member.body.is_none() && held < mapping::quorum(config) {
        // A campaign that lost its majority before its body started is over: the next one
        // computes its epoch afresh from what it then counts.
        member.epoch = None;
    }
    if state.members[m].epoch.is_none() {
        let count = mapping::count(config, state, m);
        if count.leads() {
            let epoch = mapping::new_epoch(config, state, m, &count);
            let member = &mut state.members[m];
            member.epoch = Some(epoch);
            member.seen = member.seen.max(epoch);
            for hold in member.holds.iter_mut().flatten() {
                hold.written = false;
            }
        }
    }
    if let Some(epoch) = state.members[m].epoch {
        for a in mapping::to_write(config, state, m, epoch) {
            // The broken rule: the body starts while the write reached one replica only.
            let one_only = config.breaks(Mutant::StartBeforeWrite)
                && state.members[m].holds.iter().flatten().any(|h| h.written);
            if !one_only {
                write(state, m, a);
            }
        }
    }
    if may_start(config, state, m) {
        start(config, state, m);
    }
    if answered {
        settle(config, state, m);
    }
}

/// Member `m` writes its epoch to replica `a`, under its lease there; a refusal drops it.
fn write(state: &mut State, m: usize, a: u8) {
    let now = state.now;
    let epoch = state.members[m].epoch;
    let blob = state.replicas[usize::from(a)].as_mut();
    let leased = blob
        .as_ref()
        .is_some_and(|b| b.holder(now) == Some(member_id(m)));
    let hold = &mut state.members[m].holds[usize::from(a)];
    match blob {
        Some(blob) if leased => {
            blob.epoch = epoch;
            if let Some(h) = hold.as_mut() {
                h.written = true;
                h.epoch = epoch;
            }
        }
        _ => *hold = None,
    }
}

/// Member `m` starts its body; the epochs-growing property is judged here.
fn start(config: &Config, state: &mut State, m: usize) {
    let count = mapping::count(config, state, m);
    let (Some(epoch), Some(kill)) = (state.members[m].epoch, mapping::kill_deadline(&count)) else {
        return;
    };
    if epoch <= state.last_body_epoch {
        state.epoch_fell = true;
    }
    state.last_body_epoch = state.last_body_epoch.max(epoch);
    state.members[m].body = Some(Body { epoch, kill });
}

/// Member `m` gives up: its body is stopped first, then every lease its requests may hold is
/// released, and it waits for the next tick before it campaigns again.
fn give_up(config: &Config, state: &mut State, m: usize) {
    let now = state.now;
    let mut reached = 0_u8;
    for a in mapping::to_release(config, state, m) {
        reached |= 1 << a;
    }
    let member = &mut state.members[m];
    *member = crate::state::Member {
        seen: member.seen,
        resting: true,
        ..Default::default()
    };
    for (a, blob) in state.replicas.iter_mut().enumerate() {
        if let Some(blob) = blob
            && reached & (1 << a) != 0
            && blob.holder(now) == Some(member_id(m))
        {
            blob.lease = None;
        }
    }
}

/// Replica `a` restored from an old copy: the first epoch, no lease; a new blob (its
/// lock-delay starts) unless restored in place.
fn rollback(state: &mut State, a: u8, new_blob: bool) {
    state.faults_left -= 1;
    let old = state.replicas[usize::from(a)].map(|b| b.created);
    let created = if new_blob { None } else { old };
    let fingerprint = state.replicas[usize::from(a)].map_or(Mixed::None, |b| b.fingerprint);
    state.replicas[usize::from(a)] = Some(Blob {
        created: created.unwrap_or(state.now),
        epoch: Some(FIRST_EPOCH),
        fingerprint,
        lease: None,
    });
}
