//! The TOML schema: the file's sections and keys as serde reads them, with their defaults (a
//! key left out takes its section's `Default`). The README's "Configuration" section documents
//! the keys; the rules are checked when the config is validated (`group`, `credentials`,
//! `election`, `child`).

use super::election::ElectionConfig;
use super::kubernetes::KubernetesConfig;
use super::origin::Origins;
use crate::secret::Secret;
use crate::store::target::EntraKind;
use crate::timing;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
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
    /// The lease timings (docs/safety.md, "The safety model").
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
    /// Warnings about the file itself (found by [`Config::load`]), passed on to the group's.
    #[serde(skip)]
    pub(crate) file_warnings: Vec<String>,
    /// Where its values came from (the file, flags), for messages.
    #[serde(skip)]
    pub(crate) origins: Origins,
}

#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
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
    pub allow_insecure_http: bool,
    /// The container holding the lease blob.
    pub container: String,
    /// The lease blob; one blob per leadership group.
    pub blob: Option<String>,
    /// Create the container and an empty blob when they do not exist.
    pub create_if_missing: bool,
    /// `[[storage.replica]]`: the storage accounts of a lease held on a majority of them, in
    /// the set's order (empty: the one account above). Each names its own account and
    /// credential; `container`, `blob` and `create_if_missing` above are every replica's.
    pub replica: Vec<ReplicaConfig>,
}

/// One `[[storage.replica]]` table: a storage account and its credential, with the keys (and
/// the rules) of `[storage]`'s account. The container and the blob are `[storage]`'s, shared.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReplicaConfig {
    /// As `[storage].connection_string`.
    pub connection_string: Option<Secret>,
    /// As `[storage].connection_string_file`.
    pub connection_string_file: Option<PathBuf>,
    /// As `[storage].account`.
    pub account: Option<String>,
    /// As `[storage].endpoint`.
    pub endpoint: Option<String>,
    /// As `[storage].access_key_file`.
    pub access_key_file: Option<PathBuf>,
    /// As `[storage].sas_token_file`.
    pub sas_token_file: Option<PathBuf>,
    /// As `[storage].credential`.
    pub credential: Option<EntraKind>,
    /// As `[storage].client_id`.
    pub client_id: Option<String>,
    /// As `[storage].ca_file`.
    pub ca_file: Option<PathBuf>,
    /// As `[storage].allow_insecure_http`.
    pub allow_insecure_http: bool,
}

#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LeaseConfig {
    /// `L`: the lease duration asked of Azure (15 s to 60 s, whole seconds).
    #[serde(with = "humantime_serde")]
    pub duration: Duration,
    /// `R`: how often the leader renews.
    #[serde(with = "humantime_serde")]
    pub renew_interval: Duration,
    /// How often a follower tries to acquire (jittered upwards by up to 20 %).
    #[serde(with = "humantime_serde")]
    pub acquire_interval: Duration,
    /// `M`: slack for clock-rate drift between this host and the storage service.
    #[serde(with = "humantime_serde")]
    pub safety_margin: Duration,
    /// How many instances lead at once, each holding one slot lease (docs/slots.md).
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
            container: "leasehold".to_owned(),
            blob: None,
            create_if_missing: true,
            replica: Vec::new(),
        }
    }
}

impl Default for LeaseConfig {
    fn default() -> Self {
        Self {
            duration: timing::DEFAULT_DURATION,
            renew_interval: timing::DEFAULT_RENEW_INTERVAL,
            acquire_interval: timing::DEFAULT_ACQUIRE_INTERVAL,
            safety_margin: timing::DEFAULT_SAFETY_MARGIN,
            slots: 1,
        }
    }
}

// Only the daemon reads all of it; the library accepts the section and reads stop_timeout.
#[cfg_attr(not(feature = "daemon"), allow(dead_code))]
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChildConfig {
    /// Program and arguments; no shell is involved unless you name one.
    pub command: Vec<String>,
    /// The signal sent to the child's process group to ask it to stop.
    pub stop_signal: String,
    /// `G`: how long the child may take to stop before its group gets SIGKILL.
    #[serde(with = "humantime_serde")]
    pub stop_timeout: Duration,
    /// What to do when the child ends by itself.
    pub on_exit: OnExit,
    /// With `on_exit = "restart"`: consecutive quick exits (under `QUICK_EXIT`) after which
    /// the daemon falls back to `release`.
    pub restart_limit: u32,
    /// How long a member stands aside after its child failed within `crash_window` of its
    /// start, doubling with each such failure in a row; "off", or a duration (default "1s").
    pub crash_backoff: Option<String>,
    /// The longest crash-loop backoff (default "60s").
    #[serde(with = "humantime_serde")]
    pub crash_backoff_max: Duration,
    /// A failure this soon after the start is a crash; a run this long resets the backoff.
    #[serde(with = "humantime_serde")]
    pub crash_window: Duration,
    /// The child's working directory (default: the daemon's).
    pub working_dir: Option<PathBuf>,
    /// Extra environment for the child.
    pub env: BTreeMap<String, String>,
    /// Pass the `AZURE_STORAGE_*` credential variables on to the child (off by default).
    pub inherit_storage_credentials: bool,
    /// `[child.health]`: checks that make a leader with a stalled child step down.
    pub health: Option<HealthConfig>,
}

/// `[child.health]`, with Docker HEALTHCHECK's semantics for `interval`, `timeout`, `failures`
/// (its `retries`) and `start_period`.
#[cfg_attr(not(feature = "daemon"), allow(dead_code))]
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HealthConfig {
    /// A command; exit 0 means healthy.
    pub command: Option<Vec<String>>,
    /// An `http://` or `https://` URL; a 2xx answer means healthy.
    pub http: Option<String>,
    /// Time between the starts of two checks; the first runs one interval after the child starts.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// A check that takes longer fails (and is killed).
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// Consecutive failed checks that make the child unhealthy.
    pub failures: u32,
    /// Failed checks during this time after the child starts do not count (a success ends it).
    #[serde(with = "humantime_serde")]
    pub start_period: Duration,
    /// How long a daemon that stepped down for an unhealthy child stays out of the election.
    /// Default: max(10s, 5 * acquire_interval).
    #[serde(with = "humantime_serde::option")]
    pub cooldown: Option<Duration>,
}

impl Default for HealthConfig {
    fn default() -> Self {
        Self {
            command: None,
            http: None,
            interval: Duration::from_secs(5),
            timeout: Duration::from_secs(2),
            failures: 3,
            start_period: Duration::ZERO,
            cooldown: None,
        }
    }
}

/// `[child].crash_backoff` when not given: the first backoff after a quick failure.
#[cfg_attr(
    not(any(feature = "daemon", test, feature = "test-util")),
    allow(dead_code)
)]
pub const DEFAULT_CRASH_BACKOFF: Duration = Duration::from_secs(1);
/// `[child].crash_backoff_max` when not given (Kubernetes' CrashLoopBackOff caps at 5 minutes
/// and is being lowered; a group whose other members are healthy loses nothing by the wait).
pub const DEFAULT_CRASH_BACKOFF_MAX: Duration = Duration::from_secs(60);
/// `[child].crash_window` when not given.
pub const DEFAULT_CRASH_WINDOW: Duration = Duration::from_secs(60);

impl Default for ChildConfig {
    fn default() -> Self {
        Self {
            command: Vec::new(),
            stop_signal: "SIGTERM".to_owned(),
            stop_timeout: timing::DEFAULT_STOP_TIMEOUT,
            on_exit: OnExit::default(),
            restart_limit: 5,
            crash_backoff: None,
            crash_backoff_max: DEFAULT_CRASH_BACKOFF_MAX,
            crash_window: DEFAULT_CRASH_WINDOW,
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
