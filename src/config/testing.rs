//! What the config's test modules share: a good file, no environment, and loading text as
//! `run` does (so they need the daemon's half of the config).

use super::{Config, ConfigError, Overrides, Settings};
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

/// Everything `leasehold run` checks before it touches storage, and nothing that needs storage:
/// parses `path` (without one, starts from the defaults), applies `overrides`, checks every
/// rule, resolves the credential (reading the `*_file` keys and `env`), and collects the
/// start-up warnings. The config's tests validate with it.
pub fn check_offline(
    path: Option<&Path>,
    overrides: &Overrides,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Settings, ConfigError> {
    Config::load_or_defaults(path, overrides)?.validate(env)
}
