//! Configuration: the TOML schema (`schema`), its defaults, the overrides (`overrides`), the
//! errors (`error`), and every rule that is checked before the daemon touches storage.
//!
//! Loading is two steps. [`Config::load`] parses the file and applies overrides (or
//! `Config::without_file` starts from the defaults: the one-liner; `load`);
//! `Config::validate_group` (`group`) and, for `run`, `Config::validate` (`child`)
//! checks ranges and the timing rule and resolves where the storage credential comes from (the
//! file or its flags, a `*_file` key, the standard `AZURE_STORAGE_*` variables, or Microsoft
//! Entra ID): one path, whether the values came from a file or from flags. Every failure is one
//! [`ConfigError`] whose `Display` is a single line naming the key (or the flag, for a value
//! given on the command line: `origin`), the value and the rule. `check_offline` is all of
//! that, without touching storage.
//!
//! Everything read from the environment goes through the `env` function handed to the
//! validation, so what leasehold consumes is explicit (and testable); the store only ever sees
//! the resolved `StorageTarget`. `credentials` owns where the credential comes from (`programs`
//! finds the Azure CLI and the child's program); the rules of the target itself (names,
//! endpoint, connection strings) are the store's (`crate::store::target`), and those of the
//! timings are `Timing`'s. This file only names the parts and what the rest of the crate uses.

#[cfg(feature = "daemon")]
mod child;
mod credentials;
mod election;
mod error;
mod group;
mod kubernetes;
mod load;
mod origin;
mod overrides;
mod programs;
mod replicas;
mod schema;
#[cfg(all(test, feature = "daemon"))]
mod testing;
#[cfg(all(test, feature = "daemon"))]
mod tests;

#[cfg(feature = "daemon")]
pub(crate) use child::{HealthSettings, Probe, QUICK_EXIT, Settings};
pub(crate) use election::Election;
#[cfg(feature = "daemon")]
pub(crate) use election::{auto_advertise, local_address_toward};
pub use error::ConfigError;
#[cfg(feature = "daemon")]
pub(crate) use group::Group;
pub(crate) use group::{MAX_SLOTS, check_identity};
#[cfg(feature = "kubernetes")]
pub(crate) use kubernetes::PodLabel;
pub use overrides::Overrides;
#[cfg(feature = "daemon")]
pub(crate) use programs::find_program;
pub(crate) use replicas::replica_set;
pub use schema::Config;
#[cfg(feature = "daemon")]
pub(crate) use schema::OnExit;
#[cfg(any(feature = "daemon", test, feature = "test-util"))]
pub(crate) use schema::{DEFAULT_CRASH_BACKOFF, DEFAULT_CRASH_BACKOFF_MAX, DEFAULT_CRASH_WINDOW};
