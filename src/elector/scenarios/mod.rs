//! Scenarios on paused time: instances of one group on the in-memory store, each through a
//! client of its own, driven as a test drives real daemons (`testing` has the kit).

mod forged;
mod handoff;
mod member;
mod preferred;
mod replicas;
mod slots;
mod succession;
mod watch;
