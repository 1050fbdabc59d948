//! What only `leasehold run` needs of the config: the child (`[child]`, `[child.health]`) and
//! its rules, checked before the daemon touches storage. The library's elector runs no child.

use super::credentials::{ENV_CLIENT_SECRET, STORAGE_ENV_VARS};
use super::error::ConfigError;
use super::group::{Group, default_hostname};
use super::kubernetes::PodLabel;
use super::origin::ENV_VARS;
use super::schema::{ChildConfig, Config, DEFAULT_CRASH_BACKOFF, HealthConfig, OnExit};
use crate::crash_loop::CrashBackoff;
use crate::store::target::{Credential, TokenSource};
use leasehold_core::timing::MAX_INTERVAL;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// The longest `[child.health].start_period` and `cooldown`.
pub const MAX_HEALTH_WAIT: Duration = Duration::from_secs(24 * 3600);

/// A child run shorter than this counts as a quick exit for `restart_limit`.
pub const QUICK_EXIT: Duration = Duration::from_secs(10);

/// Everything `run` needs, checked: the group, and the child this instance runs while leading.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The group, as the library's elector would see it.
    pub group: Group,
    /// The child, and its health checks.
    pub child: ChildSettings,
    /// `[kubernetes]`: the label kept on this pod while it leads.
    #[cfg_attr(not(feature = "kubernetes"), allow(dead_code))]
    pub kubernetes: Option<PodLabel>,
}

/// Validated `[child]`.
#[derive(Debug, Clone)]
pub struct ChildSettings {
    pub command: Vec<String>,
    pub stop_signal: nix::sys::signal::Signal,
    pub on_exit: OnExit,
    pub restart_limit: u32,
    /// The crash-loop backoff; `None`: "off".
    pub crash_backoff: Option<CrashBackoff>,
    pub working_dir: Option<PathBuf>,
    pub env: BTreeMap<String, String>,
    pub inherit_storage_credentials: bool,
    /// Inherited variables the child must not see: the credentials leasehold consumed.
    pub remove_env: Vec<String>,
    /// `run --pass-stdin`: the child reads the daemon's standard input.
    pub pass_stdin: bool,
    pub health: Option<HealthSettings>,
}

/// Validated `[child.health]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthSettings {
    pub probe: Probe,
    pub interval: Duration,
    pub timeout: Duration,
    pub failures: u32,
    pub start_period: Duration,
    pub cooldown: Duration,
}

/// The bounds of the crash-loop figures.
const MIN_CRASH_BACKOFF: Duration = Duration::from_millis(100);
const MAX_CRASH_BACKOFF: Duration = Duration::from_secs(3600);
const MIN_CRASH_WINDOW: Duration = Duration::from_secs(1);

/// How a health check asks the child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// Run this; exit 0 is healthy.
    Command(Vec<String>),
    /// GET this; 2xx is healthy.
    Http(String),
}

impl Config {
    /// Checks every rule and resolves the credential, reading `*_file` keys and the
    /// environment through `env`.
    pub(crate) fn validate(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Settings, ConfigError> {
        let group = self.validate_group(env)?;
        let mut child = self.child_settings().map_err(|e| self.origins.locate(e))?;
        // What leasehold read its own settings from is not the child's: a leasehold that the
        // child starts (a lock of its own, say) begins from its own settings, not from this
        // daemon's listener and place in line. (`LEASEHOLD_IDENTITY` is set for the child.)
        child.remove_env.push("LEASEHOLD_CONFIG".to_owned());
        child.remove_env.extend(
            ENV_VARS
                .iter()
                .filter(|(variable, _)| *variable != "LEASEHOLD_IDENTITY")
                .map(|(variable, _)| variable.to_string()),
        );
        if !child.inherit_storage_credentials {
            child
                .remove_env
                .extend(STORAGE_ENV_VARS.iter().map(|v| v.to_string()));
            let consumed_client_secret = std::iter::once(&group.storage)
                .chain(&group.replicas)
                .any(|target| {
                    matches!(&target.credential,
                    Credential::Entra { sources, .. }
                        if sources.iter().any(|s| matches!(s, TokenSource::ClientSecret { .. })))
                });
            if consumed_client_secret {
                child.remove_env.push(ENV_CLIENT_SECRET.to_owned());
            }
        }
        let kubernetes = self.pod_label(env)?;
        Ok(Settings {
            group,
            child,
            kubernetes,
        })
    }

    /// `[kubernetes]` checked, with the pod to label found (`POD_NAME`, ... through `env`);
    /// refused by a build without the `kubernetes` feature, which could not keep the label.
    pub(crate) fn pod_label(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<PodLabel>, ConfigError> {
        match &self.kubernetes {
            Some(section) if cfg!(feature = "kubernetes") => section
                .validate(env, default_hostname)
                .map(Some)
                .map_err(|e| self.origins.locate(e)),
            Some(_) => Err(self.origins.locate(ConfigError::invalid(
                "[kubernetes]",
                "(a section)",
                "this leasehold was built without the kubernetes feature, so it cannot keep a \
                 pod label: use the container image, or build with `cargo build --release \
                 --features kubernetes`",
            ))),
            None => Ok(None),
        }
    }

    /// `[child]` checked: what `run` starts while leading.
    pub(crate) fn child_settings(&self) -> Result<ChildSettings, ConfigError> {
        let c = &self.child;
        if c.command.is_empty() || c.command[0].is_empty() {
            let rule = if self.origins.file().is_some() {
                "give the program to run while leading, e.g. command = [\"my-service\"], or pass \
                 it after `--` on the command line"
            } else {
                "give the command to run after `--`, e.g. leasehold run --blob my-job -- ./job.sh"
            };
            return Err(ConfigError::Missing {
                key: "[child].command".to_owned(),
                rule: rule.to_owned(),
            });
        }
        let stop_signal = parse_signal(&c.stop_signal).ok_or_else(|| {
            ConfigError::invalid(
                "[child].stop_signal",
                format!("{:?}", c.stop_signal),
                "not a known signal name; use e.g. \"SIGTERM\", \"SIGINT\" or \"SIGQUIT\"",
            )
        })?;
        if stop_signal == nix::sys::signal::Signal::SIGKILL
            || stop_signal == nix::sys::signal::Signal::SIGSTOP
        {
            return Err(ConfigError::invalid(
                "[child].stop_signal",
                format!("{:?}", c.stop_signal),
                "must be a signal the child can handle (SIGKILL is sent anyway after stop_timeout)",
            ));
        }
        if let Some(key) = c.env.keys().find(|k| k.is_empty() || k.contains('=')) {
            return Err(ConfigError::invalid(
                "[child].env",
                format!("{key:?}"),
                "variable names must be non-empty and contain no '='",
            ));
        }
        if let Some(key) = c.env.keys().find(|k| k.starts_with("LEASEHOLD_")) {
            return Err(ConfigError::invalid(
                "[child].env",
                format!("{key:?}"),
                "LEASEHOLD_* variables are set by leasehold itself",
            ));
        }
        Ok(ChildSettings {
            command: c.command.clone(),
            stop_signal,
            on_exit: c.on_exit,
            restart_limit: c.restart_limit,
            crash_backoff: crash_backoff(c)?,
            working_dir: c.working_dir.clone(),
            env: c.env.clone(),
            inherit_storage_credentials: c.inherit_storage_credentials,
            remove_env: Vec::new(),
            pass_stdin: false,
            health: match &c.health {
                Some(h) => Some(health_settings(h, self.lease.acquire_interval)?),
                None => None,
            },
        })
    }
}

fn health_settings(
    h: &HealthConfig,
    acquire_interval: Duration,
) -> Result<HealthSettings, ConfigError> {
    let show = |d: Duration| format!("{:?}", humantime::format_duration(d).to_string());
    let probe = match (&h.command, &h.http) {
        (Some(command), None) => {
            if command.is_empty() || command[0].is_empty() {
                return Err(ConfigError::invalid(
                    "[child.health].command",
                    "[]",
                    "give the program to run, e.g. command = [\"curl\", \"-sf\", \"http://127.0.0.1:8080/health\"]",
                ));
            }
            Probe::Command(command.clone())
        }
        (None, Some(url)) => {
            if !(url.starts_with("http://") || url.starts_with("https://")) || url.len() < 10 {
                return Err(ConfigError::invalid(
                    "[child.health].http",
                    format!("{url:?}"),
                    "must be an http:// or https:// URL, e.g. \"http://127.0.0.1:8080/health\"",
                ));
            }
            Probe::Http(url.clone())
        }
        _ => {
            return Err(ConfigError::Missing {
                key: "[child.health].command or [child.health].http".to_owned(),
                rule: "give exactly one of them".to_owned(),
            });
        }
    };
    if h.interval < Duration::from_millis(100) || h.interval > MAX_INTERVAL {
        return Err(ConfigError::invalid(
            "[child.health].interval",
            show(h.interval),
            "must be between 100ms and 1h",
        ));
    }
    if h.timeout.is_zero() || h.timeout > h.interval {
        return Err(ConfigError::invalid(
            "[child.health].timeout",
            show(h.timeout),
            format!(
                "must be more than 0s and at most the interval ({}), so that checks never overlap",
                humantime::format_duration(h.interval)
            ),
        ));
    }
    if h.start_period > MAX_HEALTH_WAIT {
        return Err(ConfigError::invalid(
            "[child.health].start_period",
            show(h.start_period),
            "must be at most 24h",
        ));
    }
    if h.failures == 0 {
        return Err(ConfigError::invalid(
            "[child.health].failures",
            0,
            "must be at least 1",
        ));
    }
    // A follower polls at least once every 1.2 * acquire_interval; twice that lets one win.
    let minimum = acquire_interval.saturating_mul(2);
    let cooldown = h.cooldown.unwrap_or(
        acquire_interval
            .saturating_mul(5)
            .max(Duration::from_secs(10)),
    );
    if cooldown < minimum || h.cooldown.is_some_and(|c| c > MAX_HEALTH_WAIT) {
        return Err(ConfigError::invalid(
            "[child.health].cooldown",
            show(cooldown),
            format!(
                "must be at least 2 * [lease].acquire_interval ({}), so that a healthy follower \
                 gets the lease first, and at most 24h",
                humantime::format_duration(minimum)
            ),
        ));
    }
    Ok(HealthSettings {
        probe,
        interval: h.interval,
        timeout: h.timeout,
        failures: h.failures,
        start_period: h.start_period,
        cooldown,
    })
}

/// `[child].crash_backoff` ("off", or 100 ms to 1 h), `crash_backoff_max` (from
/// `crash_backoff` to 1 h) and `crash_window` (1 s to 24 h).
fn crash_backoff(c: &ChildConfig) -> Result<Option<CrashBackoff>, ConfigError> {
    let show = |d: Duration| format!("{:?}", humantime::format_duration(d).to_string());
    let first = match c.crash_backoff.as_deref().map(str::trim) {
        Some(off) if off.eq_ignore_ascii_case("off") => return Ok(None),
        None => DEFAULT_CRASH_BACKOFF,
        Some(value) => humantime::parse_duration(value)
            .ok()
            .filter(|d| (MIN_CRASH_BACKOFF..=MAX_CRASH_BACKOFF).contains(d))
            .ok_or_else(|| {
                ConfigError::invalid(
                    "[child].crash_backoff",
                    format!("{value:?}"),
                    "must be \"off\" or a duration between 100ms and 1h (e.g. \"1s\")",
                )
            })?,
    };
    if c.crash_backoff_max < first || c.crash_backoff_max > MAX_CRASH_BACKOFF {
        return Err(ConfigError::invalid(
            "[child].crash_backoff_max",
            show(c.crash_backoff_max),
            format!(
                "must be at least crash_backoff ({}) and at most 1h",
                humantime::format_duration(first)
            ),
        ));
    }
    if c.crash_window < MIN_CRASH_WINDOW || c.crash_window > MAX_HEALTH_WAIT {
        return Err(ConfigError::invalid(
            "[child].crash_window",
            show(c.crash_window),
            "must be between 1s and 24h",
        ));
    }
    Ok(Some(CrashBackoff {
        first,
        max: c.crash_backoff_max,
        window: c.crash_window,
    }))
}

/// Accepts `SIGTERM`, `TERM` and `sigterm`.
pub fn parse_signal(name: &str) -> Option<nix::sys::signal::Signal> {
    let upper = name.trim().to_ascii_uppercase();
    let full = if upper.starts_with("SIG") {
        upper
    } else {
        format!("SIG{upper}")
    };
    full.parse().ok()
}
