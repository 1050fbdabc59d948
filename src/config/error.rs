//! The config's one error type: every refused value is one line naming the key (or the flag),
//! the value and the rule.

use crate::store::target::InvalidTarget;
use crate::timing::TimingError;
use std::fmt;
use std::path::{Path, PathBuf};

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
