//! Reading a config: the file parsed (unknown keys refused, errors with the file, line and
//! column), or the defaults for a run without a file, and the overrides applied.

use super::credentials::{holds_real_secret, readable_by_others};
#[cfg(feature = "daemon")]
use super::election::ElectionConfig;
use super::error::ConfigError;
use super::origin::Origins;
use super::overrides::Overrides;
use super::schema::Config;
#[cfg(feature = "daemon")]
use super::schema::{ChildConfig, LeaseConfig, StorageConfig};
use std::path::Path;

impl Config {
    /// Reads and parses the config file at `path`. Only the TOML is checked here: the rules
    /// (ranges, the timing rule, exactly one credential) are checked by whatever uses it.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        Self::load(path.as_ref(), &Overrides::default())
    }

    /// Reads and parses `path`, then applies `overrides` (the command line's). Takes a path as
    /// [`Config::from_file`] does: a `&str`, a `String`, a `PathBuf` or a `&Path`.
    pub fn load(path: impl AsRef<Path>, overrides: &Overrides) -> Result<Self, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let mut config = Self::parse(path, &text)?;
        let storage = &config.storage;
        let holds_secret = storage
            .replica
            .iter()
            .map(|r| &r.connection_string)
            .chain([&storage.connection_string])
            .flatten()
            .any(|cs| holds_real_secret(cs.expose()));
        if holds_secret {
            config
                .file_warnings
                .extend(readable_by_others(path, "the config file"));
        }
        config.apply(overrides);
        Ok(config)
    }

    /// Parses TOML text; `path` is only used in messages.
    pub(crate) fn parse(path: &Path, text: &str) -> Result<Self, ConfigError> {
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
                // `[storage.replica]` is one table; the replicas are an array of them.
                let rest = if key == "storage.replica" && rest.contains("expected a sequence") {
                    format!("{rest}: write each replica's table as [[storage.replica]]")
                } else {
                    rest
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
    #[cfg(feature = "daemon")]
    pub(crate) fn without_file(overrides: &Overrides) -> Self {
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

/// `lease.duration` -> `[lease].duration`; `storage.replica[1].account` -> `[storage.replica
/// 2].account` (the tables counted from 1, as every message counts them).
fn display_key(path: &str) -> String {
    if let Some(rest) = path.strip_prefix("storage.replica[")
        && let Some((index, key)) = rest.split_once(']')
        && let Ok(index) = index.parse::<usize>()
    {
        let table = format!("[storage.replica {}]", index + 1);
        return match key.strip_prefix('.') {
            Some(key) => format!("{table}.{key}"),
            None => table,
        };
    }
    match path.split_once('.') {
        Some((section, rest)) => format!("[{section}].{rest}"),
        None => path.to_owned(),
    }
}
