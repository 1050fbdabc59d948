//! Members and the line of succession (docs/succession.md), by job: `line` (the core's line on
//! the store's records: what the core reads of a member record and a slot blob), `rows` (what
//! `status`, `/status` and `/metrics` show of the line). The core member keeps its record and
//! the line (`leasehold_core::record`, `leasehold_core::member`).
//!
//! The record is a blob beside the lease blob, held under a lease of its own: its liveness. A
//! member whose record lease is not `leased` is dead. The record says who the member is, its
//! priority and the lease id it acquires the group's lease with; the service's creation time
//! says when it joined (the record is created anew at every join, so a restarted member goes to
//! the back of its priority). The line is: highest priority first, then earliest joined, then
//! identity.
//!
//! Only the successor (the first live member in line that does not lead and is not in a
//! cooldown) polls the lease; the others watch the lease blob with a read every
//! `5 x acquire_interval` and list the members only when that shows something they cannot
//! place, or rarely ([`Pace::LIST_EVERY`]): List Blobs costs ten times a read.

mod line;
mod rows;

pub(crate) use rows::{LineView, view_at};
// What the one-shot `status` and the daemon's telemetry read.
#[cfg(feature = "daemon")]
pub(crate) use leasehold_core::line::order;
#[cfg(feature = "daemon")]
pub(crate) use rows::{MemberRow, Part, SlotRow, render_slots, slot_rows, table};
