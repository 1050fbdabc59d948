//! Where a setting's value came from (the config file, a command-line flag, an environment
//! variable, or the default of a run without a file) and what messages call it. A value given on
//! the command line is named by its flag, so that an error points at what was typed
//! (`--renew-interval 20s: ...`); one given by a variable by the variable
//! (`LEASEHOLD_PRIORITY="high": ...`); a value from the file by its key
//! (`[lease].renew_interval = "20s": ...`). Without a file, flags are the only way to give a
//! value, so every setting that has a flag is named by it.

use super::error::ConfigError;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Every key that has a flag, and the flag. `-- COMMAND` replaces `[child].command`.
const FLAGS: [(&str, &str); 20] = [
    ("identity", "--identity"),
    ("[election].priority", "--priority"),
    ("[election].advertise", "--advertise"),
    ("[storage].container", "--container"),
    ("[storage].blob", "--blob"),
    ("[storage].account", "--account"),
    ("[storage].endpoint", "--endpoint"),
    ("[storage].connection_string", "--connection-string"),
    (
        "[storage].connection_string_file",
        "--connection-string-file",
    ),
    ("[storage].access_key_file", "--access-key-file"),
    ("[storage].sas_token_file", "--sas-token-file"),
    ("[storage].credential", "--credential"),
    ("[storage].client_id", "--client-id"),
    ("[http].listen", "--http-listen"),
    ("[lease].duration", "--lease-duration"),
    ("[lease].renew_interval", "--renew-interval"),
    ("[lease].acquire_interval", "--acquire-interval"),
    ("[lease].safety_margin", "--safety-margin"),
    ("[child].stop_timeout", "--stop-timeout"),
    ("[child].command", "COMMAND (after --)"),
];

/// The environment variables that give a per-instance key, and the key: one shared file (a
/// ConfigMap, a Compose file's config) serves every instance, and each sets what differs.
/// Precedence: the file < the variable < the flag.
pub(crate) const ENV_VARS: [(&str, &str); 4] = [
    ("LEASEHOLD_IDENTITY", "identity"),
    ("LEASEHOLD_PRIORITY", "[election].priority"),
    ("LEASEHOLD_ADVERTISE", "[election].advertise"),
    ("LEASEHOLD_HTTP_LISTEN", "[http].listen"),
];

/// Where the values of one config came from.
#[derive(Debug, Clone, Default)]
pub(crate) struct Origins {
    /// The config file; `None` when every value is a default or was given on the command line.
    file: Option<PathBuf>,
    /// The keys whose values an override (a flag) replaced.
    given: BTreeSet<&'static str>,
    /// Of those, the ones whose override came from their environment variable.
    from_env: BTreeSet<&'static str>,
}

impl Origins {
    pub fn of_file(path: &Path) -> Self {
        Self {
            file: Some(path.to_owned()),
            ..Self::default()
        }
    }

    /// The config file, if there is one.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// `key`'s value came from an override.
    pub fn give(&mut self, key: &'static str) {
        self.given.insert(key);
    }

    /// `key`'s override came from its environment variable, not from its flag.
    pub fn given_by_variable(&mut self, key: &str) {
        if let Some((_, key)) = ENV_VARS.iter().find(|(_, k)| *k == key) {
            self.from_env.insert(key);
        }
    }

    /// Whether `key`'s value came from an override.
    pub fn is_given(&self, key: &str) -> bool {
        self.given.contains(key)
    }

    /// The variable that gave `key`'s value, if one did.
    fn variable(&self, key: &str) -> Option<&'static str> {
        if !self.is_given(key) || !self.from_env.contains(key) {
            return None;
        }
        ENV_VARS.iter().find(|(_, k)| *k == key).map(|(v, _)| *v)
    }

    /// The flag messages name `key` by: the one that gave its value, or, without a file, the
    /// one that would have; the variable, when a variable gave it. `None`: the key is named as
    /// in the file.
    pub fn flag(&self, key: &str) -> Option<&'static str> {
        if let Some(variable) = self.variable(key) {
            return Some(variable);
        }
        let (_, flag) = FLAGS.iter().find(|(k, _)| *k == key)?;
        (self.file.is_none() || self.is_given(key)).then_some(*flag)
    }

    /// What messages call `key`: its flag (see [`Origins::flag`]) or the key itself.
    pub fn name(&self, key: &str) -> String {
        self.flag(key).unwrap_or(key).to_owned()
    }

    /// [`Origins::name`], and for a value from the file, which file: `--http-listen`,
    /// `LEASEHOLD_HTTP_LISTEN`, or `[http].listen in /etc/leasehold/leasehold.toml`. For
    /// errors that come after the config was read (a port already taken, a program not found),
    /// where the line alone no longer says which file to open.
    #[cfg_attr(not(feature = "daemon"), allow(dead_code))]
    pub fn named_in_file(&self, key: &str) -> String {
        match (self.flag(key), &self.file) {
            (Some(flag), _) => flag.to_owned(),
            (None, Some(file)) => format!("{key} in {}", file.display()),
            (None, None) => key.to_owned(),
        }
    }

    /// `error` as the user should read it: a rule broken by a flag's value names the flag and
    /// the value as typed; anything else the file (if there is one).
    pub fn locate(&self, error: ConfigError) -> ConfigError {
        let error = match error {
            ConfigError::Invalid { key, value, rule } => match self.flag(&key) {
                Some(variable) if self.variable(&key).is_some() => ConfigError::Flag {
                    given: format!("{variable}={value}"),
                    rule,
                },
                Some(flag) => ConfigError::Flag {
                    given: format!("{flag} {value}"),
                    rule,
                },
                None => ConfigError::Invalid { key, value, rule },
            },
            ConfigError::Missing { key, rule } => ConfigError::Missing {
                key: self.name(&key),
                rule,
            },
            other => other,
        };
        match &self.file {
            Some(path) => error.in_file(path),
            None => error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_named_by_its_flag_when_the_flag_gave_it_or_there_is_no_file() {
        let mut file = Origins::of_file(Path::new("l.toml"));
        assert_eq!(file.name("[storage].blob"), "[storage].blob");
        file.give("[storage].blob");
        assert_eq!(file.name("[storage].blob"), "--blob");
        assert_eq!(file.name("[lease].duration"), "[lease].duration");
        let none = Origins::default();
        assert_eq!(none.name("[lease].duration"), "--lease-duration");
        // Keys without a flag keep their name.
        assert_eq!(none.name("[storage].ca_file"), "[storage].ca_file");

        let located = file.locate(ConfigError::invalid("[storage].blob", "\"a//b\"", "no"));
        assert_eq!(located.to_string(), "--blob \"a//b\": no");
        let located = file.locate(ConfigError::invalid("identity", "\"\"", "no"));
        assert_eq!(located.to_string(), "l.toml: identity = \"\": no");

        // A value from a variable is named by the variable.
        file.give("[election].advertise");
        file.given_by_variable("[election].advertise");
        let located = file.locate(ConfigError::invalid("[election].advertise", "\"x\"", "no"));
        assert_eq!(located.to_string(), "LEASEHOLD_ADVERTISE=\"x\": no");
    }
}
