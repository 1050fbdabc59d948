//! The shell's one driver of a member (the daemon's and the library's): the core's
//! `leasehold_core::member::Member` run on tokio against a real store. It owns the member's
//! I/O and nothing of its decisions: each store call sent and cut at its limit (calls.rs), the
//! member's one timer, wake-ups answered in the caller's step (step.rs: the member behind one
//! lock, shared with the [`Waker`](crate::elector::Waker)), the term's body started, fed,
//! stopped and awaited (body.rs), the log lines it calls for (voice.rs, say.rs, ended.rs),
//! and what the observer and [`Elector::watch`](crate::Elector::watch) show (driver.rs, the
//! loop itself). The store's data as a member handles it is the store's (`store/kinds.rs`).

mod body;
mod calls;
mod deadline;
mod driver;
mod ended;
mod say;
mod step;
mod voice;

#[cfg(any(feature = "daemon", test))]
pub(crate) use driver::Finish;
