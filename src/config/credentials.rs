//! Where the storage credential comes from: exactly one source among the config's keys, its
//! `*_file` keys and the standard Azure environment variables; connection strings parsed without
//! ever echoing them; Microsoft Entra ID token sources; the endpoint rules (no plain http off
//! loopback, no query string); and warnings for secret files others can read.

use super::error::ConfigError;
use super::origin::Origins;
use super::programs::find_in_path;
use super::schema::StorageConfig;
use crate::secret::Secret;
use crate::store::target::{
    ConnectionString, Credential, EntraKind, IdentityEndpoint, InvalidTarget, StorageTarget,
    TokenSource, account_from_endpoint, check_blob, check_container, check_endpoint, is_base64,
};
use std::path::{Path, PathBuf};

/// The environment variables the Azure tools use for storage credentials. leasehold reads them
/// as credential sources and removes them from the child's environment.
pub const ENV_CONNECTION_STRING: &str = "AZURE_STORAGE_CONNECTION_STRING";
pub const ENV_ACCOUNT_KEY: &str = "AZURE_STORAGE_KEY";
pub const ENV_SAS_TOKEN: &str = "AZURE_STORAGE_SAS_TOKEN";
pub const ENV_ACCOUNT: &str = "AZURE_STORAGE_ACCOUNT";
/// Every `AZURE_STORAGE_*` variable leasehold reads; none of them reaches the child unless
/// `[child].inherit_storage_credentials = true`. They give `[storage]`'s account and
/// credential only: a replica's come from its table alone.
pub const STORAGE_ENV_VARS: [&str; 4] = [
    ENV_CONNECTION_STRING,
    ENV_ACCOUNT_KEY,
    ENV_SAS_TOKEN,
    ENV_ACCOUNT,
];

/// Which table an account's keys are in: `[storage]`, the one account (its keys may also be
/// given by flags, its credential by the standard variables), or the n-th `[[storage.replica]]`
/// (counted from 1), whose keys come from its table alone. Messages name the keys by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Table {
    Storage,
    Replica(usize),
}

impl Table {
    /// The table as messages call it: `[storage]`, `[storage.replica 2]`.
    pub fn name(self) -> String {
        match self {
            Self::Storage => "[storage]".to_owned(),
            Self::Replica(n) => format!("[storage.replica {n}]"),
        }
    }

    /// Key `name` of this table as the file writes it: `[storage].account`,
    /// `[storage.replica 2].account`.
    pub fn key(self, name: &str) -> String {
        format!("{}.{name}", self.name())
    }

    /// Key `name` of this table as messages call it: by its flag when one gave it (`origins`;
    /// flags give only `[storage]`'s keys), else as the file writes it.
    pub fn named(self, origins: &Origins, name: &str) -> String {
        origins.name(&self.key(name))
    }

    /// A rule of the storage target broken by this table's endpoint: storage's rules name
    /// `[storage]`'s keys, a replica's are its own table's.
    fn target_error(self, e: InvalidTarget) -> ConfigError {
        match (self, ConfigError::from(e)) {
            (Self::Replica(_), ConfigError::Invalid { key, value, rule }) => {
                let own = |text: &str| text.replace("[storage].", &self.key(""));
                ConfigError::Invalid {
                    key: own(&key),
                    value,
                    rule: own(&rule),
                }
            }
            (_, e) => e,
        }
    }
}

/// The variables of the Azure identity libraries (the same names in every Azure SDK), read for
/// the Entra ID credentials. The AKS workload identity webhook sets the first four.
pub const ENV_TENANT_ID: &str = "AZURE_TENANT_ID";
pub const ENV_CLIENT_ID: &str = "AZURE_CLIENT_ID";
pub const ENV_FEDERATED_TOKEN_FILE: &str = "AZURE_FEDERATED_TOKEN_FILE";
pub const ENV_AUTHORITY_HOST: &str = "AZURE_AUTHORITY_HOST";
pub const ENV_CLIENT_SECRET: &str = "AZURE_CLIENT_SECRET";
/// App Service, Functions and Container Apps publish their managed identity endpoint here.
pub const ENV_IDENTITY_ENDPOINT: &str = "IDENTITY_ENDPOINT";
pub const ENV_IDENTITY_HEADER: &str = "IDENTITY_HEADER";
/// Replaces the IMDS host (`http://169.254.169.254`), as in the other Azure SDKs.
pub const ENV_IMDS_HOST: &str = "AZURE_POD_IDENTITY_AUTHORITY_HOST";

const DEFAULT_AUTHORITY_HOST: &str = "https://login.microsoftonline.com/";
const DEFAULT_IMDS_HOST: &str = "http://169.254.169.254";
const IMDS_TOKEN_PATH: &str = "/metadata/identity/oauth2/token";

/// The error for more than one credential: each source, and when the environment gives one
/// beside the file or the flags (an `az` user's exported `AZURE_STORAGE_CONNECTION_STRING`), how
/// to pick either.
fn too_many(found: &[Source]) -> String {
    let names: Vec<&str> = found.iter().map(Source::name).collect();
    let from_env =
        |name: &&str| [ENV_CONNECTION_STRING, ENV_ACCOUNT_KEY, ENV_SAS_TOKEN].contains(name);
    let (variables, given): (Vec<&str>, Vec<&str>) = names.iter().copied().partition(from_env);
    if variables.is_empty() || given.is_empty() {
        return format!(
            "more than one storage credential is configured ({}); keep exactly one",
            names.join(", ")
        );
    }
    let unset: Vec<String> = variables.iter().map(|v| format!("-u {v}")).collect();
    let (given, variables) = (given.join(", "), variables.join(", "));
    format!(
        "more than one storage credential: {given}, and {variables} from the environment \
         (the az CLI reads it too); keep exactly one: to use {given}, start leasehold without \
         the variable (`env {} leasehold ...`, or unset it where leasehold is started: the \
         shell, the unit, the pod); to use the variable, remove {given}",
        unset.join(" "),
    )
}

/// Where the one credential comes from, as found before it is checked: the key, flag or
/// variable it came from, as shown in errors, and the credential.
enum Source {
    ConnectionString(String, Secret),
    AccessKey(String, Secret),
    SasToken(String, Secret),
    /// Named by `[storage].credential = "kind"` or `--credential kind`.
    Entra(String, EntraKind),
}

impl Source {
    /// The key, flag or variable it came from, as shown in errors.
    fn name(&self) -> &str {
        match self {
            Self::ConnectionString(n, _)
            | Self::AccessKey(n, _)
            | Self::SasToken(n, _)
            | Self::Entra(n, _) => n,
        }
    }
}

impl StorageConfig {
    /// Finds exactly one credential source and the endpoint it belongs to, for the account
    /// whose keys are in `table` (a replica's `[storage]`, see `replicas`, holds its keys and the
    /// shared container and blob). Secret files that others may read add to `warnings`. Errors
    /// name each key as `origins` says (by its flag when the value came from one).
    pub(super) fn resolve(
        &self,
        table: Table,
        env: &dyn Fn(&str) -> Option<String>,
        origins: &Origins,
        warnings: &mut Vec<String>,
    ) -> Result<StorageTarget, ConfigError> {
        let blob = self.blob_name(origins)?;
        // A replica's account and credential are in its table: none comes from a variable.
        let var = |name: &str| {
            env(name)
                .filter(|v| !v.trim().is_empty())
                .filter(|_| table == Table::Storage || !STORAGE_ENV_VARS.contains(&name))
        };
        let source = self.one_source(table, origins, &var, warnings)?;
        let (account, endpoint, credential) = self.credential(table, source, origins, &var)?;
        let endpoint = endpoint.trim_end_matches('/').to_owned();
        check_endpoint(&endpoint, self.allow_insecure_http).map_err(|e| table.target_error(e))?;
        if let Credential::Entra { kind, .. } = &credential
            && !endpoint.starts_with("https://")
        {
            return Err(ConfigError::invalid(
                &table.key("endpoint"),
                format!("{endpoint:?}"),
                format!(
                    "credential {:?} needs an https endpoint: storage refuses Entra ID tokens \
                     over plain http",
                    kind.as_str()
                ),
            ));
        }
        let ca_certificates = match &self.ca_file {
            Some(path) => Some((path.clone(), read_ca_file(&table.key("ca_file"), path)?)),
            None => None,
        };
        Ok(StorageTarget {
            account,
            endpoint,
            credential,
            ca_certificates,
            container: self.container.clone(),
            blob,
            create_if_missing: self.create_if_missing,
        })
    }

    /// The container's and the blob's names, checked; the blob has no default.
    fn blob_name(&self, origins: &Origins) -> Result<String, ConfigError> {
        check_container(&self.container)?;
        let Some(blob) = &self.blob else {
            let example = if origins.file().is_some() {
                "blob = \"my-service\""
            } else {
                "--blob my-service"
            };
            return Err(ConfigError::Missing {
                key: "[storage].blob".to_owned(),
                rule: format!("name the lease blob; one blob per leadership group, e.g. {example}"),
            });
        };
        check_blob(blob)?;
        Ok(blob.clone())
    }

    /// Every place a credential can come from, of which exactly one may be set: that one.
    /// `[storage].client_id` must go with a credential that uses it.
    fn one_source(
        &self,
        table: Table,
        origins: &Origins,
        var: &dyn Fn(&str) -> Option<String>,
        warnings: &mut Vec<String>,
    ) -> Result<Source, ConfigError> {
        let mut found = self.sources(table, origins, var, warnings)?;
        if found.len() > 1 {
            return Err(ConfigError::Credentials(too_many(&found)));
        }
        let Some(source) = found.pop() else {
            return Err(ConfigError::Credentials(if let Table::Replica(_) = table {
                format!(
                    "no storage credential is configured in {}; set its connection_string, \
                     connection_string_file, access_key_file, sas_token_file or credential \
                     (Entra ID): each replica names its own",
                    table.name()
                )
            } else if origins.file().is_some() {
                format!(
                    "no storage credential is configured; set [storage].connection_string \
                     (\"UseDevelopmentStorage=true\" for Azurite), connection_string_file, \
                     access_key_file, sas_token_file or credential (Entra ID), or one of \
                     {ENV_CONNECTION_STRING}, {ENV_ACCOUNT_KEY}, {ENV_SAS_TOKEN}"
                )
            } else {
                format!(
                    "no storage credential is given; set {ENV_CONNECTION_STRING} \
                     (\"UseDevelopmentStorage=true\" for Azurite), {ENV_ACCOUNT_KEY} or \
                     {ENV_SAS_TOKEN}, or pass --connection-string-file, --access-key-file, \
                     --sas-token-file or --credential (Entra ID), or use a config file (-c)"
                )
            }));
        };
        let uses_client_id = matches!(
            source,
            Source::Entra(
                _,
                EntraKind::ManagedIdentity | EntraKind::WorkloadIdentity | EntraKind::Default
            )
        );
        if self.client_id.is_some() && !uses_client_id {
            return Err(ConfigError::Credentials(format!(
                "{} only applies to credential \"managed-identity\", \
                 \"workload-identity\" or \"default\", not to {}",
                table.named(origins, "client_id"),
                source.name()
            )));
        }
        Ok(source)
    }

    /// Every credential set: the config's keys, their `*_file` keys (a secret file others can
    /// read adds to `warnings`), the standard variables, and `credential` (Entra ID).
    fn sources(
        &self,
        table: Table,
        origins: &Origins,
        var: &dyn Fn(&str) -> Option<String>,
        warnings: &mut Vec<String>,
    ) -> Result<Vec<Source>, ConfigError> {
        let mut found: Vec<Source> = Vec::new();
        if let Some(cs) = &self.connection_string {
            let key = table.named(origins, "connection_string");
            found.push(Source::ConnectionString(key, cs.clone()));
        }
        // Each secret also comes from a file, or from a variable.
        type SourceOf = fn(String, Secret) -> Source;
        let secrets: [(&Option<PathBuf>, &str, &str, SourceOf); 3] = [
            (
                &self.connection_string_file,
                "connection_string_file",
                ENV_CONNECTION_STRING,
                Source::ConnectionString,
            ),
            (
                &self.access_key_file,
                "access_key_file",
                ENV_ACCOUNT_KEY,
                Source::AccessKey,
            ),
            (
                &self.sas_token_file,
                "sas_token_file",
                ENV_SAS_TOKEN,
                Source::SasToken,
            ),
        ];
        for (file, file_key, variable, source) in secrets {
            if let Some(path) = file {
                let key = table.named(origins, file_key);
                let secret = read_secret_file(&key, path)?;
                if holds_real_secret(secret.expose()) {
                    warnings.extend(readable_by_others(path, &key));
                }
                found.push(source(key, secret));
            }
            if let Some(v) = var(variable) {
                found.push(source(variable.to_owned(), Secret::new(v)));
            }
        }
        if let Some(kind) = self.credential {
            let shown = match origins.flag(&table.key("credential")) {
                Some(flag) => format!("{flag} {}", kind.as_str()),
                None => format!("{} = {:?}", table.key("credential"), kind.as_str()),
            };
            found.push(Source::Entra(shown, kind));
        }
        Ok(found)
    }

    /// The account, the endpoint and the credential of `source`: a connection string names all
    /// three; a key, a SAS token or Entra ID take the account and endpoint from the config.
    fn credential(
        &self,
        table: Table,
        source: Source,
        origins: &Origins,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(String, String, Credential), ConfigError> {
        if let Source::ConnectionString(source, secret) = source {
            if self.account.is_some() || self.endpoint.is_some() {
                return Err(ConfigError::Credentials(format!(
                    "{source} already names the account and endpoint; remove {} and {}",
                    table.named(origins, "account"),
                    table.named(origins, "endpoint")
                )));
            }
            let cs = ConnectionString::parse(secret.expose()).map_err(|rule| {
                ConfigError::Credentials(format!(
                    "{source} is not a valid connection string: {rule}"
                ))
            })?;
            if let Credential::SasToken(t) = &cs.credential {
                check_sas(&source, t.expose())?;
            }
            return Ok((cs.account, cs.endpoint, cs.credential));
        }
        let (account, endpoint) = self.account_and_endpoint(table, source.name(), origins, var)?;
        let credential = match source {
            Source::SasToken(source, secret) => {
                let token = secret.expose().trim().trim_start_matches('?');
                check_sas(&source, token)?;
                Credential::SasToken(Secret::new(token.to_owned()))
            }
            Source::AccessKey(source, secret) => {
                check_account_key(&source, secret.expose())?;
                Credential::AccessKey(Secret::new(secret.expose().trim().to_owned()))
            }
            Source::Entra(source, kind) => Credential::Entra {
                kind,
                sources: self.token_sources(&source, kind, var)?,
            },
            Source::ConnectionString(..) => unreachable!("handled above"),
        };
        Ok((account, endpoint, credential))
    }

    /// The account and endpoint for a credential that does not name them itself.
    fn account_and_endpoint(
        &self,
        table: Table,
        source: &str,
        origins: &Origins,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(String, String), ConfigError> {
        let (account_key, endpoint_key) = (
            table.named(origins, "account"),
            table.named(origins, "endpoint"),
        );
        let account = self.account.clone().or_else(|| var(ENV_ACCOUNT));
        match (account, &self.endpoint) {
            (Some(a), Some(e)) => Ok((a, e.clone())),
            (Some(a), None) => {
                let e = format!("https://{a}.blob.core.windows.net");
                Ok((a, e))
            }
            (None, Some(e)) => Ok((
                account_from_endpoint(e).ok_or_else(|| ConfigError::Missing {
                    key: table.key("account"),
                    rule: format!("cannot tell the account name from endpoint {e:?}; set it"),
                })?,
                e.clone(),
            )),
            (None, None) => Err(ConfigError::Missing {
                key: table.key("account"),
                rule: match table {
                    Table::Storage => format!(
                        "{source} needs the storage account: set {account_key} \
                         (or {ENV_ACCOUNT}) or {endpoint_key}"
                    ),
                    Table::Replica(_) => format!(
                        "{source} needs the storage account: set {account_key} or {endpoint_key}"
                    ),
                },
            }),
        }
    }

    /// Resolves `credential = kind` into the token sources to try, reading the variables the
    /// Azure identity libraries use. Whatever can be checked before start-up is checked here.
    fn token_sources(
        &self,
        wanted: &str,
        kind: EntraKind,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Vec<TokenSource>, ConfigError> {
        let az_on_path =
            || var("PATH").is_some_and(|path| find_in_path("az", path.as_ref()).is_some());
        match kind {
            EntraKind::ManagedIdentity => Ok(vec![managed_identity(var, self.client_id.clone())]),
            EntraKind::WorkloadIdentity => Ok(vec![self.workload_identity(wanted, var)?]),
            EntraKind::AzureCli => {
                if az_on_path() {
                    Ok(vec![TokenSource::AzureCli])
                } else {
                    Err(ConfigError::Credentials(format!(
                        "{wanted} needs the Azure CLI: no az in PATH; install it and run az login"
                    )))
                }
            }
            EntraKind::Default => {
                // The order of DefaultAzureCredential in the other Azure SDKs.
                let mut sources = Vec::new();
                if let (Some(tenant_id), Some(client_id)) =
                    (var(ENV_TENANT_ID), self.client_id(var))
                {
                    if let Some(secret) = var(ENV_CLIENT_SECRET) {
                        sources.push(TokenSource::ClientSecret {
                            tenant_id: tenant_id.clone(),
                            client_id: client_id.clone(),
                            secret: Secret::new(secret),
                            authority_host: authority_host(var),
                        });
                    }
                    if let Some(file) = var(ENV_FEDERATED_TOKEN_FILE) {
                        sources.push(TokenSource::WorkloadIdentity {
                            tenant_id,
                            client_id,
                            token_file: PathBuf::from(file),
                            authority_host: authority_host(var),
                        });
                    }
                }
                sources.push(managed_identity(var, self.client_id(var)));
                if az_on_path() {
                    sources.push(TokenSource::AzureCli);
                }
                Ok(sources)
            }
        }
    }

    /// AKS workload identity: the webhook's variables must all be there, and the token file.
    fn workload_identity(
        &self,
        wanted: &str,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<TokenSource, ConfigError> {
        let mut missing = Vec::new();
        if var(ENV_TENANT_ID).is_none() {
            missing.push(ENV_TENANT_ID);
        }
        if self.client_id(var).is_none() {
            missing.push(ENV_CLIENT_ID);
        }
        if var(ENV_FEDERATED_TOKEN_FILE).is_none() {
            missing.push(ENV_FEDERATED_TOKEN_FILE);
        }
        if !missing.is_empty() {
            return Err(ConfigError::Credentials(format!(
                "{wanted} needs {} in the environment; the AKS workload identity webhook \
                 sets them when the pod has the label azure.workload.identity/use: \"true\" \
                 and its service account the annotation azure.workload.identity/client-id",
                missing.join(", ")
            )));
        }
        let token_file = PathBuf::from(var(ENV_FEDERATED_TOKEN_FILE).unwrap_or_default());
        if let Err(source) = std::fs::metadata(&token_file) {
            return Err(ConfigError::SecretFile {
                key: ENV_FEDERATED_TOKEN_FILE.to_owned(),
                path: token_file,
                source,
            });
        }
        Ok(TokenSource::WorkloadIdentity {
            tenant_id: var(ENV_TENANT_ID).unwrap_or_default(),
            client_id: self.client_id(var).unwrap_or_default(),
            token_file,
            authority_host: authority_host(var),
        })
    }

    /// `[storage].client_id`, or else `AZURE_CLIENT_ID`.
    fn client_id(&self, var: &dyn Fn(&str) -> Option<String>) -> Option<String> {
        self.client_id.clone().or_else(|| var(ENV_CLIENT_ID))
    }
}

/// Where Entra ID tokens are asked for: `AZURE_AUTHORITY_HOST`, or the public cloud's.
fn authority_host(var: &dyn Fn(&str) -> Option<String>) -> String {
    var(ENV_AUTHORITY_HOST).unwrap_or_else(|| DEFAULT_AUTHORITY_HOST.to_owned())
}

/// The managed identity of this machine: App Service's endpoint when it publishes one, IMDS
/// otherwise.
fn managed_identity(
    var: &dyn Fn(&str) -> Option<String>,
    client_id: Option<String>,
) -> TokenSource {
    TokenSource::ManagedIdentity {
        endpoint: match (var(ENV_IDENTITY_ENDPOINT), var(ENV_IDENTITY_HEADER)) {
            (Some(url), Some(header)) => IdentityEndpoint::AppService {
                url,
                header: Secret::new(header),
            },
            _ => IdentityEndpoint::Imds(format!(
                "{}{IMDS_TOKEN_PATH}",
                var(ENV_IMDS_HOST)
                    .unwrap_or_else(|| DEFAULT_IMDS_HOST.to_owned())
                    .trim_end_matches('/')
            )),
        },
        client_id,
    }
}

/// Reads `ca_file` (the key `key`); it must hold at least one PEM certificate.
fn read_ca_file(key: &str, path: &Path) -> Result<Vec<u8>, ConfigError> {
    let pem = std::fs::read(path).map_err(|source| ConfigError::SecretFile {
        key: key.to_owned(),
        path: path.to_owned(),
        source,
    })?;
    if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
        return Err(ConfigError::invalid(
            key,
            path.display(),
            "holds no PEM certificate (-----BEGIN CERTIFICATE-----); give the CA certificate in PEM form",
        ));
    }
    Ok(pem)
}

/// Whether a connection string, key or SAS is worth protecting: everything but Azurite's
/// well-known development key, which Microsoft publishes.
pub(super) fn holds_real_secret(text: &str) -> bool {
    let text = text.trim();
    !(text.is_empty()
        || text.contains(crate::store::target::EMULATOR_KEY)
        || text.eq_ignore_ascii_case("UseDevelopmentStorage=true")
        || text.eq_ignore_ascii_case("UseDevelopmentStorage=true;"))
}

/// A warning when the file at `path` can be read by its group or by others.
pub(super) fn readable_by_others(path: &Path, what: &str) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
    (mode & 0o044 != 0).then(|| {
        format!(
            "{what} {} holds a secret and can be read by {} (mode {mode:04o}); \
             restrict it, e.g. chmod 600",
            path.display(),
            if mode & 0o004 != 0 {
                "every local user"
            } else {
                "its group"
            }
        )
    })
}
fn check_account_key(source: &str, key: &str) -> Result<(), ConfigError> {
    if is_base64(key.trim()) {
        Ok(())
    } else {
        Err(ConfigError::Credentials(format!(
            "the account key from {source} is not valid base64; copy it again from the portal \
             (Storage account > Access keys)"
        )))
    }
}

fn check_sas(source: &str, token: &str) -> Result<(), ConfigError> {
    if token.contains("sig=") {
        Ok(())
    } else {
        Err(ConfigError::Credentials(format!(
            "the SAS token from {source} has no sig= parameter; give the whole token \
             (sv=...&sig=...)"
        )))
    }
}

fn read_secret_file(key: &str, path: &Path) -> Result<Secret, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::SecretFile {
        key: key.to_owned(),
        path: path.to_owned(),
        source,
    })?;
    let text = text.trim();
    if text.is_empty() {
        return Err(ConfigError::invalid(
            key,
            path.display(),
            "the file is empty",
        ));
    }
    Ok(Secret::new(text.to_owned()))
}

#[cfg(all(test, feature = "daemon"))]
mod tests;
