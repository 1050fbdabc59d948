//! What the simulator makes of the store's surroundings: the service's clock running at
//! another rate than its clients' ([`ServiceClock`]), and each simulated client's network, which decides how long
//! a request travels each way and what becomes of it.

use crate::store::blob::LeaseId;
use crate::store::error::StoreError;
use crate::store::op::Op;
use std::time::Duration;
use tokio::time::Instant;

/// The storage service's clock as its clients' (tokio's) measures it: it may run faster, so
/// that a lease of `L` ends `L * ppm / 1e6` early by their clocks, as when the storage
/// service's clock rate differs from the machine's. The safety margin `M` covers such a drift
/// (docs/safety.md, "The safety model"). Each store is made with its own (the default runs at
/// the clients' rate), and every blob of it, slot blobs and member records included, keeps
/// leases on it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ServiceClock {
    /// How much faster than the clients' clock it runs, in parts per million.
    ppm: u32,
}

impl ServiceClock {
    /// A service clock `ppm` parts per million faster than its clients'.
    pub(crate) fn faster_by_ppm(ppm: u32) -> Self {
        Self { ppm }
    }

    /// `d` on the service's clock, as its clients' clock measures it.
    pub(super) fn lasts(self, d: Duration) -> Duration {
        match self.ppm {
            0 => d,
            ppm => d.mul_f64(1e6 / (1e6 + f64::from(ppm))),
        }
    }
}

/// What becomes of one request on a simulated client's network (see [`Network`]).
#[derive(Debug, Clone)]
pub(crate) enum Fate {
    /// It arrives and is applied; its answer comes back.
    Deliver,
    /// It arrives and is applied; its answer is lost (the client waits until it gives up).
    LoseAnswer,
    /// It is refused with this error, unapplied, after travelling both ways (a 503, a
    /// connection refused).
    Refuse(StoreError),
    /// It never arrives and nothing comes back (a blackholed connection).
    Hang,
}

/// One request's trip over a simulated network.
#[derive(Debug, Clone)]
pub(crate) struct Trip {
    /// How long it travels to the service.
    pub up: Duration,
    /// How long its answer travels back.
    pub down: Duration,
    pub fate: Fate,
}

/// What the blob a request was applied to showed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Applied {
    /// The epoch it records after it.
    pub epoch: Option<u64>,
    /// Whether it was leased or recorded a holder when the request came: a member that heard
    /// the answer saw its group led.
    pub led: bool,
    /// The slot whose blob it created plainly (a create that found the blob missing, without
    /// the mark of a blob created again): from then on, that slot's state in storage is a
    /// brand-new group's (docs/safety.md, "Recovery from anything").
    pub created: Option<u32>,
}

/// A simulated client's network: the simulator decides each request's trip, and hears what the
/// service did and what its client heard.
pub(crate) trait Network: Send + Sync {
    /// The trip of the next request, `op` (naming lease `id`).
    fn trip(&self, op: Op, id: Option<LeaseId>) -> Trip;
    /// The service applied `op`, which the client sent at `sent`: `outcome` is `Ok` or the
    /// error the service answered; `blob`: what the blob showed after it.
    fn applied(
        &self,
        op: Op,
        id: Option<LeaseId>,
        sent: Instant,
        outcome: Result<(), &StoreError>,
        blob: Applied,
    );
    /// The client heard the answer to `op`, sent at `sent`.
    fn answered(
        &self,
        op: Op,
        id: Option<LeaseId>,
        sent: Instant,
        outcome: Result<(), &StoreError>,
    );
}
