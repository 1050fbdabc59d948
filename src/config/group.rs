//! The leadership group as one instance sees it, checked: its identity, the storage target (or
//! the replicas' targets), the timings (rule 5), its place in line and its slots; what
//! `status`, `check`, `break` and the library's elector need (everything but the child).

use super::credentials::Table;
use super::election::Election;
use super::error::ConfigError;
use super::schema::Config;
use crate::store::target::StorageTarget;
use crate::timing::{Timing, TimingError};
use std::net::SocketAddr;
use std::time::Duration;

/// The most slots a group may have (`[lease].slots`).
pub const MAX_SLOTS: u32 = 64;

/// The leadership group as one instance sees it: who it is, where the lease lives, the timings.
#[derive(Debug, Clone)]
pub struct Group {
    pub identity: String,
    /// Where the lease lives; with replicas, the first of them (the container and the blob are
    /// every replica's).
    pub storage: StorageTarget,
    /// `[[storage.replica]]`: the accounts of a lease held on a majority of them, in the set's
    /// order; empty for the one `[storage]` account.
    pub replicas: Vec<StorageTarget>,
    pub timing: Timing,
    /// This instance's HTTP endpoint, where `status` finds the local daemon.
    #[cfg_attr(not(feature = "daemon"), allow(dead_code))]
    pub http_listen: Option<SocketAddr>,
    /// Its place in the line of members (`[election]`).
    pub election: Election,
    /// `[election].advertise = "auto"` (the default with `[http].listen`): the daemon puts the
    /// URL of its bound listener in `election.advertise`.
    #[cfg_attr(not(feature = "daemon"), allow(dead_code))]
    pub advertise_auto: bool,
    /// `[lease].slots`: how many instances lead at once (1..=64).
    pub slots: u32,
    /// Problems worth a WARN line that do not stop anything (a secret readable by others).
    pub warnings: Vec<String>,
}

impl Config {
    /// Everything but the child: what the elector needs (`run` adds the child; a config whose
    /// command is given after `--` at run time is still a valid group config), replicas and
    /// all: what `check` proves account by account, what `status` and `break` read and break
    /// side by side, and what `run` leads on.
    pub(crate) fn validate_group(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Group, ConfigError> {
        self.group(env).map_err(|e| self.origins.locate(e))
    }

    fn group(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<Group, ConfigError> {
        let timing = self.timing()?;
        let identity = match &self.identity {
            Some(id) => {
                check_identity(id)?;
                id.clone()
            }
            None => default_identity(),
        };
        let mut warnings = self.file_warnings.clone();
        let replicas = self.replicas(env, &mut warnings)?;
        let storage = match replicas.first() {
            Some(first) => first.clone(),
            None => self
                .storage
                .resolve(Table::Storage, env, &self.origins, &mut warnings)?,
        };
        check_member_name(&storage.blob, &identity)?;
        let http_listen = self.http.as_ref().map(|h| h.listen);
        let (election, advertise_auto) =
            self.election
                .validate(&storage.endpoint, http_listen, &mut warnings)?;
        let slots = self.slots()?;
        Ok(Group {
            identity,
            storage,
            replicas,
            timing,
            http_listen,
            election,
            advertise_auto,
            slots,
            warnings,
        })
    }

    /// `[lease].slots`, checked: 1 to 64.
    pub(crate) fn slots(&self) -> Result<u32, ConfigError> {
        u32::try_from(self.lease.slots)
            .ok()
            .filter(|n| (1..=MAX_SLOTS).contains(n))
            .ok_or_else(|| {
                ConfigError::invalid(
                    "[lease].slots",
                    self.lease.slots,
                    format!(
                        "must be a whole number from 1 to {MAX_SLOTS}: how many instances lead \
                         at once (1, the default, is one leader)"
                    ),
                )
            })
    }

    /// The lease timings, checked against Azure's limits and rule 5 of the safety model.
    pub(crate) fn timing(&self) -> Result<Timing, ConfigError> {
        let l = &self.lease;
        let t = Timing {
            duration: l.duration,
            renew_interval: l.renew_interval,
            acquire_interval: l.acquire_interval,
            safety_margin: l.safety_margin,
            stop_timeout: self.child.stop_timeout,
        };
        t.check().map_err(|e| self.timing_error(e, &t))?;
        Ok(t)
    }

    /// A timing rule broken by values given as flags names the flags and their values as typed
    /// (`--renew-interval 20s`); one broken by the file's values, the keys.
    fn timing_error(&self, e: TimingError, t: &Timing) -> ConfigError {
        let keys: [(&str, Duration); 5] = [
            ("[lease].duration", t.duration),
            ("[lease].renew_interval", t.renew_interval),
            ("[lease].acquire_interval", t.acquire_interval),
            ("[lease].safety_margin", t.safety_margin),
            ("[child].stop_timeout", t.stop_timeout),
        ];
        // The rule that ties them together (key `[lease]`) names every flag given. A value is
        // written as a flag takes it, without humantime's spaces (`1m1s`, not `1m 1s`).
        let given: Vec<String> = keys
            .iter()
            .filter(|(key, _)| {
                (e.key() == *key || e.key() == "[lease]") && self.origins.is_given(key)
            })
            .filter_map(|(key, value)| {
                let flag = self.origins.flag(key)?;
                let value = humantime::format_duration(*value).to_string();
                Some(format!("{flag} {}", value.replace(' ', "")))
            })
            .collect();
        if given.is_empty() {
            return e.into();
        }
        ConfigError::Flag {
            given: given.join(" "),
            rule: e.rule().to_owned(),
        }
    }
}

pub(crate) fn check_identity(id: &str) -> Result<(), ConfigError> {
    // Azure metadata values are HTTP header values: printable ASCII, no leading/trailing space.
    let ok = !id.is_empty()
        && id.len() <= 256
        && id.bytes().all(|b| (0x21..0x7f).contains(&b) || b == b' ')
        && id.trim() == id;
    if ok {
        Ok(())
    } else {
        Err(ConfigError::invalid(
            "identity",
            format!("{id:?}"),
            "must be 1-256 printable ASCII characters (it is stored in blob metadata)",
        ))
    }
}

/// The member record of `identity` beside `blob` must be a name storage takes.
pub(crate) fn check_member_name(blob: &str, identity: &str) -> Result<(), ConfigError> {
    match crate::store::member_name_problem(blob, identity) {
        Some(problem) => Err(ConfigError::invalid(
            "[storage].blob",
            format!("{blob:?}"),
            problem,
        )),
        None => Ok(()),
    }
}

/// `<hostname>-<pid>`: unique per process, readable in `status`.
pub(crate) fn default_identity() -> String {
    format!("{}-{}", default_hostname(), std::process::id())
}

/// This host's name (in a pod: the pod's name, unless the pod sets another).
pub(crate) fn default_hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "leasehold".to_owned())
}
