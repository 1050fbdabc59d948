//! Slots: a semaphore of N (docs/slots.md). With `[lease].slots = N > 1`, up to N members lead at
//! once, each holding one slot lease: slot 0 is the group's blob, slot i the blob
//! `<blob>.slots/<i>`. Each slot is a lease of its own with its own epoch, kept and given up by the
//! one elector loop exactly as the single lease is (the safety model holds per slot). Which
//! members poll and how, and which slot a poller takes, are the core's rounds
//! ([`leasehold_core::slots`]); this module keeps the check that every instance of a group
//! counts the same slots.
//!
//! Who polls: the first F members in line that hold no slot, F = max(1, free slots in the last
//! listing); each of their rounds (every jittered `acquire_interval`) tries the slots one by one
//! until one is won (N acquires at most), or, past [`ACQUIRE_ALL_UP_TO`](slots::ACQUIRE_ALL_UP_TO) slots, lists the group
//! once and tries the free ones. Everyone else watches the record of the member just ahead of
//! it among those that hold no slot (one read every `5 x acquire_interval`) and lists the group
//! only when that record changed (the member won a slot: its record publishes a new lease id)
//! or died: so that one listing per change, by the one member it concerns, moves the line on.
//! A member holds one slot at most: it campaigns only while it holds none, a round ends at its
//! first win, and an acquire without an answer keeps it out of every slot until that acquire
//! is settled (its late success released).
//!
//! The group's count is what slot 0 records (`leasehold_slots`, absent: 1) while it is leased:
//! an instance that counts otherwise does not campaign (one ERROR line naming both counts and
//! the key), and looks again every [`Pace::MISMATCH_RECHECK`].

use crate::elector::instance::Elector;
use crate::fmt::human;
use crate::store::LeaseStore;
use leasehold_core::Pace;
#[cfg(doc)]
use leasehold_core::blob::LeaseBlob;
use leasehold_core::slots::{self, CountChange};

impl<S: LeaseStore> Elector<S> {
    /// Whether this instance's count differs from its group's (it does not campaign).
    pub(crate) fn mismatched(&self) -> bool {
        self.count().mismatched()
    }

    /// The group's count beside ours.
    pub(crate) fn count(&self) -> std::sync::MutexGuard<'_, slots::Count> {
        self.count.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes what slot 0 says of the group's count (`recorded`, [`LeaseBlob::count_recorded`],
    /// while it is `leased`); returns whether ours differs. Logs one ERROR line when a mismatch
    /// begins, one INFO line when it ends.
    pub(crate) fn note_count(&self, leased: bool, recorded: Option<u32>) -> bool {
        let change = self.count().note(self.slots, recorded, leased);
        match change {
            CountChange::Began(recorded) => {
                self.observer.slot_mismatch(Some(recorded));
                tracing::error!(
                    configured = self.slots,
                    recorded,
                    "[lease].slots = {} here, but this group leads with slots = {recorded} \
                     (recorded on its blob by the leader of slot 0): this instance does not \
                     lead; set [lease].slots = {recorded} (or change every instance of the \
                     group, see docs/slots.md); looking again every {}",
                    self.slots,
                    human(Pace::MISMATCH_RECHECK)
                );
            }
            CountChange::Ended(was) => {
                self.observer.slot_mismatch(None);
                tracing::info!(
                    configured = self.slots,
                    was,
                    "the group's slot count now matches this instance's; campaigning"
                );
            }
            CountChange::Goes(_) | CountChange::Matches => {}
        }
        let mismatch = self.count().mismatch;
        if let Some(m) = &self.membership
            && (mismatch.is_some() || change != CountChange::Matches)
        {
            m.with(|l| l.mismatch = mismatch);
        }
        mismatch.is_some()
    }
}
