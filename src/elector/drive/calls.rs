//! A member's requests on their way ([`Calls`]): each store call sent on the store
//! (`store::call::carry_out`; a member record's on the connections of its own, a slot's on its
//! slot blob), cut at its limit with its timeout (docs/safety.md, rule 4) and told to the
//! observer with its elapsed time; a sequence's next call sent on its predecessor's return; a
//! request not carried yet answered at its limit as storage never answering; probes and
//! wake-ups through the wake-up [`Sender`]. A request forgotten goes on, its answer dropped.

use super::step::{Answered, Sending, Shared};
use crate::clock::Clock;
use crate::elector::observe::{LeaseOp, Observer};
use crate::elector::wake::{Sender, WakeSent};
use crate::store::{Call, LeaseStore, Return, StoreError, carry_out};
use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use leasehold_core::carry::{Carrying, Step};
use leasehold_core::confirmation::Wake;
use leasehold_core::exchange::{Answer, Tag};
use leasehold_core::leading;
use leasehold_core::line::Found;
use leasehold_core::member::Reply;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::time::Instant;

use crate::store::Shell;

/// A request on its way: the translation carrying it, its last call's blob and way, when the
/// request was sent.
struct Open {
    carrying: Option<Carrying<Instant, Shell>>,
    /// Its calls go over the member records' own connections.
    own: bool,
    /// The slot of the call on its way, when it is on a blob.
    slot: Option<u32>,
    way: u64,
    sent: Instant,
}

/// What came back on one way.
pub(super) struct Landed {
    tag: Tag,
    way: u64,
    came: Came,
}

// One a call, moved once: boxing the return would allocate at every call of the daemon.
#[allow(clippy::large_enum_variant)]
enum Came {
    /// A call's return.
    Return(Return),
    /// The request's reply, with no call (or its cut).
    Reply(Answered),
}

/// The member's requests on their way.
pub(super) struct Calls<S> {
    store: Arc<S>,
    /// On several storage accounts, the stores of the accounts beyond the first (`store`), in
    /// the set's order: a call goes to the one its request names (`Carrying::replica`).
    replicas: Vec<Arc<S>>,
    /// The store of the member records' traffic (`with_own_connections`).
    own: Arc<S>,
    /// The same of each replica beyond the first (a member on several keeps its record on
    /// each), in the set's order.
    own_replicas: Vec<Arc<S>>,
    clock: Clock,
    observer: Arc<dyn Observer>,
    sender: Sender,
    open: HashMap<Tag, Open>,
    flights: FuturesUnordered<BoxFuture<'static, Landed>>,
    ways: u64,
}

impl<S: LeaseStore> Calls<S> {
    pub(super) fn new(
        store: Arc<S>,
        replicas: Vec<Arc<S>>,
        clock: Clock,
        observer: Arc<dyn Observer>,
        sender: Sender,
    ) -> Self {
        Self {
            own: store.with_own_connections(),
            own_replicas: replicas.iter().map(|r| r.with_own_connections()).collect(),
            store,
            replicas,
            clock,
            observer,
            sender,
            open: HashMap::new(),
            flights: FuturesUnordered::new(),
            ways: 0,
        }
    }

    /// Sends the request `tag` as `sending` says.
    pub(super) fn send(&mut self, tag: Tag, sending: Sending) {
        let sent = self.clock.now();
        let own = matches!(sending, Sending::Call { own: true, .. });
        let open = |carrying| Open {
            carrying,
            own,
            slot: None,
            way: 0,
            sent,
        };
        let reply: BoxFuture<'static, Answered> = match sending {
            Sending::Call { carrying, call, .. } => {
                self.open.insert(tag, open(Some(*carrying)));
                return self.launch(tag, call);
            }
            Sending::Reply(reply) => Box::pin(async move { reply }),
            Sending::NotCarried { limit, cut } => {
                let clock = self.clock;
                Box::pin(async move {
                    match limit {
                        Some(limit) => clock.sleep_until(limit).await,
                        None => std::future::pending().await,
                    }
                    cut
                })
            }
            Sending::ProbeAhead { at } => self.probe_ahead(at),
            Sending::Probe(url) => {
                let sender = self.sender.clone();
                Box::pin(async move {
                    let sent = sender.send(&url, None, None).await;
                    let answered = !matches!(sent, WakeSent::Failed | WakeSent::Unreachable);
                    Reply::Leading(leading::Reply::Probed(answered))
                })
            }
            Sending::Wake { to, reserved, slot } => self.wake(*to, reserved, slot),
        };
        self.open.insert(tag, open(None));
        self.flights.push(Box::pin(async move {
            let came = Came::Reply(reply.await);
            Landed { tag, way: 0, came }
        }));
    }

    /// A probe of the member ahead, at its URL with its wake token: what it found there is
    /// the core's to judge.
    fn probe_ahead(
        &self,
        at: Option<(String, crate::secret::Secret)>,
    ) -> BoxFuture<'static, Answered> {
        let sender = self.sender.clone();
        Box::pin(async move {
            let Some((url, token)) = at else {
                return Reply::Probed(Found::NoAnswer);
            };
            Reply::Probed(sender.probe(&url, &token).await.found())
        })
    }

    /// The member handed the lease on `slot` is woken (with the epoch reserved for it).
    fn wake(
        &self,
        to: crate::store::MemberRecord,
        reserved: Option<crate::elector::wake::Reserved>,
        slot: u32,
    ) -> BoxFuture<'static, Answered> {
        let identity = to.member.identity.as_str();
        tracing::info!(
            successor = identity,
            "handed the lease over; waiting for its epoch"
        );
        self.observer.handed_to(identity, slot);
        let (sender, observer) = (self.sender.clone(), self.observer.clone());
        Box::pin(async move {
            let Some(url) = &to.member.advertise else {
                return Reply::Leading(leading::Reply::Woke(Wake::Missed));
            };
            let token = to.member.wake_token.as_ref();
            let sent = sender.send(url, token, reserved.as_ref()).await;
            observer.wake_sent(sent);
            let wake = match sent {
                WakeSent::Ok => Wake::Accepted,
                WakeSent::Later | WakeSent::Failed => Wake::Missed,
                WakeSent::Unreachable => Wake::Unreachable,
                WakeSent::Refused => Wake::Refused,
            };
            Reply::Leading(leading::Reply::Woke(wake))
        })
    }

    /// Sends `call` for the request `tag`, cut at its translation's limit.
    fn launch(&mut self, tag: Tag, call: Call) {
        self.ways += 1;
        let way = self.ways;
        let Some(open) = self.open.get_mut(&tag) else {
            return;
        };
        (open.way, open.slot) = (way, call.slot());
        let limit = open.carrying.as_ref().and_then(Carrying::limit);
        let replica = open.carrying.as_ref().map_or(0, |c| c.replica());
        let store = match (open.own, replica) {
            (true, 0) => self.own.clone(),
            (true, r) => self.own_replicas[r - 1].clone(),
            (false, 0) => self.store.clone(),
            (false, r) => self.replicas[r - 1].clone(),
        };
        // On a set, each replica's requests are counted as its own (the member records' too,
        // which live on every replica); on one account, only as the group's.
        let replica = (!self.replicas.is_empty()).then_some(replica);
        let (clock, observer) = (self.clock, self.observer.clone());
        self.flights.push(Box::pin(async move {
            let ret = timed(&*store, &call, limit, clock, &*observer).await;
            if let Some(r) = replica {
                observer.replica_op(r, ret.1, ret.0.error());
            }
            let ret = ret.0;
            let came = Came::Return(ret);
            Landed { tag, way, came }
        }));
    }

    /// The request `tag` is no longer wanted: whatever comes back of it is dropped.
    pub(super) fn forget(&mut self, tag: Tag) {
        self.open.remove(&tag);
    }

    /// The next thing that came back (never, while nothing is on its way).
    pub(super) async fn next(&mut self) -> Landed {
        match self.flights.next().await {
            Some(landed) => landed,
            None => std::future::pending().await,
        }
    }

    /// Takes what came back: the request's next call, or its answer for the member (`None`
    /// for a return no longer waited for, or a call that follows).
    pub(super) fn landed(
        &mut self,
        landed: Landed,
        shared: &Shared,
    ) -> Option<Answer<Instant, Answered>> {
        let Landed { tag, way, came } = landed;
        let open = self.open.get_mut(&tag).filter(|o| o.way == way)?;
        let reply = match came {
            Came::Reply(reply) => reply,
            Came::Return(ret) => {
                if let (Some(0), Return::Read(Ok(state))) = (open.slot, &ret) {
                    shared.read(state);
                }
                let carrying = open.carrying.as_mut()?;
                match carrying.answer(ret, self.clock.now()) {
                    Step::Call(next) => {
                        self.launch(tag, next);
                        return None;
                    }
                    Step::Reply(reply) => reply,
                }
            }
        };
        let open = self.open.remove(&tag)?;
        Some(Answer {
            tag,
            sent: open.sent,
            answer: reply,
        })
    }
}

/// Sends `call` on `store`, cut at `limit` (`None`: waited for as long as the member waits, an
/// acquire), and tells `observer` how it ended and after how long.
async fn timed<S: LeaseStore>(
    store: &S,
    call: &Call,
    limit: Option<Instant>,
    clock: Clock,
    observer: &dyn Observer,
) -> (Return, std::time::Duration) {
    let started = Instant::now();
    let ret = match limit {
        Some(limit) => {
            let allowed = limit.saturating_duration_since(clock.now());
            let at = clock.timer_instant(limit);
            match tokio::time::timeout_at(at, carry_out(store, call)).await {
                Ok(ret) => ret,
                Err(_) => call.failed(StoreError::TimedOut(allowed)),
            }
        }
        None => carry_out(store, call).await,
    };
    let (elapsed, op) = (started.elapsed(), op_of(call));
    // Under the store's name: a request is the store's doing.
    match ret.error() {
        None => tracing::trace!(
            target: "leasehold::store",
            op = op.as_str(),
            ?elapsed,
            "lease operation succeeded"
        ),
        Some(e) => tracing::debug!(
            target: "leasehold::store",
            op = op.as_str(),
            ?elapsed,
            error = %e,
            "lease operation failed"
        ),
    }
    observer.lease_op(op, elapsed, ret.error());
    (ret, elapsed)
}

/// The kind of request a call is, as logs and metrics name it.
fn op_of(call: &Call) -> LeaseOp {
    match call {
        Call::Prepare { .. } | Call::Recreate { .. } | Call::CreateStamped { .. } => {
            LeaseOp::Prepare
        }
        Call::Acquire { .. } => LeaseOp::Acquire,
        Call::Renew { .. } => LeaseOp::Renew,
        Call::Release { .. } | Call::ReleaseIf { .. } | Call::BreakLease { .. } => LeaseOp::Release,
        Call::Read { .. } | Call::ReadStamped { .. } | Call::CheckLease { .. } => LeaseOp::Read,
        Call::WriteHolder { .. } => LeaseOp::WriteEpoch,
        Call::Change { .. } => LeaseOp::Change,
        Call::WriteNotice { .. } => LeaseOp::Notice,
        Call::ListGroup | Call::ListMembers => LeaseOp::List,
        Call::ReadMember { .. } | Call::ReadRecord { .. } => LeaseOp::MemberRead,
        Call::CreateMember { .. } => LeaseOp::MemberCreate,
        Call::AcquireMember { .. } => LeaseOp::MemberAcquire,
        Call::RenewMember { .. } => LeaseOp::MemberRenew,
        Call::WriteMember { .. } => LeaseOp::MemberWrite,
        Call::DeleteMember { .. } => LeaseOp::MemberDelete,
    }
}
