//! The record keeper's task: the shell of the core's [`Keeper`] (`leasehold_core::record`),
//! one machine over its exchange. It carries each output out in order (a request sent under
//! its tag, the line shown, a campaign told it polls now, a log line), then waits for what the
//! keeper awaits ([`Awaits`]: the answer by tag, its one timer, a poke, a stop) and hands in
//! what came first. What the keeper reads and changes of the line it does through the core's
//! [`OnTheLine`], at the moment it asks. The I/O is here; the decisions are not. A listing of
//! the line ([`list`]) is here too: the campaign and the handoff list with it.

use super::line::{Line, Standing};
use super::rows::view;
use crate::clock::Clock;
use crate::elector::observe::{LeaseOp, Observer};
use crate::elector::request::timed;
use crate::fmt::human;
use crate::store::{LeaseId, LeaseStore, Member, MemberKey, StoreError};
use crate::timing::Timing;
use leasehold_core::Pace;
use leasehold_core::exchange::{Answer, Tag};
use leasehold_core::member::OnTheLine;
use leasehold_core::record::{self, Awaits, Keep, Keeper, Say};
use std::future::{Future, pending};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

type Input = record::Input<Instant, StoreError>;
type Output = record::Output<Member, StoreError>;
type Request = record::Request<Member>;

/// What the record keeper's task works with.
pub(super) struct RecordKeeper<S> {
    pub store: Arc<S>,
    pub observer: Arc<dyn Observer>,
    pub timing: Timing,
    /// The elector's clocks.
    pub clock: Clock,
    pub line: Arc<Mutex<Line>>,
    pub key: MemberKey,
    pub record_lease: LeaseId,
    /// Told when what the record says changes, or a term begins or ends: the keeper looks
    /// again at once.
    pub poke: Arc<Notify>,
    /// Told when a listing places this instance to poll.
    pub placed: Arc<Notify>,
    /// `[election].preempt_after`: when the record says it is settled.
    pub settle_after: Option<Duration>,
}

/// A request on its way, under its tag.
struct Flight<'a> {
    tag: Tag,
    /// When it was sent (what its answer is reported with).
    sent: Instant,
    answer: Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send + 'a>>,
}

impl<S: LeaseStore> RecordKeeper<S> {
    fn with<T>(&self, f: impl FnOnce(&mut Line) -> T) -> T {
        f(&mut self.line.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn limit(&self) -> Instant {
        self.clock.now() + self.timing.request_timeout()
    }

    /// The record task: the core's [`Keeper`] joins, renews every [`Pace::RECORD_RENEW`],
    /// writes what changed, lists every [`Pace::LIST_EVERY`] (a leader then deletes long-dead
    /// records), and once stopped leaves; this carries it out, on the elector's lease clock
    /// (the line's instants are on it: a listing's age is judged on one clock, across a
    /// suspend of the machine too).
    pub(super) async fn run(self, stop: CancellationToken) {
        let mut keeper = Keeper::new(self.clock.now(), fastrand::f64());
        let mut flight = None;
        let mut input = Input::Start;
        loop {
            for output in self.step(&mut keeper, input) {
                match output {
                    Output::Send(send) => {
                        let answer = self.send(send.request);
                        let (tag, sent) = (send.tag, self.clock.now());
                        flight = Some(Flight { tag, sent, answer });
                    }
                    Output::ShowLine => self.observer.line(&self.with(|l| view(l))),
                    // A campaign in a watch period polls at once; one that polls already is
                    // not waiting for this, and no permit is left for later.
                    Output::Placed => self.placed.notify_waiters(),
                    Output::Say(say) => self.say(say),
                    Output::End => return,
                }
            }
            input = self.wait(&keeper.awaits(), &mut flight, &stop).await;
        }
    }

    /// Steps the keeper with `input`, now, on the line as it stands (locked for the step: the
    /// keeper reads and changes it only through the core's [`OnTheLine`]).
    fn step(&self, keeper: &mut Keeper<Instant, Member>, input: Input) -> Vec<Output> {
        let now = self.clock.now();
        let mut draw = fastrand::f64;
        self.with(|l| {
            let mut on_the_line = OnTheLine {
                line: &mut l.succession,
                own: &mut l.own,
                now,
                wall: l.clock.wall(),
                settle_after: self.settle_after,
                draw: &mut draw,
            };
            keeper.handle(now, input, &mut on_the_line)
        })
    }

    /// Waits for what the keeper awaits: the answer it awaits, `stop`, a poke, its timer, in
    /// that order when several came at once.
    async fn wait(
        &self,
        awaits: &Awaits<Instant>,
        flight: &mut Option<Flight<'_>>,
        stop: &CancellationToken,
    ) -> Input {
        let until = awaits.waiting.until;
        let timer = async {
            match until {
                Some(at) => self.clock.sleep_until(at).await,
                None => pending().await,
            }
        };
        let answers = &awaits.waiting.answers;
        let awaited = flight.as_mut().filter(|f| answers.contains(&f.tag));
        let answer = async {
            match awaited {
                Some(f) => f.answer.as_mut().await,
                None => pending().await,
            }
        };
        let came = tokio::select! {
            biased;
            answer = answer => Ok(answer),
            () = stop.cancelled(), if awaits.stop => Err(Input::Stop),
            () = self.poke.notified(), if awaits.poked => Err(Input::Poked),
            () = timer => Err(Input::Timer),
        };
        match (came, flight.take()) {
            (Ok(answer), Some(f)) => Input::Answer(Answer {
                tag: f.tag,
                sent: f.sent,
                answer,
            }),
            (Ok(_), None) => unreachable!("an answer comes to a request on its way"),
            (Err(input), f) => {
                *flight = f;
                input
            }
        }
    }

    /// Sends `request`: its answer, once it comes.
    fn send(
        &self,
        request: Request,
    ) -> Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send + '_>> {
        let (clock, observer, store) = (self.clock, &*self.observer, &*self.store);
        let (key, lease, limit) = (&self.key, self.record_lease, self.limit());
        match request {
            Request::DeleteOld { ours } => {
                let delete = store.delete_member(key, ours.then_some(lease), None);
                Box::pin(timed(clock, observer, LeaseOp::MemberDelete, limit, delete))
            }
            Request::Create(member) => Box::pin(async move {
                let create = store.create_member(key, &member);
                timed(clock, observer, LeaseOp::MemberCreate, limit, create).await
            }),
            Request::TakeLease => {
                let seconds = Pace::RECORD_LEASE.as_secs() as u8;
                let acquire = store.acquire_member(key, lease, seconds);
                Box::pin(timed(
                    clock,
                    observer,
                    LeaseOp::MemberAcquire,
                    limit,
                    acquire,
                ))
            }
            Request::Renew => {
                let renew = store.renew_member(key, lease);
                Box::pin(timed(clock, observer, LeaseOp::MemberRenew, limit, renew))
            }
            Request::Write(member) => Box::pin(async move {
                let write = store.write_member(key, lease, &member);
                timed(clock, observer, LeaseOp::MemberWrite, limit, write).await
            }),
            Request::List => Box::pin(list(store, observer, &self.line, limit)),
            Request::Read => Box::pin(self.read(limit)),
            Request::Tidy => Box::pin(self.tidy()),
            Request::Leave => {
                let delete = store.delete_member(key, Some(lease), None);
                Box::pin(timed(clock, observer, LeaseOp::MemberDelete, limit, delete))
            }
        }
    }

    /// Reads the lease blob into the line for its holder, unless this instance leads by now (a
    /// leader knows better: it may have begun leading meanwhile).
    async fn read(&self, limit: Instant) -> Result<(), StoreError> {
        let read = self.store.read();
        let state = timed(self.clock, &*self.observer, LeaseOp::Read, limit, read).await?;
        let view = self.with(|l| {
            (!l.succession.leading).then(|| {
                l.read(&state);
                view(l)
            })
        });
        if let Some(view) = view {
            self.observer.line(&view);
        }
        Ok(())
    }

    /// Deletes the records the line counts dead for over [`Pace::DEAD_RECORD_AGE`], each only
    /// if it did not change since the listing (a member that came back keeps its record).
    async fn tidy(&self) -> Result<(), StoreError> {
        let dead = self.with(|l| l.long_dead());
        for (key, etag) in dead {
            let deleted = timed(
                self.clock,
                &*self.observer,
                LeaseOp::MemberDelete,
                self.limit(),
                self.store.delete_member(&key, None, Some(&etag)),
            )
            .await;
            match deleted {
                Ok(()) => {
                    tracing::info!(record = %key, "deleted the record of a member dead for over {}", human(Pace::DEAD_RECORD_AGE))
                }
                Err(e) => {
                    tracing::debug!(record = %key, error = %e, "did not delete a dead member's record")
                }
            }
        }
        Ok(())
    }

    /// Logs what the keeper calls for: a failure that is tried again at DEBUG, with its error
    /// (one macro call per level: clippy's `cognitive_complexity` counts what tracing's macros
    /// expand to).
    fn say(&self, say: Say<StoreError>) {
        let (text, e) = match say {
            Say::Standing(standing) => return self.say_standing(standing),
            Say::Left(left) => return say_left(left),
            Say::RecordGone => {
                return tracing::warn!("this instance's member record is gone; joining again");
            }
            Say::Failed(keep, e) => {
                let what = match keep {
                    Keep::DeleteOld { .. } => "delete the old member record",
                    Keep::Create => "create the member record",
                    Keep::TakeLease => "take the member record's lease",
                    Keep::Renew => "renew the member record's lease",
                };
                (format!("could not {what}; trying again"), e)
            }
            // The renew sorts out what became of the record.
            Say::WriteLost(e) => ("could not write the member record".to_owned(), e),
            Say::WriteFailed(e) => (
                "could not write the member record; again soon".to_owned(),
                e,
            ),
        };
        tracing::debug!(error = %e, "{text}");
    }

    fn say_standing(&self, standing: Standing) {
        match standing {
            Standing::Joined => tracing::info!("joined the line of members"),
            Standing::Duplicate => tracing::warn!(
                record = %self.key,
                "another instance holds the member record of this identity (another instance \
                 with this identity, or this instance before a restart whose record lease has \
                 not expired yet, within {}): this instance stays out of line (it still takes \
                 a lease nobody holds) and tries again every {}",
                human(Pace::RECORD_LEASE),
                human(Pace::RECORD_RENEW)
            ),
            Standing::Refused(why) => tracing::warn!(
                "{why}; this instance has no member record and polls the lease every \
                 acquire_interval as without members; trying again every {}",
                human(Pace::LIST_EVERY)
            ),
            Standing::Joining => {}
        }
    }
}

/// The log line of leaving the line.
fn say_left(left: Result<(), StoreError>) {
    match left {
        Ok(()) => tracing::info!("left the line of members"),
        Err(e) => tracing::warn!(
            error = %e,
            "could not delete this instance's member record; it counts as dead within {}",
            human(Pace::RECORD_LEASE)
        ),
    }
}

/// Lists the members into `line`, and tells the observer.
pub(crate) async fn list<S: LeaseStore>(
    store: &S,
    observer: &dyn Observer,
    line: &Mutex<Line>,
    limit: Instant,
) -> Result<(), StoreError> {
    let (slotted, clock) = {
        let l = line.lock().unwrap_or_else(|e| e.into_inner());
        (l.succession.slots > 1, l.clock)
    };
    let (records, slots) = if slotted {
        let (records, slots) =
            timed(clock, observer, LeaseOp::List, limit, store.list_group()).await?;
        (records, Some(slots))
    } else {
        let records = timed(clock, observer, LeaseOp::List, limit, store.list_members()).await?;
        (records, None)
    };
    let view = {
        let mut l = line.lock().unwrap_or_else(|e| e.into_inner());
        l.listed(records);
        if let Some(slots) = slots {
            l.succession.slots_listed(slots);
        }
        view(&l)
    };
    observer.line(&view);
    Ok(())
}
