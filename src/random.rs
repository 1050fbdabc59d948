//! Where an elector's unguessable values come from: its lease ids (the next acquire's, its
//! member record's) and its wake token. [`Source`] is chosen when the elector is built and
//! carried to where such a value is made; the jittered pauses are no part of it (they draw from
//! the thread's `fastrand` everywhere, which a simulated history seeds).

/// Where an elector draws its lease ids and wake token from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Source {
    /// The operating system, on a host: a wake token is a secret, and the lease ids of members
    /// on different machines must never meet.
    #[default]
    Os,
    /// The seed this thread's `fastrand` was given (by a simulated history, or a paused-time
    /// scenario), so that the seed replays every draw.
    #[cfg(any(test, feature = "test-util"))]
    Seed,
}

impl Source {
    /// A random (version 4) UUID.
    pub(crate) fn uuid(self) -> uuid::Uuid {
        match self {
            Self::Os => uuid::Uuid::new_v4(),
            #[cfg(any(test, feature = "test-util"))]
            Self::Seed => {
                let bytes = fastrand::u128(..).to_le_bytes();
                uuid::Builder::from_random_bytes(bytes).into_uuid()
            }
        }
    }
}
