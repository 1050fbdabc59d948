//! Before the first campaign: the container and the lease blob (and the slot blobs) exist.
//! [`Startup`] is one attempt's steps as plain data (the calls, and what their answers mean);
//! [`prepare`] drives it on a store, with its limits and its retries. The simulator's
//! synchronous world drives the same steps on its own links (src/sim/sync/prepare.rs), so that
//! both engines start a member as the daemon does.

use super::error::Error;
use super::observe::{LeaseOp, Observer};
use super::request::timed;
use crate::clock::Clock;
use crate::fmt::human;
use crate::store::target::StorageTarget;
use crate::store::{Call, Failure, LeaseState, LeaseStore, Return, StoreError, carry_out};
use crate::timing::Timing;
use leasehold_core::Pace;
use tokio::time::sleep;
use tokio_util::sync::CancellationToken;

/// One attempt to make sure every blob of the group exists, slot by slot: each looked at
/// (`prepare` without creating); a missing container created; a missing blob created by
/// the rule of docs/safety.md, "Recovery from anything": marked as created again after a deletion when a live member
/// other than this one has a record (a lock-delay follows), plainly otherwise (a brand-new
/// group: no body ran on it).
#[derive(Debug)]
pub(crate) struct Startup {
    me: String,
    slots: u32,
    create_if_missing: bool,
    slot: u32,
    at: At,
}

/// What the attempt waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    /// The look at the slot's blob.
    Look,
    /// The creation of the missing container.
    Container,
    /// The listing of the members, before a missing blob is created.
    List,
    /// The blob's creation.
    Create,
}

/// What to do next in an attempt.
// One step at a time, at start-up only: boxing the call would save nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum StartupStep {
    /// Send `call` and hand its answer to [`Startup::answer`]; with `own`, the call has a limit
    /// of its own too (`request_timeout` from its sending), counted as that kind of request.
    Call { call: Call, own: Option<LeaseOp> },
    /// The attempt is over: every blob exists, or this failed it.
    Over(Result<(), StoreError>),
}

impl Startup {
    /// An attempt of member `me` on a group of `slots`, creating what is missing only with
    /// `create_if_missing`: it and its first call.
    pub(crate) fn attempt(me: &str, slots: u32, create_if_missing: bool) -> (Self, StartupStep) {
        let startup = Self {
            me: me.to_owned(),
            slots,
            create_if_missing,
            slot: 0,
            at: At::Look,
        };
        let first = startup.look();
        (startup, first)
    }

    fn look(&self) -> StartupStep {
        StartupStep::Call {
            call: Call::Prepare {
                slot: self.slot,
                create: false,
            },
            own: None,
        }
    }

    /// The slot's blob exists: the next slot's is looked at, or the attempt is done.
    fn next_slot(&mut self) -> StartupStep {
        self.slot += 1;
        self.at = At::Look;
        match self.slot < self.slots {
            true => self.look(),
            false => StartupStep::Over(Ok(())),
        }
    }

    /// The answer to the call last returned.
    pub(crate) fn answer(&mut self, ret: Return) -> StartupStep {
        let slot = self.slot;
        match (self.at, ret) {
            (At::Look, Return::Prepare(Ok(()))) => self.next_slot(),
            (At::Look, Return::Prepare(Err(e)))
                if e.code() == Some("ContainerNotFound") && self.create_if_missing =>
            {
                // A container that does not exist holds no member records.
                self.at = At::Container;
                StartupStep::Call {
                    call: Call::Prepare { slot, create: true },
                    own: None,
                }
            }
            (At::Look, Return::Prepare(Err(e)))
                if e.failure() == Failure::Missing && self.create_if_missing =>
            {
                self.at = At::List;
                StartupStep::Call {
                    call: Call::ListMembers,
                    own: Some(LeaseOp::List),
                }
            }
            (At::List, Return::ListMembers(listed)) => {
                let others = match listed {
                    Ok(members) => members
                        .iter()
                        .any(|r| r.lease == LeaseState::Leased && r.identity() != self.me),
                    // Credentials that may not list the container keep no member records
                    // either (they need sp=rwdlc): the group elects as without members, and so
                    // without the delay.
                    Err(e) if e.failure() == Failure::Denied => false,
                    Err(e) => return StartupStep::Over(Err(e)),
                };
                self.at = At::Create;
                let call = match others {
                    true => Call::Recreate {
                        slot,
                        by: self.me.clone(),
                    },
                    false => Call::Prepare { slot, create: true },
                };
                StartupStep::Call {
                    call,
                    own: Some(LeaseOp::Prepare),
                }
            }
            (At::Container | At::Create, Return::Prepare(Ok(())) | Return::Recreate(Ok(()))) => {
                self.next_slot()
            }
            (at, ret) => match ret.error() {
                Some(e) => StartupStep::Over(Err(e.clone())),
                None => panic!("the start-up waits for {at:?}, not {ret:?}: a fault of its driver"),
            },
        }
    }

    /// Whether a failed attempt's error ends the start-up (refused credentials, or a missing
    /// container or blob that may not be created) rather than being tried again, as
    /// [`prepare`] tells them apart.
    #[cfg(any(test, feature = "test-util"))]
    pub(crate) fn fatal(error: &StoreError) -> bool {
        matches!(error.failure(), Failure::Denied | Failure::Missing)
    }
}

/// Makes sure the container and blob exist before the first campaign (and with `[lease].slots`
/// above 1, the slot blobs: created now, a slot blob found missing later was deleted). A blob
/// missing while other members of the group are alive was deleted under its leader: it is
/// created again under the lock-delay (`vanish`). Refused credentials and a missing container
/// or blob that may not be created are errors. An unreachable service is retried with backoff
/// until `shutdown` (the daemon), or is an error when there is none to wait for (a library's
/// connect tries once). `Ok(false)`: shutdown came meanwhile.
///
/// Only for a group on one account. A replica set's blobs are its campaign's to create, each
/// stamped with the set's fingerprint and counting for nobody until `L + M` old (docs/quorum.md,
/// "Lock-delay per replica"): a plain blob made here would carry no stamp and never count, and
/// waiting here for every account would keep a member from starting while one region is down.
pub(crate) async fn prepare<S: LeaseStore>(
    store: &S,
    target: &StorageTarget,
    group: (&str, u32),
    timing: &Timing,
    clock: Clock,
    observer: &dyn Observer,
    shutdown: Option<&CancellationToken>,
) -> Result<bool, Error> {
    let (me, slots) = group;
    let mut backoff = crate::retry::backoff(Pace::PREPARE_RETRY_LEAST, Pace::PREPARE_RETRY_LONGEST);
    loop {
        let limit = Pace::new(timing).prepare_request();
        let prepared = async {
            let (mut startup, mut next) = Startup::attempt(me, slots, target.create_if_missing);
            loop {
                let (call, own) = match next {
                    StartupStep::Call { call, own } => (call, own),
                    StartupStep::Over(result) => return result,
                };
                let ret = match own {
                    None => carry_out(store, &call).await,
                    Some(op) => {
                        let limit = clock.now() + timing.request_timeout();
                        let sent = async {
                            let ret = carry_out(store, &call).await;
                            match ret.error() {
                                Some(e) => Err(e.clone()),
                                None => Ok(ret),
                            }
                        };
                        timed(clock, observer, op, limit, sent)
                            .await
                            .unwrap_or_else(|e| call.failed(e))
                    }
                };
                next = startup.answer(ret);
            }
        };
        let error = match timed(
            clock,
            observer,
            LeaseOp::Prepare,
            clock.now() + limit,
            prepared,
        )
        .await
        {
            Ok(()) => return Ok(true),
            Err(e) => e,
        };
        match error.failure() {
            Failure::Denied => return Err(Error::Denied(error)),
            Failure::Missing if error.code() == Some("ContainerNotFound") => {
                return Err(Error::ContainerMissing(target.container.clone()));
            }
            Failure::Missing => return Err(Error::BlobMissing(target.blob.clone())),
            _ => {}
        }
        let Some(shutdown) = shutdown else {
            return Err(Error::Unreachable(error));
        };
        let pause = backoff.next().unwrap_or(Pace::PREPARE_RETRY_LONGEST);
        tracing::warn!(
            error = %error,
            endpoint = %target.endpoint,
            "cannot reach the lease blob; retrying in {}",
            human(pause)
        );
        tokio::select! {
            biased;
            () = shutdown.cancelled() => return Ok(false),
            () = sleep(pause) => {}
        }
    }
}
