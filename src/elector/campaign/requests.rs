//! What each of the campaign's store requests does on the store ([`ElectorGrounds::send`]), and
//! what its answer tells the campaign ([`ElectorGrounds::receive`]). The acquire, and what goes
//! beside it or is not waited for, run in tasks of their own (an acquire that gets no answer in
//! time goes on as a late acquire); the others are polled by the campaign's own task, as they
//! come. Each is cut at its limit and logged by `timed`; what an answer changes of the elector
//! (the lock-delays, the group's count, the line, the credentials) it changes when it comes.

use super::grounds::ElectorGrounds;
use crate::elector::members::list;
use crate::elector::observe::LeaseOp;
use crate::elector::request::timed;
use crate::elector::vanish;
use crate::elector::wake::WakeSent;
use crate::store::{BlobState, ETag, Failure, LeaseState, LeaseStore, MemberRecord, StoreError};
use leasehold_core::attempt::{self, Event};
use leasehold_core::blob::LeaseBlob;
use leasehold_core::campaign::{Reply, Request};
use leasehold_core::slots::{WaitEvent, WaitRequest};
use leasehold_core::watch::{self, ahead_moved};
use std::future::Future;
use std::pin::Pin;
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub(super) type Campaigned = Request<Instant, crate::store::MemberKey>;

/// What came back of a request, before it is read for the campaign.
pub(super) enum Came {
    Acquired(Result<(), StoreError>),
    Blob(Result<BlobState, StoreError>),
    Written(Result<ETag, StoreError>),
    Recreated(Result<bool, StoreError>),
    Listed(Result<(), StoreError>),
    Ahead(MemberRecord, Result<Option<MemberRecord>, StoreError>),
    Member(Result<(LeaseState, ETag), StoreError>),
    Probed(MemberRecord, WakeSent),
    /// Nothing was sent (nothing to create, nobody ahead, no URL to probe).
    Nothing,
    /// The request's task ended without an answer (it panicked or was cancelled).
    Failed(StoreError),
}

/// A request on its way.
pub(super) enum Sent {
    /// The acquire, in a task of its own.
    Acquire(JoinHandle<Result<(), StoreError>>),
    /// Beside the acquire, or not waited for: in a task of its own.
    Task(JoinHandle<Came>),
    /// Polled by the campaign's task.
    Here(Pin<Box<dyn Future<Output = Came> + Send>>),
}

fn here(f: impl Future<Output = Came> + Send + 'static) -> Sent {
    Sent::Here(Box::pin(f))
}

fn task(f: impl Future<Output = Came> + Send + 'static) -> Sent {
    Sent::Task(crate::spawn::spawn(f))
}

impl<S: LeaseStore> ElectorGrounds<'_, S> {
    /// Sends `request`.
    pub(super) fn send(&mut self, request: &Campaigned) -> Sent {
        let e = &*self.elector;
        let clock = e.clock;
        let (store, observer) = (e.store.clone(), e.observer.clone());
        let rt = e.timing.request_timeout();
        match request {
            Request::Attempt { slot, request } => self.send_attempt(*slot, *request),
            Request::Watch(request) => self.send_watch(*request),
            Request::Wait(request) => self.send_wait(request),
            Request::List { until } => self.list(*until),
            Request::Recreate { slot } => {
                if !e.create_if_missing || !e.vanished.to_create(*slot) {
                    return here(async { Came::Nothing });
                }
                here(self.recreate(*slot))
            }
            Request::Look { slot } => {
                let (store, limit) = (e.store_of(*slot).clone(), clock.now() + rt);
                here(async move {
                    Came::Blob(timed(clock, &*observer, LeaseOp::Read, limit, store.read()).await)
                })
            }
            Request::CheckCount | Request::Notice => {
                let limit = clock.now() + rt;
                here(async move {
                    Came::Blob(timed(clock, &*observer, LeaseOp::Read, limit, store.read()).await)
                })
            }
        }
    }

    /// What came back of `request`, for the campaign.
    pub(super) fn receive(
        &mut self,
        request: &Campaigned,
        came: Came,
        started: Instant,
    ) -> Reply<ETag, StoreError> {
        match (request, came) {
            (Request::Attempt { slot, request }, came) => {
                Reply::Attempt(self.receive_attempt(*slot, request, came, started))
            }
            (Request::Watch(_), came) => Reply::Watch(self.receive_watch(came)),
            (Request::Wait(_), came) => Reply::Wait(self.receive_wait(came)),
            (Request::List { .. }, Came::Listed(listed)) => Reply::Listed(listed),
            (Request::List { .. }, _) => Reply::Listed(Ok(())),
            (Request::Recreate { slot }, came) => {
                if let Came::Recreated(created) = came {
                    self.created(*slot, &created);
                }
                Reply::Recreated
            }
            (Request::Look { slot }, Came::Blob(read)) => {
                let e = &*self.elector;
                match read {
                    Ok(state) => e.vanished.looked(*slot, Some(&state), &e.timing),
                    Err(e2) if e2.failure() == Failure::Missing => {
                        e.vanished.looked(*slot, None, &e.timing)
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "could not look at the deleted lease blob")
                    }
                }
                Reply::Looked
            }
            (Request::CheckCount, Came::Blob(read)) => Reply::Counted(read.map(|state| {
                self.elector.authorized = true;
                self.elector
                    .note_count(state.leased(), state.count_recorded())
            })),
            (Request::Notice, Came::Blob(read)) => Reply::Notice(read.map(|state| {
                let named = state.successor.as_deref() == Some(self.elector.identity.as_str());
                named.then(|| state.holder.map(|h| h.epoch))
            })),
            // (A read answers nothing else; were it to, its answer is a failure.)
            (Request::Look { .. }, _) => Reply::Looked,
            (Request::CheckCount, came) => Reply::Counted(Err(failed(came))),
            (Request::Notice, came) => Reply::Notice(Err(failed(came))),
        }
    }

    /// Creates the blob of `slot` again, marked when this instance saw it led or other members
    /// are listed ([`vanish::create`]); whether it was marked.
    fn recreate(&self, slot: u32) -> impl Future<Output = Came> + Send + 'static {
        let e = &*self.elector;
        let clock = e.clock;
        let (group, blob) = (e.store.clone(), e.store_of(slot).clone());
        let (me, led, timing) = (e.identity.clone(), e.vanished.was_led(slot), e.timing);
        let observer = e.observer.clone();
        async move {
            let created =
                vanish::create(&*group, &*blob, &me, led, &timing, clock, &*observer).await;
            Came::Recreated(created)
        }
    }

    /// The blob of `slot` was created again (marked or not), or could not be.
    fn created(&self, slot: u32, created: &Result<bool, StoreError>) {
        let vanished = &self.elector.vanished;
        match created {
            Ok(true) => vanished.created(slot),
            // A brand-new group's blob: no body ran on it.
            Ok(false) => vanished.fresh(slot),
            Err(e) => tracing::debug!(error = %e, slot, "could not create the deleted blob again"),
        }
    }

    /// A listing of the line, cut at `until` (without a line, nothing).
    fn list(&self, until: Instant) -> Sent {
        let e = &*self.elector;
        let Some(m) = &e.membership else {
            return here(async { Came::Listed(Ok(())) });
        };
        let (store, observer, line) = (e.store.clone(), e.observer.clone(), m.line.clone());
        here(async move { Came::Listed(list(&*store, &*observer, &line, until).await) })
    }

    fn send_attempt(&mut self, slot: u32, request: attempt::Request<Instant>) -> Sent {
        let e = &*self.elector;
        let clock = e.clock;
        let (store, observer, id) = (e.store_of(slot).clone(), e.observer.clone(), self.id());
        let read = |until| {
            let (store, observer) = (store.clone(), observer.clone());
            async move { Came::Blob(timed(clock, &*observer, LeaseOp::Read, until, store.read()).await) }
        };
        match request {
            attempt::Request::Acquire => {
                let seconds = e.timing.lease_seconds();
                Sent::Acquire(crate::spawn::spawn(async move {
                    store.acquire(id, seconds).await
                }))
            }
            attempt::Request::ReadBeside { until } => task(read(until)),
            attempt::Request::Read { until } => here(read(until)),
            attempt::Request::ReadCount { until } => {
                let zero = e.store.clone();
                here(async move {
                    Came::Blob(timed(clock, &*observer, LeaseOp::Read, until, zero.read()).await)
                })
            }
            attempt::Request::WriteReserved { epoch, until } => {
                let holder = self.holder_of(epoch, clock.wall(), None);
                let etag = self
                    .kept
                    .reservation
                    .take()
                    .unwrap_or_else(|| ETag::from(""));
                self.kept.holder = Some(holder.clone());
                task(async move {
                    let write = store.write_holder(id, &etag, &holder);
                    Came::Written(timed(clock, &*observer, LeaseOp::WriteEpoch, until, write).await)
                })
            }
            attempt::Request::WriteEpoch { epoch, until } => {
                let wall = self.kept.wall.unwrap_or_else(|| clock.wall());
                let slots = leasehold_core::slots::to_record(e.slots);
                let holder = self.holder_of(epoch, wall, slots);
                self.kept.holder = Some(holder.clone());
                let etag =
                    (self.kept.read.as_ref()).map_or_else(|| ETag::from(""), |r| r.etag.clone());
                let Some(until) = until else {
                    return task(async move {
                        Came::Written(store.write_holder(id, &etag, &holder).await)
                    });
                };
                here(async move {
                    let write = store.write_holder(id, &etag, &holder);
                    Came::Written(timed(clock, &*observer, LeaseOp::WriteEpoch, until, write).await)
                })
            }
            attempt::Request::Recreate => {
                tracing::warn!(slot, "the lease blob is missing; creating it");
                here(self.recreate(slot))
            }
            attempt::Request::Release => {
                let limit = clock.now() + e.timing.request_timeout();
                let duration = e.timing.duration;
                here(async move {
                    let released = timed(
                        clock,
                        &*observer,
                        LeaseOp::Release,
                        limit,
                        store.release(id),
                    )
                    .await;
                    if let Err(e) = released {
                        tracing::warn!(
                            error = %e,
                            "could not release the lease; it expires on its own within {}",
                            humantime::format_duration(duration)
                        );
                    }
                    Came::Nothing
                })
            }
        }
    }

    fn receive_attempt(
        &mut self,
        slot: u32,
        request: &attempt::Request<Instant>,
        came: Came,
        started: Instant,
    ) -> Event<StoreError> {
        let came = match (request, came) {
            (attempt::Request::ReadBeside { .. }, Came::Failed(e)) => Came::Blob(Err(e)),
            (_, Came::Failed(e)) => Came::Written(Err(e)),
            (_, came) => came,
        };
        match (request, came) {
            (_, Came::Acquired(acquired)) => {
                let observer = &self.elector.observer;
                observer.lease_op(LeaseOp::Acquire, started.elapsed(), acquired.as_ref().err());
                // Any answer but a refusal proves the credentials; no answer proves nothing.
                match &acquired {
                    Err(StoreError::Unreachable(_) | StoreError::TimedOut(_)) => {}
                    Err(e) if e.failure() == Failure::Denied => {}
                    _ => self.elector.authorized = true,
                }
                Event::Acquired(acquired)
            }
            (attempt::Request::ReadCount { .. }, Came::Blob(zero)) => {
                Event::Counted(zero.map(|zero| {
                    self.elector
                        .note_count(zero.leased(), zero.count_recorded())
                }))
            }
            (_, Came::Blob(read)) => Event::Read(read.map(|state| {
                let epoch = state.epoch();
                self.kept.read = Some(state);
                epoch
            })),
            (attempt::Request::WriteReserved { .. }, Came::Written(written)) => {
                self.reserved_answer(written)
            }
            (_, Came::Written(written)) => Event::Written(
                written
                    .map(|etag| {
                        self.kept.etag = Some(etag);
                    })
                    .inspect_err(|e| {
                        if e.code() == Some("ConditionNotMet") {
                            tracing::debug!("the blob changed since it was read; reading it again");
                        }
                    }),
            ),
            (_, Came::Recreated(created)) => {
                self.created(slot, &created);
                Event::Recreated(created.map(drop))
            }
            // The release is done, whatever its answer.
            (_, _) => Event::Released,
        }
    }

    /// The reserved epoch's write answered.
    fn reserved_answer(&mut self, written: Result<ETag, StoreError>) -> Event<StoreError> {
        match written {
            Ok(etag) => {
                let epoch = self.kept.holder.as_ref().map(|h| h.epoch);
                tracing::debug!(
                    epoch,
                    "wrote the epoch the handoff reserved for this instance"
                );
                self.kept.etag = Some(etag);
                Event::Written(Ok(()))
            }
            Err(e) => {
                tracing::debug!(error = %e, "the reserved epoch was not written; reading the blob");
                Event::Written(Err(e))
            }
        }
    }

    fn send_watch(&mut self, request: watch::Request<Instant>) -> Sent {
        let e = &*self.elector;
        let clock = e.clock;
        let (store, observer) = (e.store.clone(), e.observer.clone());
        match request {
            watch::Request::List { until } => self.list(until),
            watch::Request::ReadBlob { until } => here(async move {
                Came::Blob(timed(clock, &*observer, LeaseOp::Read, until, store.read()).await)
            }),
            watch::Request::ReadAhead { until } => {
                let Some(ahead) = self.kept.ahead.take() else {
                    return here(async { Came::Nothing });
                };
                here(async move {
                    let read = store.read_record(&ahead.key);
                    let read = timed(clock, &*observer, LeaseOp::MemberRead, until, read).await;
                    Came::Ahead(ahead, read)
                })
            }
        }
    }

    fn receive_watch(&mut self, came: Came) -> watch::Event<StoreError> {
        match came {
            Came::Listed(listed) => {
                if let Err(e) = listed {
                    tracing::debug!(error = %e, "could not list the members");
                }
                watch::Event::Listed
            }
            Came::Blob(read) => {
                watch::Event::BlobRead(read.map(|state| self.kept.blob = Some(state)))
            }
            Came::Ahead(ahead, read) => watch::Event::AheadRead(
                read.map(|fresh| ahead_moved(&ahead, fresh.as_ref(), self.elector.clock.wall())),
            ),
            // Nobody was ahead to read.
            _ => watch::Event::AheadRead(Ok(false)),
        }
    }

    fn send_wait(&mut self, request: &WaitRequest<Instant, crate::store::MemberKey>) -> Sent {
        let e = &*self.elector;
        let clock = e.clock;
        let (store, observer) = (e.store.clone(), e.observer.clone());
        match request {
            WaitRequest::List { until } => self.list(*until),
            WaitRequest::Read { ahead, until } => {
                tracing::trace!(ahead = %ahead, "reading the record of the member ahead");
                let (ahead, until) = (ahead.clone(), *until);
                here(async move {
                    let read = store.read_member(&ahead);
                    Came::Member(timed(clock, &*observer, LeaseOp::MemberRead, until, read).await)
                })
            }
            WaitRequest::Probe(ahead) => self.probe(ahead),
        }
    }

    fn receive_wait(&mut self, came: Came) -> WaitEvent<ETag, StoreError> {
        match came {
            Came::Listed(listed) => WaitEvent::Listed(listed),
            Came::Member(read) => {
                WaitEvent::Read(read.map(|(lease, etag)| (lease == LeaseState::Leased, etag)))
            }
            Came::Probed(record, sent) => WaitEvent::Probed(self.probed(&record, sent)),
            // No URL to probe: the member stands.
            _ => WaitEvent::Probed(false),
        }
    }

    /// A probe of the URL of the member ahead with its wake token (nothing without a URL).
    fn probe(&self, ahead: &crate::store::MemberKey) -> Sent {
        let e = &*self.elector;
        let record = (e.membership.as_ref()).and_then(|m| {
            m.with(|l| {
                l.succession
                    .members
                    .iter()
                    .find(|r| &r.key == ahead)
                    .cloned()
            })
        });
        let Some(record) = record else {
            return here(async { Came::Nothing });
        };
        let (Some(url), Some(token)) = (&record.member.advertise, &record.member.wake_token) else {
            return here(async { Came::Nothing });
        };
        let (url, token, sender) = (url.clone(), token.clone(), e.wake_sender.clone());
        here(async move {
            let sent = sender.probe(&url, &token).await;
            Came::Probed(record, sent)
        })
    }

    /// Whether the member ahead, whose record has not changed, is a record whose process is
    /// gone: the probe of its URL with its wake token found nothing there, or another process.
    /// Such a record is out of line from now on ([`Line::ghosts`](crate::elector::members::Line)),
    /// so that a waiting member does not wait for it to poll (docs/slots.md). A member that does
    /// not answer in time (frozen, or its network slow) stands.
    fn probed(&self, record: &MemberRecord, sent: WakeSent) -> bool {
        let Some(m) = &self.elector.membership else {
            return false;
        };
        match sent {
            WakeSent::Refused | WakeSent::Unreachable => {
                tracing::info!(
                    member = record.identity(),
                    "the member ahead in line is not the process its record names (its URL answers \
                     for another, or for none); passing its record over"
                );
                m.with(|l| {
                    l.succession
                        .ghosts
                        .insert(record.key.clone(), record.joined);
                });
                true
            }
            _ => false,
        }
    }
}

/// The error of a request whose answer is not the kind it asked for: its task failed.
fn failed(came: Came) -> StoreError {
    match came {
        Came::Failed(e) => e,
        _ => StoreError::Client("a request was answered with another's kind".into()),
    }
}
