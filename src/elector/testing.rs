//! What the elector's unit tests share: the design's timings, an elector on the in-memory
//! store, and one that leads already.

use super::{Elector, Error, Term, Unobserved};
use crate::store::memory::MemoryStore;
use crate::store::{LeaseStore, StoreError};
use crate::timing::Timing;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The defaults: L = 15 s, R = 4 s, acquire_interval = 1 s, M = 1 s, G = 5 s.
pub fn timing() -> Timing {
    Timing::default()
}

/// An elector named "me" on `store`.
pub fn elector(store: &Arc<MemoryStore>) -> Elector<MemoryStore> {
    Elector::new(
        store.clone(),
        "me".into(),
        timing(),
        true,
        Arc::new(Unobserved),
    )
}

/// An elector that has just won a term on a store of its own.
pub async fn leading() -> (Arc<MemoryStore>, Elector<MemoryStore>, Term) {
    let store = Arc::new(MemoryStore::default());
    let mut e = elector(&store);
    let term = e
        .win(&CancellationToken::new())
        .await
        .unwrap()
        .expect("a free lease is won");
    (store, e, term)
}

pub fn transient() -> StoreError {
    StoreError::Status {
        status: 503,
        code: Some("ServerBusy".into()),
    }
}

impl<S: LeaseStore> Elector<S> {
    /// A campaign that nothing keeps back.
    pub(crate) async fn win(&mut self, stop: &CancellationToken) -> Result<Option<Term>, Error> {
        self.campaign(stop, &mut || true).await
    }
}
