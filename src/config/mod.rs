//! Configuration: the TOML schema, its defaults, the command-line overrides, and every rule that
//! is checked before the daemon touches storage.
//!
//! Loading is two steps. [`Config::load`] parses the file and applies overrides (or
//! [`Config::without_file`] starts from the defaults: the one-liner); [`Config::validate`]
//! checks ranges and the timing rule and resolves where the storage credential comes from (the
//! file or its flags, a `*_file` key, the standard `AZURE_STORAGE_*` variables, or Microsoft
//! Entra ID): one path, whether the values came from a file or from flags. Every failure is one
//! [`ConfigError`] whose `Display` is a single line naming the key (or the flag, for a value
//! given on the command line: `origin`), the value and the rule. [`check_offline`] is all of
//! that, without touching storage.
//!
//! Everything read from the environment goes through the `env` function handed to
//! [`Config::validate`], so what leasehold consumes is explicit (and testable); the store only
//! ever sees the resolved [`StorageTarget`]. `credentials` owns where the credential comes from;
//! the rules of the target itself (names, endpoint, connection strings) are the store's
//! ([`crate::store::target`]), and those of the timings are [`Timing`]'s.

#[cfg(feature = "daemon")]
mod child;
mod credentials;
mod election;
mod kubernetes;
mod origin;

#[cfg(feature = "daemon")]
pub(crate) use child::find_program;
#[cfg(feature = "daemon")]
pub use child::{HealthSettings, Probe, QUICK_EXIT, Settings, check_offline};

#[cfg(feature = "daemon")]
use credentials::ENV_CLIENT_SECRET;
#[cfg(feature = "daemon")]
pub use credentials::STORAGE_ENV_VARS;
use credentials::{holds_real_secret, readable_by_others};
pub use election::Election;
use election::ElectionConfig;
#[cfg(feature = "daemon")]
pub(crate) use election::{auto_advertise, local_address_toward};
use kubernetes::KubernetesConfig;
#[cfg(feature = "daemon")]
pub use kubernetes::PodLabel;
pub(crate) use origin::Origins;

use crate::secret::Secret;
use crate::store::target::{EntraKind, InvalidTarget, StorageTarget};
use crate::timing::{self, Timing, TimingError};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A leasehold config file (TOML), parsed, with any command-line overrides applied; the one
/// the `leasehold` daemon reads. [`Elector::connect`](crate::Elector::connect) checks it and
/// builds an elector from it. Unknown keys are refused at every level.
///
/// The README's "Configuration" section documents the keys. A library user needs `[storage]`
/// and may set `identity` and `[lease]`; of `[child]` only `stop_timeout` counts (`G`, how long
/// the task gets to stop), and the rest is allowed so that the daemon and a program can share a
/// file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Who this instance is, as shown to operators and passed to the child.
    /// Defaults to `<hostname>-<pid>`.
    pub(crate) identity: Option<String>,
    /// Where the lease blob lives and how to reach it.
    pub(crate) storage: StorageConfig,
    /// The lease timings (section 4 of the design).
    #[serde(default)]
    pub(crate) lease: LeaseConfig,
    /// The command run while leading. Optional in the file when given after `--`.
    #[serde(default)]
    pub(crate) child: ChildConfig,
    /// The optional HTTP endpoint (health, readiness, status, metrics).
    pub(crate) http: Option<HttpConfig>,
    /// This instance's place in the line of members (`[election]`).
    #[serde(default)]
    pub(crate) election: ElectionConfig,
    /// `[kubernetes]`: the label the daemon keeps on its pod (the daemon's; a library user's
    /// file may carry it for the daemon that shares the file).
    #[cfg_attr(not(feature = "daemon"), allow(dead_code))]
    pub(crate) kubernetes: Option<KubernetesConfig>,
    /// Warnings about the file itself (found by [`Config::load`]), passed on to [`Settings`].
    #[serde(skip)]
    pub(crate) file_warnings: Vec<String>,
    /// Where its values came from (the file, flags), for messages.
    #[serde(skip)]
    pub(crate) origins: Origins,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    /// A full connection string (`UseDevelopmentStorage=true`, or one with `AccountName`,
    /// `AccountKey`/`SharedAccessSignature`, optionally `BlobEndpoint`).
    pub connection_string: Option<Secret>,
    /// A file holding the connection string (Kubernetes secret volume, systemd credential).
    pub connection_string_file: Option<PathBuf>,
    /// The storage account name, when not given by a connection string.
    pub account: Option<String>,
    /// The blob service endpoint, e.g. `https://myaccount.blob.core.windows.net`.
    pub endpoint: Option<String>,
    /// A file holding the account key.
    pub access_key_file: Option<PathBuf>,
    /// A file holding a SAS token (with or without the leading `?`).
    pub sas_token_file: Option<PathBuf>,
    /// Microsoft Entra ID instead of a key or SAS: the identity of the machine, the pod or the
    /// developer signs in, and storage checks its role assignments.
    pub credential: Option<EntraKind>,
    /// The client id of a user-assigned managed identity, or of the workload identity's
    /// application (default: `AZURE_CLIENT_ID`, set by the AKS webhook).
    pub client_id: Option<String>,
    /// Extra CA certificates (PEM) to trust, for endpoints behind a private CA.
    pub ca_file: Option<PathBuf>,
    /// Permit a plain-http endpoint that is not on loopback (credentials would cross the network
    /// unencrypted; only for closed test networks such as Docker Compose).
    #[serde(default)]
    pub allow_insecure_http: bool,
    /// The container holding the lease blob.
    #[serde(default = "default_container")]
    pub container: String,
    /// The lease blob; one blob per leadership group.
    pub blob: Option<String>,
    /// Create the container and an empty blob when they do not exist.
    #[serde(default = "yes")]
    pub create_if_missing: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeaseConfig {
    /// `L`: the lease duration asked of Azure (15 s to 60 s, whole seconds).
    #[serde(default = "default_duration", with = "humantime_serde")]
    pub duration: Duration,
    /// `R`: how often the leader renews.
    #[serde(default = "default_renew_interval", with = "humantime_serde")]
    pub renew_interval: Duration,
    /// How often a follower tries to acquire (jittered upwards by up to 20 %).
    #[serde(default = "default_acquire_interval", with = "humantime_serde")]
    pub acquire_interval: Duration,
    /// `M`: slack for clock-rate drift between this host and the storage service.
    #[serde(default = "default_safety_margin", with = "humantime_serde")]
    pub safety_margin: Duration,
    /// How many instances lead at once, each holding one slot lease (design section 12).
    #[serde(default = "default_slots")]
    pub slots: i64,
}

impl Default for StorageConfig {
    fn default() -> Self {
        Self {
            connection_string: None,
            connection_string_file: None,
            account: None,
            endpoint: None,
            access_key_file: None,
            sas_token_file: None,
            credential: None,
            client_id: None,
            ca_file: None,
            allow_insecure_http: false,
            container: default_container(),
            blob: None,
            create_if_missing: yes(),
        }
    }
}

impl Default for LeaseConfig {
    fn default() -> Self {
        Self {
            duration: default_duration(),
            renew_interval: default_renew_interval(),
            acquire_interval: default_acquire_interval(),
            safety_margin: default_safety_margin(),
            slots: default_slots(),
        }
    }
}

fn default_slots() -> i64 {
    1
}

// Only the daemon reads all of it; the library accepts the section and reads stop_timeout.
#[cfg_attr(not(feature = "daemon"), allow(dead_code))]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChildConfig {
    /// Program and arguments; no shell is involved unless you name one.
    #[serde(default)]
    pub command: Vec<String>,
    /// The signal sent to the child's process group to ask it to stop.
    #[serde(default = "default_stop_signal")]
    pub stop_signal: String,
    /// `G`: how long the child may take to stop before its group gets SIGKILL.
    #[serde(default = "default_stop_timeout", with = "humantime_serde")]
    pub stop_timeout: Duration,
    /// What to do when the child ends by itself.
    #[serde(default)]
    pub on_exit: OnExit,
    /// With `on_exit = "restart"`: consecutive quick exits (under [`QUICK_EXIT`]) after which
    /// the daemon falls back to `release`.
    #[serde(default = "default_restart_limit")]
    pub restart_limit: u32,
    /// The child's working directory (default: the daemon's).
    pub working_dir: Option<PathBuf>,
    /// Extra environment for the child.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Pass the `AZURE_STORAGE_*` credential variables on to the child (off by default).
    #[serde(default)]
    pub inherit_storage_credentials: bool,
    /// `[child.health]`: checks that make a leader with a stalled child step down.
    pub health: Option<HealthConfig>,
}

/// `[child.health]`, with Docker HEALTHCHECK's semantics for `interval`, `timeout`, `failures`
/// (its `retries`) and `start_period`.
#[cfg_attr(not(feature = "daemon"), allow(dead_code))]
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HealthConfig {
    /// A command; exit 0 means healthy.
    pub command: Option<Vec<String>>,
    /// An `http://` or `https://` URL; a 2xx answer means healthy.
    pub http: Option<String>,
    /// Time between the starts of two checks; the first runs one interval after the child starts.
    #[serde(default = "default_health_interval", with = "humantime_serde")]
    pub interval: Duration,
    /// A check that takes longer fails (and is killed).
    #[serde(default = "default_health_timeout", with = "humantime_serde")]
    pub timeout: Duration,
    /// Consecutive failed checks that make the child unhealthy.
    #[serde(default = "default_health_failures")]
    pub failures: u32,
    /// Failed checks during this time after the child starts do not count (a success ends it).
    #[serde(default, with = "humantime_serde")]
    pub start_period: Duration,
    /// How long a daemon that stepped down for an unhealthy child stays out of the election.
    /// Default: max(10s, 5 * acquire_interval).
    #[serde(default, with = "humantime_serde::option")]
    pub cooldown: Option<Duration>,
}

impl Default for ChildConfig {
    fn default() -> Self {
        Self {
            command: Vec::new(),
            stop_signal: default_stop_signal(),
            stop_timeout: default_stop_timeout(),
            on_exit: OnExit::default(),
            restart_limit: default_restart_limit(),
            working_dir: None,
            env: BTreeMap::new(),
            inherit_storage_credentials: false,
            health: None,
        }
    }
}

/// What the daemon does when the child ends by itself (not because the daemon stopped it).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnExit {
    /// Release the lease, wait `acquire_interval`, rejoin the election.
    #[default]
    Release,
    /// Keep the lease and restart the child with exponential backoff.
    Restart,
    /// Release the lease and exit with the child's code.
    Exit,
}

impl OnExit {
    /// The name in the config file and on the command line.
    #[cfg(feature = "daemon")]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Release => "release",
            Self::Restart => "restart",
            Self::Exit => "exit",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    /// Address for `/healthz`, `/readyz`, `/status` and `/metrics`.
    pub listen: SocketAddr,
}

fn default_container() -> String {
    "leasehold".to_owned()
}
fn yes() -> bool {
    true
}
fn default_duration() -> Duration {
    timing::DEFAULT_DURATION
}
fn default_renew_interval() -> Duration {
    timing::DEFAULT_RENEW_INTERVAL
}
fn default_acquire_interval() -> Duration {
    timing::DEFAULT_ACQUIRE_INTERVAL
}
fn default_safety_margin() -> Duration {
    timing::DEFAULT_SAFETY_MARGIN
}
fn default_stop_signal() -> String {
    "SIGTERM".to_owned()
}
fn default_stop_timeout() -> Duration {
    timing::DEFAULT_STOP_TIMEOUT
}
fn default_restart_limit() -> u32 {
    5
}
fn default_health_interval() -> Duration {
    Duration::from_secs(5)
}
fn default_health_timeout() -> Duration {
    Duration::from_secs(2)
}
fn default_health_failures() -> u32 {
    3
}

/// Values that replace keys of the file (or, with [`Config::without_file`], the defaults): the
/// command line's (`--blob`, `--lease-duration`, ...), or a program's. A field left `None` (or
/// empty) leaves its key as the file has it. A rule broken by an override's value is reported
/// under the override's flag (`--renew-interval 20s: ...`).
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    /// Replaces `identity`.
    pub identity: Option<String>,
    /// Replaces `[storage].container`.
    pub container: Option<String>,
    /// Replaces `[storage].blob`.
    pub blob: Option<String>,
    /// Replaces `[storage].account`.
    pub account: Option<String>,
    /// Replaces `[storage].endpoint`.
    pub endpoint: Option<String>,
    /// Replaces `[storage].connection_string`.
    pub connection_string: Option<Secret>,
    /// Replaces `[storage].connection_string_file`.
    pub connection_string_file: Option<PathBuf>,
    /// Replaces `[storage].access_key_file`.
    pub access_key_file: Option<PathBuf>,
    /// Replaces `[storage].sas_token_file`.
    pub sas_token_file: Option<PathBuf>,
    /// Replaces `[storage].credential` (Microsoft Entra ID).
    pub credential: Option<EntraKind>,
    /// Replaces `[storage].client_id`.
    pub client_id: Option<String>,
    /// Replaces `[http].listen`.
    pub http_listen: Option<SocketAddr>,
    /// Replaces `[election].priority`.
    pub priority: Option<i64>,
    /// Replaces `[election].advertise`.
    pub advertise: Option<String>,
    /// Replaces `[lease].duration`.
    pub lease_duration: Option<Duration>,
    /// Replaces `[lease].renew_interval`.
    pub renew_interval: Option<Duration>,
    /// Replaces `[lease].acquire_interval`.
    pub acquire_interval: Option<Duration>,
    /// Replaces `[lease].safety_margin`.
    pub safety_margin: Option<Duration>,
    /// Replaces `[child].stop_timeout`.
    pub stop_timeout: Option<Duration>,
    /// `run -- COMMAND ARGS...`: replaces `[child].command`.
    pub command: Vec<String>,
    /// The keys whose override came from the key's environment variable (`LEASEHOLD_PRIORITY`
    /// for `[election].priority`) rather than from a flag: messages then name the
    /// variable.
    pub from_env: Vec<&'static str>,
}

/// The environment variables that give a per-instance key, and the key: one shared file (a
/// ConfigMap, a Compose file's config) serves every instance, and each sets what differs.
/// Precedence: the file < the variable < the flag.
#[cfg(feature = "daemon")]
pub const ENV_VARS: [(&str, &str); 4] = origin::ENV_VARS;

/// A configuration problem. `Display` is one line: what, where, and the rule; never a secret.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The config file cannot be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML, or has a key of the wrong type or an unknown one.
    #[error("{path}{location}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// `:line:column` when known.
        location: String,
        /// What is wrong, naming the key.
        message: String,
    },
    /// A value breaks a rule.
    #[error("{key} = {value}: {rule}")]
    Invalid {
        /// The key, e.g. `[lease].renew_interval`.
        key: String,
        /// The value, as shown (secrets never are).
        value: String,
        /// The rule it breaks.
        rule: String,
    },
    /// A key that must be set is not.
    #[error("{key} is missing: {rule}")]
    Missing {
        /// The key.
        key: String,
        /// What to set.
        rule: String,
    },
    /// The storage credential: none, more than one, or one that cannot be used.
    #[error("{0}")]
    Credentials(String),
    /// A value given on the command line (an override) breaks a rule.
    #[error("{given}: {rule}")]
    Flag {
        /// The flag and its value as given, e.g. `--renew-interval 20s` (the flags, when a rule
        /// ties several together).
        given: String,
        /// The rule it breaks.
        rule: String,
    },
    /// A rule broken by the file at `path` (or by an override of one of its keys).
    #[error("{path}: {error}")]
    InFile {
        /// The file.
        path: PathBuf,
        /// The rule it breaks.
        error: Box<ConfigError>,
    },
    /// A file named by a key (a `*_file` secret, `ca_file`) cannot be read.
    #[error("cannot read {key} {path}: {source}")]
    SecretFile {
        /// The key that names it.
        key: String,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl ConfigError {
    /// Names the config file in errors that do not already (nor name a flag instead).
    pub(crate) fn in_file(self, path: &Path) -> Self {
        match self {
            Self::Read { .. } | Self::Parse { .. } | Self::InFile { .. } | Self::Flag { .. } => {
                self
            }
            other => Self::InFile {
                path: path.to_owned(),
                error: Box::new(other),
            },
        }
    }

    pub(crate) fn invalid(key: &str, value: impl fmt::Display, rule: impl Into<String>) -> Self {
        Self::Invalid {
            key: key.to_owned(),
            value: value.to_string(),
            rule: rule.into(),
        }
    }
}

/// The most slots a group may have (`[lease].slots`).
pub const MAX_SLOTS: u32 = 64;

/// The leadership group as one instance sees it: who it is, where the lease lives, the timings.
#[derive(Debug, Clone)]
pub struct Group {
    pub identity: String,
    pub storage: StorageTarget,
    pub timing: Timing,
    /// This instance's HTTP endpoint, where `status` finds the local daemon.
    pub http_listen: Option<SocketAddr>,
    /// Its place in the line of members (`[election]`).
    pub election: Election,
    /// `[election].advertise = "auto"` (the default with `[http].listen`): the daemon puts the
    /// URL of its bound listener in `election.advertise`.
    pub advertise_auto: bool,
    /// `[lease].slots`: how many instances lead at once (1..=64).
    pub slots: u32,
    /// Problems worth a WARN line that do not stop anything (a secret readable by others).
    pub warnings: Vec<String>,
}

impl Config {
    /// Reads and parses the config file at `path`. Only the TOML is checked here: the rules
    /// (ranges, the timing rule, exactly one credential) are checked by whatever uses it.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        Self::load(path.as_ref(), &Overrides::default())
    }

    /// Reads and parses `path`, then applies `overrides` (the command line's).
    pub fn load(path: &Path, overrides: &Overrides) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let mut config = Self::parse(path, &text)?;
        if config
            .storage
            .connection_string
            .as_ref()
            .is_some_and(|cs| holds_real_secret(cs.expose()))
        {
            config
                .file_warnings
                .extend(readable_by_others(path, "the config file"));
        }
        config.apply(overrides);
        Ok(config)
    }

    /// Parses TOML text; `path` is only used in messages.
    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfigError> {
        let de = toml::Deserializer::parse(text).map_err(|e| parse_error(path, text, &e))?;
        let mut config: Self = serde_path_to_error::deserialize(de).map_err(|e| {
            let key = e.path().to_string();
            let inner = e.into_inner();
            let mut err = parse_error(path, text, &inner);
            if let ConfigError::Parse { message, .. } = &mut err
                && key != "."
                && !key.is_empty()
            {
                // "unknown field `x`, expected ..." -> "[section].x: unknown key, expected ...".
                let rest = match message.strip_prefix("unknown field `") {
                    Some(tail) => tail
                        .split_once("`,")
                        .map_or(message.clone(), |(_, r)| format!("unknown key,{r}")),
                    None => message.clone(),
                };
                *message = format!("{}: {rest}", display_key(&key));
            }
            err
        })?;
        config.origins = Origins::of_file(path);
        Ok(config)
    }

    /// A config without a file: every key has its default, and `overrides` replace them (the
    /// one-liner `leasehold run --blob NAME -- COMMAND`, with the credential from a flag or the
    /// standard `AZURE_STORAGE_*` variables). Errors name the flags (`--blob is missing`).
    pub fn without_file(overrides: &Overrides) -> Self {
        let mut config = Self {
            identity: None,
            storage: StorageConfig::default(),
            lease: LeaseConfig::default(),
            child: ChildConfig::default(),
            http: None,
            election: ElectionConfig::default(),
            kubernetes: None,
            file_warnings: Vec::new(),
            origins: Origins::default(),
        };
        config.apply(overrides);
        config
    }

    /// `path`'s config with `overrides` applied, or without a path [`Config::without_file`].
    #[cfg(feature = "daemon")]
    pub(crate) fn load_or_defaults(
        path: Option<&Path>,
        overrides: &Overrides,
    ) -> Result<Self, ConfigError> {
        match path {
            Some(path) => Self::load(path, overrides),
            None => Ok(Self::without_file(overrides)),
        }
    }

    /// Applies command-line overrides: each one set replaces its key (and is then named by its
    /// flag in errors).
    pub fn apply(&mut self, o: &Overrides) {
        let (s, l, g) = (&mut self.storage, &mut self.lease, &mut self.origins);
        set(
            &mut self.identity,
            o.identity.clone().map(Some),
            "identity",
            g,
        );
        set(
            &mut s.container,
            o.container.clone(),
            "[storage].container",
            g,
        );
        set(&mut s.blob, o.blob.clone().map(Some), "[storage].blob", g);
        set(
            &mut s.account,
            o.account.clone().map(Some),
            "[storage].account",
            g,
        );
        set(
            &mut s.endpoint,
            o.endpoint.clone().map(Some),
            "[storage].endpoint",
            g,
        );
        let storage_keys = [
            (
                &mut s.connection_string_file,
                &o.connection_string_file,
                "[storage].connection_string_file",
            ),
            (
                &mut s.access_key_file,
                &o.access_key_file,
                "[storage].access_key_file",
            ),
            (
                &mut s.sas_token_file,
                &o.sas_token_file,
                "[storage].sas_token_file",
            ),
        ];
        for (slot, value, key) in storage_keys {
            set(slot, value.clone().map(Some), key, g);
        }
        let cs = o.connection_string.clone().map(Some);
        set(
            &mut s.connection_string,
            cs,
            "[storage].connection_string",
            g,
        );
        set(
            &mut s.credential,
            o.credential.map(Some),
            "[storage].credential",
            g,
        );
        set(
            &mut s.client_id,
            o.client_id.clone().map(Some),
            "[storage].client_id",
            g,
        );
        let http = o.http_listen.map(|listen| Some(HttpConfig { listen }));
        set(&mut self.http, http, "[http].listen", g);
        let e = &mut self.election;
        set(&mut e.priority, o.priority, "[election].priority", g);
        set(
            &mut e.advertise,
            o.advertise.clone().map(Some),
            "[election].advertise",
            g,
        );
        set(&mut l.duration, o.lease_duration, "[lease].duration", g);
        set(
            &mut l.renew_interval,
            o.renew_interval,
            "[lease].renew_interval",
            g,
        );
        set(
            &mut l.acquire_interval,
            o.acquire_interval,
            "[lease].acquire_interval",
            g,
        );
        set(
            &mut l.safety_margin,
            o.safety_margin,
            "[lease].safety_margin",
            g,
        );
        set(
            &mut self.child.stop_timeout,
            o.stop_timeout,
            "[child].stop_timeout",
            g,
        );
        let command = (!o.command.is_empty()).then(|| o.command.clone());
        set(&mut self.child.command, command, "[child].command", g);
        for key in &o.from_env {
            g.given_by_variable(key);
        }
    }

    /// Everything but the child: what `status`, `check` and `break` need (they run no child, and
    /// a config whose command is given after `--` at run time is still a valid group config).
    pub fn validate_group(
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
        let storage = self.storage.resolve(env, &self.origins, &mut warnings)?;
        check_member_name(&storage.blob, &identity)?;
        let http_listen = self.http.as_ref().map(|h| h.listen);
        let (election, advertise_auto) =
            self.election
                .validate(&storage.endpoint, http_listen, &mut warnings)?;
        let slots = self.slots()?;
        Ok(Group {
            identity,
            storage,
            timing,
            http_listen,
            election,
            advertise_auto,
            slots,
            warnings,
        })
    }

    /// `[lease].slots`, checked: 1 to 64.
    pub fn slots(&self) -> Result<u32, ConfigError> {
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
    pub fn timing(&self) -> Result<Timing, ConfigError> {
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

impl From<TimingError> for ConfigError {
    fn from(e: TimingError) -> Self {
        Self::invalid(e.key(), e.value(), e.rule())
    }
}

impl From<InvalidTarget> for ConfigError {
    fn from(e: InvalidTarget) -> Self {
        match e {
            InvalidTarget::Value { key, value, rule } => Self::invalid(key, value, rule),
            other => Self::Credentials(other.to_string()),
        }
    }
}

/// The first executable file named `program` in the folders of `path` (a PATH value).
pub(crate) fn find_in_path(program: impl AsRef<Path>, path: &OsStr) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|dir| dir.join(program.as_ref()))
        .find(|p| is_executable(p))
}

pub(crate) fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `<hostname>-<pid>`: unique per process, readable in `status`.
pub fn default_identity() -> String {
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

/// An override: `value`, if given, replaces `key`'s value, which is then named by its flag.
fn set<T>(slot: &mut T, value: Option<T>, key: &'static str, origins: &mut Origins) {
    if let Some(value) = value {
        *slot = value;
        origins.give(key);
    }
}

/// Turns a TOML/serde error into one line with the file, line and column.
fn parse_error(path: &Path, text: &str, e: &toml::de::Error) -> ConfigError {
    let location = e
        .span()
        .map(|span| {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!(":{line}:{col}")
        })
        .unwrap_or_default();
    let message = e
        .message()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    ConfigError::Parse {
        path: path.to_owned(),
        location,
        message,
    }
}

/// `lease.duration` -> `[lease].duration`.
fn display_key(path: &str) -> String {
    match path.split_once('.') {
        Some((section, rest)) => format!("[{section}].{rest}"),
        None => path.to_owned(),
    }
}

/// What the config's test modules share: a good file, no environment, and loading text as
/// `run` does (so they need the daemon's half of the config).
#[cfg(all(test, feature = "daemon"))]
mod testing {
    use super::{Config, ConfigError, Settings};
    use std::path::Path;

    pub const GOOD: &str = r#"
identity = "worker-1"
[storage]
connection_string = "UseDevelopmentStorage=true"
blob = "svc"
[child]
command = ["true"]
"#;

    pub fn no_env(_: &str) -> Option<String> {
        None
    }

    pub fn validate_with(
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Settings, ConfigError> {
        Config::parse(Path::new("t.toml"), text)?.validate(env)
    }

    pub fn load(text: &str) -> Result<Settings, ConfigError> {
        validate_with(text, &no_env)
    }

    /// The one line `text` is refused with.
    pub fn refused(text: &str) -> String {
        load(text).expect_err("refused").to_string()
    }
}

#[cfg(all(test, feature = "daemon"))]
mod tests {
    use super::testing::{GOOD, load, refused};
    use super::*;

    #[test]
    fn defaults_follow_the_design() {
        let s = load(GOOD).unwrap();
        assert_eq!(s.group.timing.duration, Duration::from_secs(15));
        assert_eq!(s.group.timing.renew_interval, Duration::from_secs(4));
        assert_eq!(s.group.timing.acquire_interval, Duration::from_secs(1));
        assert_eq!(s.group.timing.safety_margin, Duration::from_secs(1));
        assert_eq!(s.group.timing.stop_timeout, Duration::from_secs(5));
        assert_eq!(s.group.storage.container, "leasehold");
        assert_eq!(
            s.group.storage.endpoint,
            "http://127.0.0.1:10000/devstoreaccount1"
        );
        assert_eq!(s.group.storage.account, "devstoreaccount1");
        assert_eq!(s.child.on_exit, OnExit::Release);
        assert_eq!(s.child.stop_signal, nix::sys::signal::Signal::SIGTERM);
    }

    #[test]
    fn bad_input_names_key_and_rule() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "[lease]\nduration = \"10s\"",
                "[lease].duration",
                "between 15s and 60s",
            ),
            (
                "[lease]\nduration = \"61s\"",
                "[lease].duration",
                "between 15s and 60s",
            ),
            (
                "[lease]\nduration = \"15500ms\"",
                "[lease].duration",
                "whole number",
            ),
            (
                "[lease]\nrenew_interval = \"6s\"",
                "[lease]",
                "2*renew_interval + stop_timeout + safety_margin <= duration",
            ),
            (
                "[lease]\ndurration = \"15s\"",
                "[lease].durration",
                "unknown key, expected one of `duration`",
            ),
            ("[bogus]\nx = 1", "bogus", "unknown key"),
            (
                "[lease]\nsafety_margin = \"0s\"",
                "[lease].safety_margin",
                "at least 500ms",
            ),
            (
                "[lease]\nacquire_interval = \"500000000000y\"",
                "[lease].acquire_interval",
                "between 100ms and 1h",
            ),
            (
                "[lease]\nrenew_interval = \"16s\"",
                "[lease].renew_interval",
                "at most the lease duration (15s)",
            ),
            (
                "[lease]\nduration = \"fast\"",
                "[lease].duration",
                "t.toml:",
            ),
        ];
        for (extra, key, rule) in cases {
            let text = format!("{GOOD}{extra}\n");
            let err = load(&text).expect_err(extra).to_string();
            assert!(err.contains(key), "{extra}: {err}");
            assert!(err.contains(rule), "{extra}: {err}");
            assert!(!err.contains('\n'), "{extra}: {err}");
        }
    }

    #[test]
    fn slots_are_1_to_64() {
        assert_eq!(load(GOOD).unwrap().group.slots, 1, "default");
        let with = |n: &str| format!("{GOOD}[lease]\nslots = {n}\n");
        assert_eq!(load(&with("64")).unwrap().group.slots, 64);
        for bad in ["0", "65", "-1", "99999999999"] {
            let err = refused(&with(bad));
            assert!(err.contains("[lease].slots"), "{bad}: {err}");
            assert!(err.contains("from 1 to 64"), "{bad}: {err}");
            assert!(!err.contains('\n'), "{bad}: {err}");
        }
        assert!(refused(&with("\"two\"")).contains("[lease].slots"));
    }

    #[test]
    fn the_smallest_safety_margin_is_accepted() {
        let text = format!("{GOOD}[lease]\nsafety_margin = \"500ms\"\n");
        assert_eq!(
            load(&text).unwrap().group.timing.safety_margin,
            timing::MIN_SAFETY_MARGIN
        );
    }

    #[test]
    fn health_rules() {
        let with = |body: &str| {
            GOOD.replace(
                "command = [\"true\"]",
                &format!("command = [\"true\"]\n[child.health]\n{body}"),
            )
        };
        let h = load(&with("http = \"http://127.0.0.1:8080/health\""))
            .unwrap()
            .child
            .health
            .unwrap();
        assert_eq!(h.interval, Duration::from_secs(5));
        assert_eq!(h.failures, 3);
        assert_eq!(h.cooldown, Duration::from_secs(10));
        let bad: &[(&str, &str)] = &[
            ("interval = \"1s\"", "give exactly one of them"),
            (
                "command = [\"x\"]\nhttp = \"http://h/x\"",
                "give exactly one of them",
            ),
            ("command = []", "[child.health].command"),
            ("http = \"ftp://h/x\"", "[child.health].http"),
            (
                "http = \"http://h/health\"\ntimeout = \"6s\"",
                "checks never overlap",
            ),
            (
                "http = \"http://h/health\"\nfailures = 0",
                "[child.health].failures",
            ),
            (
                "http = \"http://h/health\"\ncooldown = \"1s\"",
                "[child.health].cooldown",
            ),
            ("http = \"http://h/health\"\nretries = 3", "unknown key"),
        ];
        for (body, needle) in bad {
            let err = refused(&with(body));
            assert!(err.contains(needle), "{body}: {err}");
        }
    }

    #[test]
    fn child_rules() {
        let empty = GOOD.replace("command = [\"true\"]", "command = []");
        assert!(refused(&empty).contains("[child].command"));
        let sig = GOOD.replace(
            "command = [\"true\"]",
            "command = [\"true\"]\nstop_signal = \"SIGBOGUS\"",
        );
        assert!(refused(&sig).contains("[child].stop_signal"));
        let short = GOOD.replace(
            "command = [\"true\"]",
            "command = [\"true\"]\nstop_signal = \"hup\"",
        );
        assert_eq!(
            load(&short).unwrap().child.stop_signal,
            nix::sys::signal::Signal::SIGHUP
        );
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn without_a_file_every_key_has_its_default_and_overrides_replace_them() {
        let env = |k: &str| {
            (k == credentials::ENV_CONNECTION_STRING).then(|| "UseDevelopmentStorage=true".into())
        };
        let overrides = Overrides {
            blob: Some("nightly".into()),
            renew_interval: Some(secs(3)),
            command: vec!["true".into()],
            ..Overrides::default()
        };
        let s = Config::without_file(&overrides).validate(&env).unwrap();
        assert_eq!(
            s.group.timing,
            Timing {
                renew_interval: secs(3),
                ..Timing::default()
            }
        );
        assert_eq!(s.group.storage.blob, "nightly");
        assert_eq!(s.group.storage.container, "leasehold");
        assert!(s.group.storage.create_if_missing);
        assert_eq!(s.child.command, ["true"]);
        assert_eq!(
            s.child.on_exit,
            OnExit::Release,
            "the config's default; run decides"
        );
        assert!(s.group.http_listen.is_none());
    }

    #[test]
    fn a_rule_broken_by_an_override_names_its_flag_and_one_broken_by_the_file_its_key() {
        let with = |text: &str, o: Overrides| {
            let mut config = Config::parse(Path::new("t.toml"), text).unwrap();
            config.apply(&o);
            config.validate(&testing::no_env).unwrap_err().to_string()
        };
        let renew = |d| Overrides {
            renew_interval: Some(d),
            ..Overrides::default()
        };
        assert_eq!(
            with(GOOD, renew(secs(20))),
            "--renew-interval 20s: must be at least 1s and at most the lease duration (15s)"
        );
        let from_file = format!("{GOOD}[lease]\nrenew_interval = \"20s\"\n");
        assert_eq!(
            with(&from_file, Overrides::default()),
            "t.toml: [lease].renew_interval = \"20s\": must be at least 1s and at most the lease \
             duration (15s)"
        );
        // The rule that ties the timings together names the flags given, with every value.
        let both = Overrides {
            lease_duration: Some(secs(20)),
            ..renew(secs(9))
        };
        assert_eq!(
            with(GOOD, both),
            "--lease-duration 20s --renew-interval 9s: timing rule 2*renew_interval + \
             stop_timeout + safety_margin <= duration is broken (2*9s + 5s + 1s = 24s > 20s); \
             lengthen the lease duration or shorten the others"
        );
        // A file value out of range under a flag's duration still names the file's key.
        let err = with(
            &from_file,
            Overrides {
                lease_duration: Some(secs(16)),
                ..Overrides::default()
            },
        );
        assert!(
            err.starts_with("t.toml: [lease].renew_interval = \"20s\""),
            "{err}"
        );
        let blob = Overrides {
            blob: Some("a//b".into()),
            ..Overrides::default()
        };
        assert!(with(GOOD, blob).starts_with("--blob \"a//b\": "));
    }
}
