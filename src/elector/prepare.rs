//! Before the first campaign: the container and the lease blob (and the slot blobs) exist.

use super::error::Error;
use super::observe::{LeaseOp, Observer};
use super::request::timed;
use super::vanish;
use crate::clock::Clock;
use crate::fmt::human;
use crate::store::target::StorageTarget;
use crate::store::{Failure, LeaseStore};
use crate::timing::Timing;
use leasehold_core::Pace;
use tokio::time::sleep;
use tokio_util::sync::CancellationToken;

/// Makes sure the container and blob exist before the first campaign (and with `[lease].slots`
/// above 1, the slot blobs: created now, a slot blob found missing later was deleted). A blob
/// missing while other members of the group are alive was deleted under its leader: it is
/// created again under the lock-delay (`vanish`). Refused credentials and a missing container
/// or blob that may not be created are errors. An unreachable service is retried with backoff
/// until `shutdown` (the daemon), or is an error when there is none to wait for (a library's
/// connect tries once). `Ok(false)`: shutdown came meanwhile.
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
            for slot in 0..slots {
                let blob = match slot {
                    0 => None,
                    i => Some(store.slot(i)),
                };
                let blob = blob.as_deref().unwrap_or(store);
                match blob.prepare(false).await {
                    Ok(()) => continue,
                    Err(e) if e.code() == Some("ContainerNotFound") && target.create_if_missing => {
                        // A container that does not exist holds no member records.
                        blob.prepare(true).await?;
                    }
                    Err(e) if e.failure() == Failure::Missing && target.create_if_missing => {
                        vanish::create(store, blob, me, false, timing, clock, observer).await?;
                    }
                    Err(e) => return Err(e),
                }
            }
            Ok(())
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
