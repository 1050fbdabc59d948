//! A synchronous simulator, its first piece (issue 42): core [`Member`]s driven with no
//! runtime against the memory store's rules (`MemoryStore::apply`), on virtual instants, every
//! draw from one seed. kinds.rs: the shell's store data as a member handles it (`Shell`);
//! driver.rs: the event queue in virtual time (`Sim`: calls up and answers down with drawn
//! delays, timers, a trivial body, wake-ups between members); tests.rs.
//!
//! [`Member`]: leasehold_core::member::Member

mod driver;
mod kinds;
#[cfg(test)]
mod tests;
