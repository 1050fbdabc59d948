//! The integration tests: the real `leasehold` binary (and `examples/embedded`) against a real
//! Azurite, with real signals and real children, driven by the test kit (`testkit/`).
//!
//! One test binary, so that the tests that wait on lease expiries run side by side rather than
//! one binary after another; `.cargo/config.toml` sets how many at once (`RUST_TEST_THREADS`,
//! which a run can set itself). Most tests share one Azurite (`Group::shared`, each on a blob of
//! its own); those that stop, freeze or restart storage, or need it with other options, start
//! their own. `cargo test --test it MODULE::` runs one file's tests.

mod alerts;
mod crashloop;
mod credentials;
mod demo;
mod docs;
mod errors;
mod faults;
mod freeze;
mod health;
mod http_limits;
// Only with `--features kubernetes` (its own build of the daemon; .ci/run runs it apart):
// `cargo test --features kubernetes --test it kubernetes`.
#[cfg(feature = "kubernetes")]
mod kubernetes;
mod layout;
mod library;
mod oneliner;
mod operate;
mod packaging;
mod preferred;
mod quorum;
mod recovery;
mod release;
mod replicas;
mod run;
mod slots;
mod succession;
mod wake;
mod witness;
