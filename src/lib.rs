#![warn(missing_docs)]
//! Leader election on an Azure Blob Storage lease, with the leader's work held to the lease.
//!
//! Several instances of a program point at the same blob; the one that holds a lease on it
//! leads. leasehold runs the leader's work only while the lease is held, and makes sure it has
//! stopped before anyone else could hold the lease: the work is told to stop at
//! `t_s + L - M - G` and is gone by `t_s + L - M`, where `t_s` is when the last successful
//! acquire or renew was *sent*, `L` the lease duration, `M` a safety margin and `G` the time the
//! work gets to stop. Every leadership carries an **epoch**, a fencing token that grows with
//! every new leader, which downstream systems can check.
//!
//! The `leasehold` command (the `daemon` feature, on by default) runs a child process that way.
//! This crate also runs a task inside your program:
//!
//! ```no_run
//! use leasehold::{Config, Elector, Leadership};
//!
//! async fn work(leadership: Leadership) {
//!     // Pass leadership.epoch() along with every write; stop when told to.
//!     leadership.cancelled().await;
//! }
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let config = Config::from_file("leasehold.toml")?; // the daemon's TOML; [child] optional here
//! let elector = Elector::connect(&config).await?; // validates, prepares storage; typed errors
//! let shutdown = async {
//!     let _ = tokio::signal::ctrl_c().await;
//! };
//! elector
//!     .run_while_leader(shutdown, |leadership| async move {
//!         // leadership.epoch() -> u64 (the fencing token), leadership.identity() -> &str
//!         // leadership.cancelled().await resolves at the stop deadline, on loss, or on shutdown
//!         work(leadership).await
//!     })
//!     .await?; // returns once `shutdown` resolved and the lease is released
//! # Ok(())
//! # }
//! ```
//!
//! [`Elector::run_while_leader`] campaigns, runs the closure's future once per term won, and at
//! the end of a term cancels it ([`Leadership::cancelled`]), gives it `G` to finish, aborts it at
//! the kill deadline, and **only then** releases the lease. The next term's task starts only
//! after the last one is gone.
//!
//! # What a lease cannot promise
//!
//! A task is aborted at its next `.await`. One that blocks its thread (a long computation,
//! blocking I/O) cannot be aborted, just as a paused machine cannot stop its child: it may run
//! on after its lease has expired and another instance leads. The elector then stops renewing,
//! never releases while the task may run, and returns [`Error::TaskDidNotStop`] once the lease
//! has surely expired. **The epoch is the defence**: have the systems the task writes to refuse
//! writes that carry an epoch smaller than the largest they have seen. Keep blocking work in
//! [`tokio::task::spawn_blocking`] and check [`Leadership::is_cancelled`] between pieces.
//!
//! # Testing leader code
//!
//! With the `test-util` feature, `store::MemoryStore` keeps a lease blob in memory with
//! Azure's lease rules on tokio's clock, so a test can drive leadership on paused time, and
//! script storage faults:
//!
//! ```ignore
//! use leasehold::store::{Behaviour, MemoryStore, Op};
//! use leasehold::{Elector, Timing};
//! use std::sync::Arc;
//!
//! #[tokio::test(start_paused = true)]
//! async fn my_task_stops_when_storage_fails() {
//!     let store = Arc::new(MemoryStore::default());
//!     store.set(Op::Renew, Behaviour::Fail(leasehold::store::StoreError::TimedOut(
//!         std::time::Duration::from_secs(4),
//!     )));
//!     let elector = Elector::with_store(store, "me", Timing::default()).unwrap();
//!     // ... run_while_leader with your task; the token is cancelled 9 s into the term
//! }
//! ```
//!
//! (`tests/it/library.rs` has that test in full.)
//!
//! # Features
//!
//! * `daemon` (default): the `leasehold` command, with its HTTP endpoint, metrics and logging
//!   (`clap`, `axum`, `hyper`, `prometheus-client`, `tracing-subscriber`). A program that only
//!   embeds the elector turns default features off.
//! * `test-util`: `store::MemoryStore`, for tests; and `sim`, the simulator.
//! * `kubernetes`: `[kubernetes]`, the daemon's pod label while it leads (kube-rs); off by
//!   default, on in the container image.
//!
//! # The public items
//!
//! At the root, the library's API (docs/library.md): [`Config`] (with [`Overrides`] and
//! [`ConfigError`]), [`Elector`], [`Leadership`], [`Role`], [`Error`], [`Timing`] (with
//! [`TimingError`]), [`Waker`], [`WakeAnswer`], [`WAKE_HEADER`] and [`HANDOFF_HEADER`]. In
//! [`store`]: where the lease lives ([`StorageTarget`](store::StorageTarget), its credentials,
//! [`AzureStore`](store::AzureStore)), the sealed [`LeaseStore`](store::LeaseStore) with the
//! lease's own requests, and the errors; with `test-util`, `MemoryStore`. With `test-util`, `sim`
//! (the simulator's command, `examples/simulate.rs`, runs it); with `daemon`, `command::main` (the
//! `leasehold` binary's whole `main`). docs/library.md lists them all. Everything else is private
//! to the crate.
//!
//! # Layout
//!
//! The library (modules private unless said):
//!
//! * `config`: the TOML schema and its defaults (`schema`), loading (`load`), the overrides
//!   (`overrides`), the errors (`error`), the group's rules (`group`), where the credential
//!   comes from (`credentials`), `[election]`, `[kubernetes]` and, for the daemon, `[child]`;
//!   builds a [`StorageTarget`](store::StorageTarget) and a [`Timing`].
//! * `timing`: `L`, `R`, `M`, `G`, their rules, and the deadlines of a term.
//! * [`store`] (public): the lease store: the traits (`lease`), the lease blob and its
//!   metadata (`blob`, `metadata`), the member records (`member`), the errors; the target
//!   (`target`); [`AzureStore`](store::AzureStore) over the Azure SDK (`identity`: its Entra ID
//!   tokens); `MemoryStore` (`memory`, feature `test-util`).
//! * `clock`: the lease clock: monotonic time that also counts a machine suspend; `Clock`, the
//!   host's clocks or a simulated history's, which an elector is built with.
//! * `elector`: one instance of a group, the shell of the core's member
//!   (`leasehold_core::member`): `drive` (its one driver: store calls, the timer, wake-ups,
//!   the body, the log, the observer), `term` (the body of a term and rule 1, once for a child
//!   and a task), `task` (the library's body), `members` (the line as `status` shows it, the
//!   member records' data), `wake`, `observe` (what the elector reports to whoever watches),
//!   `role` (what [`Elector::watch`] shows), `prepare` (storage before the first campaign),
//!   `error`.
//! * `crash_loop`: the crash-loop backoff's rule (the count of quick failures, the doubling),
//!   for the child supervisor and the simulator's bodies alike.
//! * `fmt`: durations as people read them; `retry`: the jittered pauses between attempts.
//! * `secret`: a string type that never prints its value.
//! * `random`: where an elector's lease ids and wake token come from: the operating system, or
//!   (the simulator, the scenarios) the seed, chosen when the elector is built.
//! * `sim` (public, feature `test-util`): the simulator; `mutant`: the deliberately broken
//!   rules it must catch.
//!
//! The daemon (feature `daemon`; private, but for `command::main`):
//!
//! * `command` (public: `main`): the `leasehold` command: its command line (clap), and each
//!   subcommand run to its exit code.
//! * `daemon`: `leasehold run`: telemetry, the HTTP endpoint and the signals around the elector
//!   loop, with the child supervisor as the body of each term.
//! * `supervisor`: one term from the child's side: its deadlines, signals, `on_exit`.
//! * `child`: process groups, parent-death protection, stop/kill, reaping.
//! * `guard`: the process beside each child that holds its group to the deadlines when the
//!   daemon cannot (frozen, hung, dead), and the daemon's end of it (`process`); its rules
//!   without I/O (`Deadlines`) are compiled with `test-util` too, for the simulator's guard.
//! * `backstop`: a thread that SIGKILLs a child's group at its kill instant even if the
//!   runtime were stuck.
//! * `health`: `[child.health]` checks; a stalled child makes its leader step down.
//! * `telemetry`: the daemon's observable state (`state`), its metrics (`metrics`) and the JSON
//!   of `/status` (`status`), fed by the elector and the supervisor; `process_metrics`: the
//!   standard `process_*` metrics, from `/proc`.
//! * `http`: `/healthz`, `/readyz`, `/status`, `/metrics`, `POST /wake` over `telemetry`, with
//!   bounded connections.
//! * `open_files`: the open-file limit: raised at start-up, the HTTP endpoint's share, the
//!   reserve for storage and the child, and the limit the programs leasehold starts inherit.
//! * `notify`: what systemd (`Type=notify`) is told: ready once in the group, watchdog pings
//!   while the loop is alive, stopping.
//! * `ops`: the one-shot operator commands `status`, `check` and `break`, one file each.
//! * `kubernetes` (feature `kubernetes`): the label a daemon keeps on its own pod while it
//!   leads, for a Service that selects the leader.
//! * `logging`: the tracing subscriber (text or JSON), with secret-bearing crates capped; the
//!   daemon's lines go through a bounded queue that drops rather than block.

#[cfg(feature = "daemon")]
mod backstop;
#[cfg(any(test, feature = "test-util"))]
pub mod cases;
#[cfg(feature = "daemon")]
mod child;
mod clock;
#[cfg(feature = "daemon")]
pub mod command;
mod config;
#[cfg(any(feature = "daemon", test, feature = "test-util"))]
mod crash_loop;
#[cfg(feature = "daemon")]
mod daemon;
mod elector;
mod fmt;
#[cfg(any(feature = "daemon", test, feature = "test-util"))]
mod guard;
#[cfg(feature = "daemon")]
mod health;
#[cfg(feature = "daemon")]
mod http;
#[cfg(feature = "kubernetes")]
mod kubernetes;
#[cfg(feature = "daemon")]
mod launch;
#[cfg(feature = "daemon")]
mod logging;
mod mutant;
#[cfg(feature = "daemon")]
mod notify;
#[cfg(feature = "daemon")]
mod open_files;
#[cfg(feature = "daemon")]
mod ops;
#[cfg(feature = "daemon")]
mod process_metrics;
mod random;
mod retry;
mod secret;
#[cfg(any(test, feature = "test-util"))]
pub mod sim;
pub mod store;
#[cfg(feature = "daemon")]
mod supervisor;
#[cfg(feature = "daemon")]
mod telemetry;
mod timing;

pub use config::{Config, ConfigError, Overrides};
pub use elector::{
    Elector, Error, HANDOFF_HEADER, Leadership, PROBE_HEADER, Role, WAKE_HEADER, WakeAnswer, Waker,
};
pub use timing::{Timing, TimingError};
