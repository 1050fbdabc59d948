//! What the simulator makes of the store's surroundings: the service's clock running at
//! another rate than its clients', and each simulated client's network, which decides how long
//! a request travels each way and what becomes of it.

use crate::store::blob::LeaseId;
use crate::store::error::StoreError;
use crate::store::op::Op;
use std::cell::Cell;
use std::time::Duration;
use tokio::time::Instant;

thread_local! {
    /// How much faster than tokio's clock the service's clock runs, in parts per million.
    static SERVER_PPM: Cell<u32> = const { Cell::new(0) };
}

/// From now on (on this thread), the service's clock runs `ppm` parts per million faster than its
/// clients' (tokio's): a lease of `L` ends `L * ppm / 1e6` early by their clocks, as when the
/// storage service's clock rate differs from the machine's. The safety margin `M` covers such a
/// drift (docs/safety.md, "The safety model"). 0: the same rate.
pub(crate) fn server_clock_ppm(ppm: u32) {
    SERVER_PPM.with(|c| c.set(ppm));
}

/// `d` on the service's clock, as tokio's clock measures it.
pub(super) fn on_server_clock(d: Duration) -> Duration {
    match SERVER_PPM.with(Cell::get) {
        0 => d,
        ppm => d.mul_f64(1e6 / (1e6 + f64::from(ppm))),
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
