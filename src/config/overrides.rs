//! Overrides: values that replace keys of the file, from the command line (its flags and the
//! per-instance variables) or from a program; a rule broken by one is reported under its flag.

use super::origin::Origins;
use super::schema::{Config, HttpConfig};
use crate::secret::Secret;
use crate::store::target::EntraKind;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Values that replace keys of the file ([`Config::load`]; for the command without a file, the
/// defaults): the command line's (`--blob`, `--lease-duration`, ...), or a program's. A field
/// left `None` (or empty) leaves its key as the file has it. A rule broken by an override's value is reported
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

impl Config {
    /// Applies command-line overrides: each one set replaces its key (and is then named by its
    /// flag in errors).
    pub(crate) fn apply(&mut self, o: &Overrides) {
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
}

/// An override: `value`, if given, replaces `key`'s value, which is then named by its flag.
fn set<T>(slot: &mut T, value: Option<T>, key: &'static str, origins: &mut Origins) {
    if let Some(value) = value {
        *slot = value;
        origins.give(key);
    }
}
