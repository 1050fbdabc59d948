//! What a member takes in of each store answer before it tells the role that asked
//! ([`Taking`]): a read of a blob keeps what the next questions need, a listing goes into the
//! line, an answer proves the credentials, slot 0's count is compared with the member's, a blob
//! created again or found deleted tells its lock-delay, a probe that finds a ghost passes its
//! record over, an epoch written is the term's, the confirmation of a handoff is judged by the
//! line (docs/succession.md, "The handoff"), a standby written is what the record says. Each
//! role then gets its reply in its own words. What each request was is
//! remembered under its tag ([`Asked`]); what an answer says for the log before that
//! ([`said`]: a reserved epoch's write, a release not confirmed).

use super::kinds::Kinds;
use super::known::{Kept, Known, Note};
use super::messages::{Key, Listing, Reply, Say};
use crate::blob::LeaseBlob;
use crate::campaign::{self, Failed};
use crate::confirmation::{self, Read};
use crate::failure::Failure;
use crate::handoff;
use crate::leading;
use crate::line::{Found, Record, SlotBlob};
use crate::pace::Pace;
use crate::preemption::candidates;
use crate::quorum;
use crate::record;
use crate::slots::{WaitEvent, WaitRequest};
use crate::timing::Moment;
use crate::watch::{self, ahead_moved};
use crate::{attempt, attempt::Event};

/// A reply of the leader's, of a member of the store `K`.
type LeaderReply<K, E> =
    leading::Reply<<K as Kinds>::Record, <K as Kinds>::Notice, <K as Kinds>::ETag, E>;

/// A request on its way, as its role asked it.
#[derive(Debug, Clone)]
pub(super) enum Asked<I, K: Kinds> {
    /// The campaign's; with the record ahead as it stood when a watcher's read of it went out
    /// (boxed: every request on its way is kept, and moved, by value).
    Campaign(campaign::Request<I, Key<K>>, Option<Box<K::Record>>),
    /// The record keeper's.
    Keeper(record::Request<K::Published>),
    /// The leader's.
    Leading(leading::Request<I, K::Record, K::ETag>),
    /// The acquire that got no answer in time, now the settling's.
    Late,
    /// The release of what that acquire took.
    Release,
    /// An acquire on one replica of several still unanswered when its attempt ended, with
    /// the replica's place and the attempt's lease id: a late success is released.
    LateReplica {
        replica: usize,
        id: Option<K::LeaseId>,
    },
    /// One replica's part of a request sent to every replica: the replica's place.
    Part(usize),
}

/// What the answer `came` to `asked` says for the log, before the role that asked takes it:
/// the write of an epoch a handoff reserved, a release storage did not confirm (its lease
/// then expires on its own; docs/safety.md, "Recovery from anything").
pub(super) fn said<I, K: Kinds, E: Clone>(
    asked: &Asked<I, K>,
    came: &Reply<K, E>,
) -> Option<Say<I, K, E>> {
    use attempt::Request as A;
    match (asked, came) {
        (
            Asked::Campaign(
                campaign::Request::Attempt {
                    request: A::WriteReserved { epoch, .. },
                    ..
                },
                _,
            ),
            Reply::Written(written),
        ) => Some(Say::Reserved {
            epoch: *epoch,
            failed: written.as_ref().err().cloned(),
        }),
        (
            Asked::Campaign(
                campaign::Request::Attempt {
                    request: A::Release,
                    ..
                },
                _,
            ),
            Reply::Done(Err(e)),
        ) => Some(Say::Unreleased(e.clone())),
        (
            Asked::Leading(leading::Request::Store { request, .. }),
            Reply::Leading(leading::Reply::Released(Err(e))),
        ) if matches!(**request, handoff::Request::Release) => Some(Say::Unreleased(e.clone())),
        _ => None,
    }
}

/// What a member knows, as a store answer changes it, at the instant it came.
pub(super) struct Taking<'a, I, K: Kinds> {
    pub known: &'a mut Known<I, K>,
    pub kept: &'a mut Kept<K>,
    /// The blob's ETag after the term's own epoch write.
    pub etag: &'a mut Option<K::ETag>,
    pub now: I,
    pub wall: K::Wall,
    pub notes: &'a mut Vec<Note>,
    /// The line changed: show it.
    pub show: bool,
    /// A member ahead found to be a ghost, passed over.
    pub ghost: Option<String>,
    /// The record keeper is to look again (its record could not be written so).
    pub poke: bool,
}

impl<I: Moment, K: Kinds> Taking<'_, I, K> {
    /// The error of an answer that is not of the kind its request asked for (a shell's
    /// mistake): a failure, as a request that got no answer.
    fn failed<E: Failed>(&self) -> E {
        debug_assert!(false, "a request was answered with another's kind");
        E::timed_out(self.known.timing.request_timeout())
    }

    /// A listing goes into the line.
    fn listed(&mut self, listing: Listing<K::Record, K::Slot>) {
        if let Some(slots) = &listing.slots {
            for slot in slots.iter().filter(|s| s.last_holder().is_some()) {
                self.led(slot.slot());
            }
        }
        let line = &mut self.known.line;
        line.listed(listing.records, self.now, self.wall);
        if let Some(slots) = listing.slots {
            line.slots_listed(slots);
        }
        self.show = true;
    }

    /// The blob of `slot` was seen with a holder named (a leader wrote its epoch there): found
    /// missing later, it was deleted, whatever the member records say then
    /// (`LockDelays::group_was_led`, docs/safety.md "Recovery from anything").
    fn led(&mut self, slot: u32) {
        self.known.delays.led(slot, self.now);
    }

    fn lock_delay(&self) -> std::time::Duration {
        Pace::new(&self.known.timing).lock_delay()
    }

    /// The blob of `slot` was created again (marked or not), or could not be.
    fn created<E>(&mut self, slot: u32, created: &Result<bool, E>) {
        match created {
            Ok(true) => self.known.delays.created(slot),
            // A brand-new group's blob: no body ran on it.
            Ok(false) => self.known.delays.fresh(slot),
            Err(_) => {}
        }
    }

    /// Any answer but a refusal proves the credentials; no answer proves nothing.
    fn proves<E: Failed>(&mut self, answer: &Result<(), E>) {
        match answer {
            Err(e) if !e.service_answered() || e.failure() == Failure::Denied => {}
            _ => self.known.authorized = true,
        }
    }

    /// The campaign's reply to `asked`, from what came back.
    pub(super) fn campaign<E: Failed>(
        &mut self,
        asked: campaign::Request<I, Key<K>>,
        ahead: Option<K::Record>,
        came: Reply<K, E>,
    ) -> campaign::Reply<K::ETag, E> {
        use campaign::{Reply as C, Request as R};
        match (asked, came) {
            (R::Attempt { slot, request }, came) => C::Attempt(self.attempt(slot, request, came)),
            (R::Watch(request), came) => C::Watch(self.watch(request, ahead, came)),
            (R::Wait(request), came) => C::Wait(self.wait(request, came)),
            (R::List { .. }, Reply::Listed(listed)) => C::Listed(listed.map(|l| self.listed(l))),
            (R::List { .. }, _) => C::Listed(Ok(())),
            (R::Recreate { slot }, came) => {
                if let Reply::Recreated(Some(created)) = came {
                    self.created(slot, &created);
                }
                C::Recreated
            }
            (R::Look { slot }, Reply::Blob(read)) => {
                let look = match &read {
                    Ok(blob) => Some(Some(blob.look())),
                    Err(e) if e.failure() == Failure::Missing => Some(None),
                    Err(_) => None,
                };
                if let Some(look) = look {
                    let (now, lock_delay) = (self.now, self.lock_delay());
                    let delays = &mut self.known.delays;
                    if let Some(left) = delays.looked(slot, look.as_ref(), now, lock_delay) {
                        self.notes.push(Note::LockDelay { slot, left });
                    }
                }
                C::Looked
            }
            (R::Look { .. }, _) => C::Looked,
            (R::CheckCount, Reply::Blob(read)) => C::Counted(read.map(|blob| {
                self.known.authorized = true;
                let (leased, recorded) = (blob.leased(), blob.count_recorded());
                self.known.note_count(leased, recorded, self.notes)
            })),
            (R::CheckCount, _) => C::Counted(Err(self.failed())),
            (R::Notice, Reply::Blob(read)) => C::Notice(read.map(|blob| {
                let named = blob.notice() == Some(self.known.line.me.as_str());
                named.then(|| blob.epoch())
            })),
            (R::Notice, _) => C::Notice(Err(self.failed())),
            (R::Replica(request), came) => C::Replica(self.replica(request, came)),
        }
    }

    /// What one replica answered, in the words of the attempt on a majority: a request the
    /// service refused for the lease's sake (held, lost, missing) says so; any other failure
    /// leaves the outcome unknown, which never counts (docs/quorum.md, the rule *Counting*).
    fn replica<E: Failed>(
        &mut self,
        asked: quorum::Request<I>,
        came: Reply<K, E>,
    ) -> quorum::Reply {
        use quorum::Reply as Q;
        let refused = |e: &E| match e.failure() {
            Failure::Held | Failure::LeaseLost => Q::Refused,
            Failure::Missing => Q::Missing,
            _ => Q::Unknown,
        };
        match (asked, came) {
            (quorum::Request::Acquire { .. }, Reply::Acquired(acquired)) => {
                self.proves(&acquired);
                acquired.map_or_else(|e| refused(&e), |()| Q::Done)
            }
            (quorum::Request::Read { replica, .. }, Reply::Stamped(read)) => match read {
                Ok(read) => {
                    let (blob, stamp) = *read;
                    let (epoch, age) = (blob.epoch(), blob.age());
                    self.known.saw_epoch(epoch);
                    let reads = &mut self.kept.replicas;
                    if reads.len() <= replica {
                        reads.resize_with(replica + 1, || None);
                    }
                    reads[replica] = Some((blob, stamp));
                    // Sent once its acquire was heard: it sees the blob at or after it.
                    Q::Read {
                        epoch,
                        stamp,
                        age,
                        same_etag: false,
                    }
                }
                Err(e) => refused(&e),
            },
            (quorum::Request::WriteEpoch { replica, epoch, .. }, Reply::Written(written)) => {
                match written {
                    Ok(etag) => {
                        // The term's epoch, and each replica's ETag after it: a handoff changes
                        // the lease there only while no one wrote since (docs/quorum.md).
                        self.kept.epoch = Some(epoch);
                        self.known.saw_epoch(Some(epoch));
                        let etags = &mut self.kept.replica_etags;
                        if etags.len() <= replica {
                            etags.resize_with(replica + 1, || None);
                        }
                        etags[replica] = Some(etag);
                        Q::Done
                    }
                    Err(e) => refused(&e),
                }
            }
            (
                quorum::Request::Create { .. } | quorum::Request::Release { .. },
                Reply::Done(done),
            ) => done.map_or_else(|e| refused(&e), |()| Q::Done),
            _ => Q::Unknown,
        }
    }

    fn attempt<E: Failed>(
        &mut self,
        slot: u32,
        asked: attempt::Request<I>,
        came: Reply<K, E>,
    ) -> Event<E> {
        use attempt::Request as R;
        match (asked, came) {
            (_, Reply::Acquired(acquired)) => {
                self.proves(&acquired);
                Event::Acquired(acquired)
            }
            (R::ReadCount { .. }, Reply::Blob(zero)) => Event::Counted(zero.map(|zero| {
                let (leased, recorded) = (zero.leased(), zero.count_recorded());
                self.known.note_count(leased, recorded, self.notes)
            })),
            (_, Reply::Blob(read)) => Event::Read(read.map(|blob| {
                let epoch = blob.epoch();
                self.kept.read = Some(*blob);
                epoch
            })),
            (asked, Reply::Written(written)) => {
                // The epoch on the blob is the term's, once won: its notices say it again.
                if let (Ok(_), R::WriteEpoch { epoch, .. } | R::WriteReserved { epoch, .. }) =
                    (&written, &asked)
                {
                    self.kept.epoch = Some(*epoch);
                }
                Event::Written(written.map(|etag| *self.etag = Some(etag)))
            }
            (_, Reply::Recreated(Some(created))) => {
                self.created(slot, &created);
                Event::Recreated(created.map(drop))
            }
            // The release is done, whatever its answer.
            (R::Release, _) => Event::Released,
            (R::Acquire, _) => Event::Acquired(Err(self.failed())),
            (R::ReadCount { .. }, _) => Event::Counted(Err(self.failed())),
            (R::Read { .. } | R::ReadBeside { .. }, _) => Event::Read(Err(self.failed())),
            (R::WriteEpoch { .. } | R::WriteReserved { .. }, _) => {
                Event::Written(Err(self.failed()))
            }
            (R::Recreate, _) => Event::Recreated(Err(self.failed())),
        }
    }

    fn watch<E: Failed>(
        &mut self,
        asked: watch::Request<I>,
        ahead: Option<K::Record>,
        came: Reply<K, E>,
    ) -> watch::Event<E> {
        match (asked, came) {
            // Whatever its answer: the round reads the blob anyway.
            (_, Reply::Listed(listed)) => {
                if let Ok(listing) = listed {
                    self.listed(listing);
                }
                watch::Event::Listed
            }
            (_, Reply::Blob(read)) => {
                watch::Event::BlobRead(read.map(|blob| self.kept.blob = Some(*blob)))
            }
            (_, Reply::Ahead(read)) => match ahead {
                Some(ahead) => watch::Event::AheadRead(
                    read.map(|fresh| ahead_moved(&ahead, fresh.as_deref(), self.wall)),
                ),
                None => watch::Event::AheadRead(Ok(false)),
            },
            // Nobody was ahead to read.
            (watch::Request::ReadAhead { .. }, _) => watch::Event::AheadRead(Ok(false)),
            // Another process at its URL: the record is a ghost's. Nothing there: the round
            // reads the record (a live member's URL may be wrong).
            (watch::Request::ProbeAhead, Reply::Probed(found)) => {
                if let Some(ahead) = ahead {
                    self.probed(ahead.key(), found == Found::Another);
                }
                if found != Found::Nothing {
                    self.known.line.heard();
                }
                watch::Event::Probed(found)
            }
            // No URL to probe: the member stands.
            (watch::Request::ProbeAhead, _) => watch::Event::Probed(Found::NoAnswer),
            (watch::Request::List { .. }, _) => watch::Event::Listed,
            (watch::Request::ReadBlob { .. }, _) => watch::Event::BlobRead(Err(self.failed())),
        }
    }

    fn wait<E: Failed>(
        &mut self,
        asked: WaitRequest<I, Key<K>>,
        came: Reply<K, E>,
    ) -> WaitEvent<K::ETag, E> {
        match (asked, came) {
            (_, Reply::Listed(listed)) => WaitEvent::Listed(listed.map(|l| self.listed(l))),
            (_, Reply::Member(read)) => WaitEvent::Read(read),
            (WaitRequest::Probe(ahead), Reply::Probed(found)) => {
                WaitEvent::Probed(self.probed(&ahead, found.gone_for_a_slot()))
            }
            // No URL to probe: the member stands.
            (WaitRequest::Probe(_), _) => WaitEvent::Probed(false),
            (WaitRequest::List { .. }, _) => WaitEvent::Listed(Err(self.failed())),
            (WaitRequest::Read { .. }, _) => WaitEvent::Read(Err(self.failed())),
        }
    }

    /// Whether the member ahead, whose record has not changed, is a record whose process is
    /// gone (`ghost`: as the probe of its URL with its wake token judged, [`Found`]). Such a
    /// record is out of line from now on, so that a member waiting for a slot, or a watcher,
    /// does not wait for it to poll (docs/slots.md, docs/succession.md).
    fn probed(&mut self, ahead: &Key<K>, ghost: bool) -> bool {
        let line = &mut self.known.line;
        let Some(record) = line.members.iter().find(|r| r.key() == ahead) else {
            return false;
        };
        if !ghost {
            return false;
        }
        let (key, joined) = (record.key().clone(), record.joined());
        self.ghost = Some(record.identity().to_owned());
        line.ghosts.insert(key, joined);
        true
    }

    /// The record keeper's reply to `asked`: a listing goes into the line, a read of the lease
    /// blob tells the line its holder unless this member leads by now (a leader knows better).
    pub(super) fn keeper<E: Failed>(
        &mut self,
        asked: &record::Request<K::Published>,
        came: Reply<K, E>,
    ) -> Result<(), E> {
        match (asked, came) {
            (_, Reply::Listed(listed)) => listed.map(|l| self.listed(l)),
            (_, Reply::Blob(read)) => read.map(|blob| {
                if blob.named().is_some() {
                    self.led(0);
                }
                if !self.known.line.leading {
                    self.known.line.read(blob.seen(), self.now);
                    self.show = true;
                }
            }),
            (_, Reply::Done(done)) => done,
            _ => Err(self.failed()),
        }
    }

    /// The leader's reply to `asked`: its relisting, its lookout's listing and its choice's go
    /// into the line; the confirmation's read is judged by the line (which takes a fresh
    /// record of the successor); a standby written is what the record says, one not written
    /// is the record keeper's to write; the rest is its own.
    pub(super) fn leading<E: Failed>(
        &mut self,
        asked: &leading::Request<I, K::Record, K::ETag>,
        came: Reply<K, E>,
    ) -> Option<LeaderReply<K, E>> {
        use leading::{Reply as L, Request as R};
        match (asked, came) {
            (_, Reply::Leading(reply)) => Some(reply),
            (R::WinBack(request), came) => Some(L::WinBack(self.replica(*request, came))),
            (R::Relist { .. }, Reply::Listed(listed)) => {
                Some(L::Relisted(listed.map(|l| self.listed(l)).is_ok()))
            }
            (R::Choice { request, .. }, Reply::Listed(listed))
                if matches!(**request, crate::choice::Request::List) =>
            {
                Some(L::Choice(Box::new(crate::choice::Reply::Listed(
                    listed.map(|l| self.listed(l)),
                ))))
            }
            (R::List { .. }, Reply::Listed(listed)) => Some(L::Listed(listed.ok().map(|l| {
                self.listed(l);
                candidates(&self.known.line, self.now)
            }))),
            (R::Store { request, .. }, Reply::Confirming(read))
                if let handoff::Request::Read { successor, .. } = &**request =>
            {
                Some(self.confirming(successor, *read))
            }
            (R::Standby { .. }, Reply::Wrote(wrote)) => {
                match wrote {
                    Ok(says) => self.known.own.written = self.known.own.published == *says,
                    Err(_) => self.poke = true,
                }
                Some(L::StoodBy)
            }
            _ => {
                debug_assert!(
                    false,
                    "a request of the leader was answered with another's kind"
                );
                None
            }
        }
    }

    /// What the confirmation's read of the blob, and of the record of `successor` when asked,
    /// says of the handoff to it: the blob as the term's epoch and this member's name judge it
    /// ([`confirmation::read_of`]), a blob not read unanswered; the record by the line
    /// ([`confirmation::judge`]), unless the successor took the lease (the line stays as
    /// listed).
    fn confirming<E: Failed>(
        &mut self,
        successor: &K::Record,
        read: super::messages::Confirming<K, E>,
    ) -> LeaderReply<K, E> {
        let super::messages::Confirming { blob, record, led } = read;
        let me = self.known.line.me.as_str();
        let read = match (&blob, self.kept.epoch) {
            (Ok(blob), Some(epoch)) => confirmation::read_of(blob, me, successor.identity(), epoch),
            _ => Read::Unanswered,
        };
        let read = match read {
            Read::Taken => Read::Taken,
            _ if led => Read::Led,
            read => read,
        };
        let record = record.filter(|_| read != Read::Taken).map(|read| {
            let read = read.map_err(|e| e.failure());
            let (now, wall) = (self.now, self.wall);
            self.show = true;
            confirmation::judge(&mut self.known.line, successor, read, now, wall)
        });
        leading::Reply::Read(read, record.map(Box::new))
    }

    /// The settling's answer: the late acquire's (which proves nothing of the credentials: it
    /// is not the campaign's any more), or its release's.
    pub(super) fn settling<E: Failed>(&mut self, came: Reply<K, E>) -> Result<(), E> {
        match came {
            Reply::Acquired(done) | Reply::Done(done) => done,
            _ => Err(self.failed()),
        }
    }
}
