//! `[[storage.replica]]`: the storage accounts of a group whose lease is a majority of leases,
//! one on each account (docs/configuration.md, "A quorum of storage accounts"). Each table names
//! an account and its credential with `[storage]`'s keys and rules (`credentials`); the
//! container, the blob and `create_if_missing` stay in `[storage]`, shared by every replica.
//!
//! The rules of the set: 3 or 5 replicas, each an account of its own; `[storage]` then names no
//! account or credential of its own (nor do the flags or the `AZURE_STORAGE_*` variables, which
//! could not say which replica they meant); no slots. Each is refused with one line.

use super::credentials::{STORAGE_ENV_VARS, Table};
use super::error::ConfigError;
use super::origin::Origins;
use super::schema::{Config, ReplicaConfig, StorageConfig};
use crate::store::target::StorageTarget;
use leasehold_core::quorum::ReplicaSet;

/// The keys of `[storage]` that name its own account or credential: with replicas, each
/// replica's table has them instead.
const ACCOUNT_KEYS: [&str; 10] = [
    "connection_string",
    "connection_string_file",
    "account",
    "endpoint",
    "access_key_file",
    "sas_token_file",
    "credential",
    "client_id",
    "ca_file",
    "allow_insecure_http",
];

impl Config {
    /// The replicas' storage targets, each checked and its credential resolved, in the order of
    /// the file; none without `[[storage.replica]]`. Secret files that others may read add to
    /// `warnings`.
    pub(super) fn replicas(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
        warnings: &mut Vec<String>,
    ) -> Result<Vec<StorageTarget>, ConfigError> {
        let replicas = &self.storage.replica;
        if replicas.is_empty() {
            return Ok(Vec::new());
        }
        check_count(replicas.len())?;
        self.storage.no_account_beside_replicas(&self.origins)?;
        no_variable_beside_replicas(env)?;
        if self.lease.slots > 1 {
            return Err(ConfigError::invalid(
                "[lease].slots",
                self.lease.slots,
                "slots with replicas are not supported: remove slots (one leader, on a majority \
                 of the [[storage.replica]] accounts), or the replicas (slots on one [storage] \
                 account)",
            ));
        }
        let mut targets: Vec<StorageTarget> = Vec::with_capacity(replicas.len());
        for (i, replica) in replicas.iter().enumerate() {
            let table = Table::Replica(i + 1);
            let target = self.storage.with_account_of(replica).resolve(
                table,
                env,
                &self.origins,
                warnings,
            )?;
            if let Some(first) = targets.iter().position(|t| same_account(t, &target)) {
                return Err(ConfigError::invalid(
                    &table.name(),
                    format!("account {:?} at {:?}", target.account, target.endpoint),
                    format!(
                        "the same account as {}: each replica must be an account of its own \
                         (one listed twice would count twice towards the majority); name \
                         another account, or remove this table",
                        Table::Replica(first + 1).name()
                    ),
                ));
            }
            targets.push(target);
        }
        Ok(targets)
    }
}

/// The replica set of `targets`, in their order, as the rule *One replica set* sees it: each
/// account named by its blob endpoint, letter case aside (as [`same_account`] compares them;
/// never by its credential: one account reached with two credentials is one replica). `None`
/// without replicas.
pub(crate) fn replica_set(targets: &[StorageTarget]) -> Option<ReplicaSet> {
    let accounts: Vec<String> = targets
        .iter()
        .map(|t| t.endpoint.to_ascii_lowercase())
        .collect();
    // The config let through only 3 or 5, which the core takes.
    ReplicaSet::new(&accounts)
        .ok()
        .filter(|_| !targets.is_empty())
}

/// 3 or 5: a majority of `n` accounts survives `(n - 1) / 2` of them down, so an even count
/// survives no more than the odd count below it, with one account more to pay for.
fn check_count(n: usize) -> Result<(), ConfigError> {
    let why = match n {
        3 | 5 => return Ok(()),
        1 => "one account is no quorum: configure it in [storage] itself, without \
              [[storage.replica]], or add two more"
            .to_owned(),
        n if n % 2 == 0 => {
            let down = match (n - 1) / 2 {
                0 => "no account down".to_owned(),
                1 => "one account down".to_owned(),
                k => format!("{k} accounts down"),
            };
            format!(
                "a majority of {n} is {}, so {n} accounts survive {down}, no more than {} {}; \
                 use 3 (one may be down) or 5 (two may)",
                n / 2 + 1,
                n - 1,
                if n == 2 { "does" } else { "do" }
            )
        }
        n => format!(
            "{n} accounts would survive {} down, but every lease operation goes to each of \
             them; 5 survive two regions down: use 3 or 5",
            (n - 1) / 2
        ),
    };
    Err(ConfigError::invalid(
        "[[storage.replica]]",
        tables(n),
        format!("must be 3 or 5: {why}"),
    ))
}

/// How many `[[storage.replica]]` tables there are, as the lines say it.
fn tables(n: usize) -> String {
    match n {
        1 => "1 table".to_owned(),
        n => format!("{n} tables"),
    }
}

impl StorageConfig {
    /// With replicas, `[storage]` names no account of its own (from the file or a flag): each
    /// replica's table does, and which would this one be?
    fn no_account_beside_replicas(&self, origins: &Origins) -> Result<(), ConfigError> {
        let set = [
            self.connection_string.is_some(),
            self.connection_string_file.is_some(),
            self.account.is_some(),
            self.endpoint.is_some(),
            self.access_key_file.is_some(),
            self.sas_token_file.is_some(),
            self.credential.is_some(),
            self.client_id.is_some(),
            self.ca_file.is_some(),
            self.allow_insecure_http,
        ];
        let named: Vec<String> = ACCOUNT_KEYS
            .iter()
            .zip(set)
            .filter(|(_, set)| *set)
            .map(|(key, _)| Table::Storage.named(origins, key))
            .collect();
        if named.is_empty() {
            return Ok(());
        }
        Err(ConfigError::Credentials(format!(
            "{} beside [[storage.replica]]: with replicas each account and its credential go in \
             its own [[storage.replica]] table, and [storage] keeps only what they share \
             (container, blob, create_if_missing); move {} into the replica tables, or remove \
             the replicas to use one account",
            named.join(", "),
            if named.len() == 1 { "it" } else { "them" },
        )))
    }

    /// The `[storage]` of replica `r`'s account: its keys, with the shared container and blob.
    fn with_account_of(&self, r: &ReplicaConfig) -> StorageConfig {
        StorageConfig {
            connection_string: r.connection_string.clone(),
            connection_string_file: r.connection_string_file.clone(),
            account: r.account.clone(),
            endpoint: r.endpoint.clone(),
            access_key_file: r.access_key_file.clone(),
            sas_token_file: r.sas_token_file.clone(),
            credential: r.credential,
            client_id: r.client_id.clone(),
            ca_file: r.ca_file.clone(),
            allow_insecure_http: r.allow_insecure_http,
            container: self.container.clone(),
            blob: self.blob.clone(),
            create_if_missing: self.create_if_missing,
            replica: Vec::new(),
        }
    }
}

/// The standard variables give one account's credential: beside replicas, whose?
fn no_variable_beside_replicas(env: &dyn Fn(&str) -> Option<String>) -> Result<(), ConfigError> {
    let set: Vec<&str> = STORAGE_ENV_VARS
        .into_iter()
        .filter(|name| env(name).is_some_and(|v| !v.trim().is_empty()))
        .collect();
    if set.is_empty() {
        return Ok(());
    }
    let unset: Vec<String> = set.iter().map(|v| format!("-u {v}")).collect();
    Err(ConfigError::Credentials(format!(
        "{} from the environment beside [[storage.replica]]: with replicas each account and its \
         credential come from its own table, never from a variable; start leasehold without it \
         (`env {} leasehold ...`, or unset it where leasehold is started), or remove the replicas",
        set.join(", "),
        unset.join(" "),
    )))
}

/// Two targets on the same account: the same account name at the same endpoint (letter case
/// aside, as storage reads them).
fn same_account(a: &StorageTarget, b: &StorageTarget) -> bool {
    a.account.eq_ignore_ascii_case(&b.account) && a.endpoint.eq_ignore_ascii_case(&b.endpoint)
}

#[cfg(all(test, feature = "daemon"))]
mod tests;
