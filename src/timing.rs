//! The lease timings and their rules, from the core (`leasehold_core::timing`), and a term's
//! deadlines on the lease clock ([`crate::clock`]): the core's [`Deadline`](leasehold_core::Deadline)
//! at tokio's instants, which the lease clock reads.

pub use leasehold_core::timing::{
    DEFAULT_ACQUIRE_INTERVAL, DEFAULT_DURATION, DEFAULT_RENEW_INTERVAL, DEFAULT_SAFETY_MARGIN,
    DEFAULT_STOP_TIMEOUT, POLL_JITTER, Timing, TimingError,
};

/// The instants that bound a term, on the lease clock.
pub(crate) type Deadline = leasehold_core::Deadline<tokio::time::Instant>;
