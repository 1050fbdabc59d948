//! Where the storage credential comes from: exactly one source among the config's keys, its
//! `*_file` keys and the standard Azure environment variables; connection strings parsed without
//! ever echoing them; Microsoft Entra ID token sources; the endpoint rules (no plain http off
//! loopback, no query string); and warnings for secret files others can read.

use super::{ConfigError, Origins, StorageConfig, find_in_path};
use crate::secret::Secret;
use crate::store::target::{
    ConnectionString, Credential, EntraKind, IdentityEndpoint, StorageTarget, TokenSource,
    account_from_endpoint, check_blob, check_container, check_endpoint, is_base64,
};
use std::path::{Path, PathBuf};

/// The environment variables the Azure tools use for storage credentials. leasehold reads them
/// as credential sources and removes them from the child's environment.
pub const ENV_CONNECTION_STRING: &str = "AZURE_STORAGE_CONNECTION_STRING";
pub const ENV_ACCOUNT_KEY: &str = "AZURE_STORAGE_KEY";
pub const ENV_SAS_TOKEN: &str = "AZURE_STORAGE_SAS_TOKEN";
pub const ENV_ACCOUNT: &str = "AZURE_STORAGE_ACCOUNT";
/// Every `AZURE_STORAGE_*` variable leasehold reads; none of them reaches the child unless
/// `[child].inherit_storage_credentials = true`.
#[cfg(feature = "daemon")]
pub const STORAGE_ENV_VARS: [&str; 4] = [
    ENV_CONNECTION_STRING,
    ENV_ACCOUNT_KEY,
    ENV_SAS_TOKEN,
    ENV_ACCOUNT,
];

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
    /// Finds exactly one credential source and the endpoint it belongs to. Secret files that
    /// others may read add to `warnings`. Errors name each key as `origins` says (by its flag
    /// when the value came from one).
    pub(super) fn resolve(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
        origins: &Origins,
        warnings: &mut Vec<String>,
    ) -> Result<StorageTarget, ConfigError> {
        let name = |key: &str| origins.name(key);
        let from_file = origins.file().is_some();
        check_container(&self.container)?;
        let blob = match &self.blob {
            Some(b) => {
                check_blob(b)?;
                b.clone()
            }
            None => {
                let example = if from_file {
                    "blob = \"my-service\""
                } else {
                    "--blob my-service"
                };
                return Err(ConfigError::Missing {
                    key: "[storage].blob".to_owned(),
                    rule: format!(
                        "name the lease blob; one blob per leadership group, e.g. {example}"
                    ),
                });
            }
        };
        let var = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        let mut secret_file = |key: &str, path: &Path| -> Result<(String, Secret), ConfigError> {
            let key = name(key);
            let secret = read_secret_file(&key, path)?;
            if holds_real_secret(secret.expose()) {
                warnings.extend(readable_by_others(path, &key));
            }
            Ok((key, secret))
        };

        // Every place a credential can come from; exactly one may be set.
        let mut found: Vec<Source> = Vec::new();
        if let Some(cs) = &self.connection_string {
            let key = name("[storage].connection_string");
            found.push(Source::ConnectionString(key, cs.clone()));
        }
        // Each secret also comes from a file, or from a variable.
        type SourceOf = fn(String, Secret) -> Source;
        let secrets: [(&Option<PathBuf>, &str, &str, SourceOf); 3] = [
            (
                &self.connection_string_file,
                "[storage].connection_string_file",
                ENV_CONNECTION_STRING,
                Source::ConnectionString,
            ),
            (
                &self.access_key_file,
                "[storage].access_key_file",
                ENV_ACCOUNT_KEY,
                Source::AccessKey,
            ),
            (
                &self.sas_token_file,
                "[storage].sas_token_file",
                ENV_SAS_TOKEN,
                Source::SasToken,
            ),
        ];
        for (file, file_key, variable, source) in secrets {
            if let Some(path) = file {
                let (key, secret) = secret_file(file_key, path)?;
                found.push(source(key, secret));
            }
            if let Some(v) = var(variable) {
                found.push(source(variable.to_owned(), Secret::new(v)));
            }
        }
        if let Some(kind) = self.credential {
            let shown = match origins.flag("[storage].credential") {
                Some(flag) => format!("{flag} {}", kind.as_str()),
                None => format!("[storage].credential = {:?}", kind.as_str()),
            };
            found.push(Source::Entra(shown, kind));
        }
        if found.len() > 1 {
            let names: Vec<&str> = found.iter().map(Source::name).collect();
            return Err(ConfigError::Credentials(format!(
                "more than one storage credential is configured ({}); keep exactly one",
                names.join(", ")
            )));
        }
        let Some(source) = found.pop() else {
            return Err(ConfigError::Credentials(if from_file {
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
        if self.client_id.is_some()
            && !matches!(
                source,
                Source::Entra(
                    _,
                    EntraKind::ManagedIdentity | EntraKind::WorkloadIdentity | EntraKind::Default
                )
            )
        {
            return Err(ConfigError::Credentials(format!(
                "{} only applies to credential \"managed-identity\", \
                 \"workload-identity\" or \"default\", not to {}",
                name("[storage].client_id"),
                source.name()
            )));
        }

        let (account, endpoint, credential) = match source {
            Source::ConnectionString(source, secret) => {
                if self.account.is_some() || self.endpoint.is_some() {
                    return Err(ConfigError::Credentials(format!(
                        "{source} already names the account and endpoint; remove {} and {}",
                        name("[storage].account"),
                        name("[storage].endpoint")
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
                (cs.account, cs.endpoint, cs.credential)
            }
            other => {
                let (account, endpoint) = self.account_and_endpoint(other.name(), origins, &var)?;
                let credential = match other {
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
                        sources: self.token_sources(&source, kind, &var)?,
                    },
                    Source::ConnectionString(..) => unreachable!("handled above"),
                };
                (account, endpoint, credential)
            }
        };
        let endpoint = endpoint.trim_end_matches('/').to_owned();
        check_endpoint(&endpoint, self.allow_insecure_http)?;
        match &credential {
            Credential::Entra { kind, .. } if !endpoint.starts_with("https://") => {
                return Err(ConfigError::invalid(
                    "[storage].endpoint",
                    format!("{endpoint:?}"),
                    format!(
                        "credential {:?} needs an https endpoint: storage refuses Entra ID \
                         tokens over plain http",
                        kind.as_str()
                    ),
                ));
            }
            _ => {}
        }
        let ca_certificates = match &self.ca_file {
            Some(path) => Some((path.clone(), read_ca_file(path)?)),
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

    /// The account and endpoint for a credential that does not name them itself.
    fn account_and_endpoint(
        &self,
        source: &str,
        origins: &Origins,
        var: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(String, String), ConfigError> {
        let (account_key, endpoint_key) = (
            origins.name("[storage].account"),
            origins.name("[storage].endpoint"),
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
                    key: "[storage].account".to_owned(),
                    rule: format!("cannot tell the account name from endpoint {e:?}; set it"),
                })?,
                e.clone(),
            )),
            (None, None) => Err(ConfigError::Missing {
                key: "[storage].account".to_owned(),
                rule: format!(
                    "{source} needs the storage account: set {account_key} \
                     (or {ENV_ACCOUNT}) or {endpoint_key}"
                ),
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
        let authority_host =
            || var(ENV_AUTHORITY_HOST).unwrap_or_else(|| DEFAULT_AUTHORITY_HOST.to_owned());
        let managed_identity = |client_id: Option<String>| TokenSource::ManagedIdentity {
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
        };
        let az_on_path =
            || var("PATH").is_some_and(|path| find_in_path("az", path.as_ref()).is_some());
        let client_id = || self.client_id.clone().or_else(|| var(ENV_CLIENT_ID));
        match kind {
            EntraKind::ManagedIdentity => Ok(vec![managed_identity(self.client_id.clone())]),
            EntraKind::WorkloadIdentity => {
                let mut missing = Vec::new();
                if var(ENV_TENANT_ID).is_none() {
                    missing.push(ENV_TENANT_ID);
                }
                if client_id().is_none() {
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
                Ok(vec![TokenSource::WorkloadIdentity {
                    tenant_id: var(ENV_TENANT_ID).unwrap_or_default(),
                    client_id: client_id().unwrap_or_default(),
                    token_file,
                    authority_host: authority_host(),
                }])
            }
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
                if let (Some(tenant_id), Some(client_id)) = (var(ENV_TENANT_ID), client_id()) {
                    if let Some(secret) = var(ENV_CLIENT_SECRET) {
                        sources.push(TokenSource::ClientSecret {
                            tenant_id: tenant_id.clone(),
                            client_id: client_id.clone(),
                            secret: Secret::new(secret),
                            authority_host: authority_host(),
                        });
                    }
                    if let Some(file) = var(ENV_FEDERATED_TOKEN_FILE) {
                        sources.push(TokenSource::WorkloadIdentity {
                            tenant_id,
                            client_id,
                            token_file: PathBuf::from(file),
                            authority_host: authority_host(),
                        });
                    }
                }
                sources.push(managed_identity(client_id()));
                if az_on_path() {
                    sources.push(TokenSource::AzureCli);
                }
                Ok(sources)
            }
        }
    }
}

/// Reads `[storage].ca_file`; it must hold at least one PEM certificate.
fn read_ca_file(path: &Path) -> Result<Vec<u8>, ConfigError> {
    let pem = std::fs::read(path).map_err(|source| ConfigError::SecretFile {
        key: "[storage].ca_file".to_owned(),
        path: path.to_owned(),
        source,
    })?;
    if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
        return Err(ConfigError::invalid(
            "[storage].ca_file",
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
mod tests {
    use super::super::testing::{GOOD, load, no_env, refused, validate_with};
    use super::*;
    use crate::config::{Config, Overrides, check_offline};
    use crate::store::target::EMULATOR_KEY;

    #[test]
    fn blob_endpoint_connection_strings_work() {
        let text = GOOD.replace(
            "UseDevelopmentStorage=true",
            &format!(
                "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={EMULATOR_KEY};BlobEndpoint=http://127.0.0.1:12345/devstoreaccount1;"
            ),
        );
        let s = load(&text).unwrap();
        assert_eq!(
            s.group.storage.endpoint,
            "http://127.0.0.1:12345/devstoreaccount1"
        );
        assert_eq!(s.group.storage.account, "devstoreaccount1");
    }

    #[test]
    fn real_account_connection_string_builds_the_public_endpoint() {
        let text = GOOD.replace(
            "UseDevelopmentStorage=true",
            &format!("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={EMULATOR_KEY};EndpointSuffix=core.windows.net"),
        );
        let s = load(&text).unwrap();
        assert_eq!(
            s.group.storage.endpoint,
            "https://acct.blob.core.windows.net"
        );
    }

    #[test]
    fn exactly_one_credential_source() {
        let env =
            |k: &str| (k == ENV_CONNECTION_STRING).then(|| "UseDevelopmentStorage=true".to_owned());
        let cfg = Config::parse(Path::new("t.toml"), GOOD).unwrap();
        let err = cfg.validate(&env).unwrap_err().to_string();
        assert!(err.contains("[storage].connection_string"), "{err}");
        assert!(err.contains(ENV_CONNECTION_STRING), "{err}");

        let none = GOOD.replace("connection_string = \"UseDevelopmentStorage=true\"\n", "");
        let err = refused(&none);
        assert!(err.contains("no storage credential"), "{err}");
    }

    #[test]
    fn secrets_never_appear_in_errors() {
        let secret = "AccountName=a;AccountKey=c2VjcmV0c2VjcmV0c2VjcmV0;Bogus=hunter2";
        let text = GOOD.replace("UseDevelopmentStorage=true", secret);
        let err = refused(&text);
        assert!(
            !err.contains("hunter2") && !err.contains("c2VjcmV0"),
            "{err}"
        );
        let dbg = format!("{:?}", Config::parse(Path::new("t.toml"), &text).unwrap());
        assert!(!dbg.contains("c2VjcmV0"), "{dbg}");
    }

    #[test]
    fn insecure_http_is_refused_off_loopback() {
        let text = GOOD.replace(
            "UseDevelopmentStorage=true",
            &format!("AccountName=a;AccountKey={EMULATOR_KEY};BlobEndpoint=http://azurite:10000/a"),
        );
        assert!(refused(&text).contains("allow_insecure_http"));
        let allowed = text.replace(
            "blob = \"svc\"",
            "blob = \"svc\"\nallow_insecure_http = true",
        );
        assert!(load(&allowed).is_ok());
    }

    /// A config with `[storage]` body `storage` and the witness-free child.
    fn entra(storage: &str) -> String {
        format!("[storage]\n{storage}\nblob = \"svc\"\n[child]\ncommand = [\"true\"]\n")
    }

    fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k: &str| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    #[test]
    fn managed_identity_targets_imds_or_the_app_service_endpoint() {
        let text = entra(
            "credential = \"managed-identity\"\naccount = \"acct\"\nclient_id = \"11111111-2222-3333-4444-555555555555\"",
        );
        let s = validate_with(&text, &no_env).unwrap();
        assert_eq!(
            s.group.storage.endpoint,
            "https://acct.blob.core.windows.net"
        );
        let Credential::Entra { kind, sources } = &s.group.storage.credential else {
            panic!("{:?}", s.group.storage.credential)
        };
        assert_eq!(*kind, EntraKind::ManagedIdentity);
        assert_eq!(
            sources,
            &[TokenSource::ManagedIdentity {
                endpoint: IdentityEndpoint::Imds(
                    "http://169.254.169.254/metadata/identity/oauth2/token".into()
                ),
                client_id: Some("11111111-2222-3333-4444-555555555555".into()),
            }]
        );
        let app = env_of(&[
            (ENV_IDENTITY_ENDPOINT, "http://127.0.0.1:41000/msi/token"),
            (ENV_IDENTITY_HEADER, "h"),
        ]);
        let s = validate_with(&text, &app).unwrap();
        let Credential::Entra { sources, .. } = &s.group.storage.credential else {
            panic!()
        };
        assert!(matches!(
            &sources[0],
            TokenSource::ManagedIdentity { endpoint: IdentityEndpoint::AppService { url, .. }, .. }
                if url == "http://127.0.0.1:41000/msi/token"
        ));
    }

    #[test]
    fn entra_id_needs_an_https_endpoint_and_an_account() {
        let http = entra(
            "credential = \"managed-identity\"\nendpoint = \"http://127.0.0.1:10000/devstoreaccount1\"",
        );
        let err = validate_with(&http, &no_env).unwrap_err().to_string();
        assert!(
            err.contains("[storage].endpoint") && err.contains("https"),
            "{err}"
        );
        let none = entra("credential = \"managed-identity\"");
        let err = validate_with(&none, &no_env).unwrap_err().to_string();
        assert!(err.contains("[storage].account"), "{err}");
        let bogus = entra("credential = \"magic\"\naccount = \"a\"");
        let err = validate_with(&bogus, &no_env).unwrap_err().to_string();
        assert!(
            err.contains("[storage].credential") && err.contains("managed-identity"),
            "{err}"
        );
    }

    #[test]
    fn workload_identity_names_what_the_webhook_did_not_set() {
        let text = entra("credential = \"workload-identity\"\naccount = \"acct\"");
        let err = validate_with(&text, &env_of(&[(ENV_TENANT_ID, "t")]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(ENV_CLIENT_ID) && err.contains(ENV_FEDERATED_TOKEN_FILE),
            "{err}"
        );
        assert!(!err.contains(ENV_TENANT_ID), "{err}");
        assert!(err.contains("azure.workload.identity/use"), "{err}");

        let token = tempfile::NamedTempFile::new().unwrap();
        let file = token.path().to_str().unwrap();
        let env = env_of(&[
            (ENV_TENANT_ID, "t"),
            (ENV_CLIENT_ID, "from-env"),
            (ENV_FEDERATED_TOKEN_FILE, file),
        ]);
        let s = validate_with(&text, &env).unwrap();
        let Credential::Entra { sources, .. } = &s.group.storage.credential else {
            panic!()
        };
        assert_eq!(
            sources,
            &[TokenSource::WorkloadIdentity {
                tenant_id: "t".into(),
                client_id: "from-env".into(),
                token_file: token.path().to_owned(),
                authority_host: DEFAULT_AUTHORITY_HOST.into(),
            }]
        );
        let gone = env_of(&[
            (ENV_TENANT_ID, "t"),
            (ENV_CLIENT_ID, "c"),
            (ENV_FEDERATED_TOKEN_FILE, "/no/such/token"),
        ]);
        let err = validate_with(&text, &gone).unwrap_err().to_string();
        assert!(err.contains("/no/such/token"), "{err}");
    }

    #[test]
    fn azure_cli_needs_az_and_default_chains_what_is_there() {
        let dir = tempfile::tempdir().unwrap();
        let cli = entra("credential = \"azure-cli\"\naccount = \"acct\"");
        let err = validate_with(&cli, &env_of(&[("PATH", dir.path().to_str().unwrap())]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("no az in PATH"), "{err}");
        let az = dir.path().join("az");
        std::fs::write(&az, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&az, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = dir.path().to_str().unwrap();
        assert!(validate_with(&cli, &env_of(&[("PATH", path)])).is_ok());

        let default = entra("credential = \"default\"\naccount = \"acct\"");
        let env = env_of(&[
            ("PATH", path),
            (ENV_TENANT_ID, "t"),
            (ENV_CLIENT_ID, "c"),
            (ENV_CLIENT_SECRET, "s3cret"),
        ]);
        let s = validate_with(&default, &env).unwrap();
        let Credential::Entra { sources, .. } = &s.group.storage.credential else {
            panic!()
        };
        let names: Vec<&str> = sources.iter().map(TokenSource::name).collect();
        assert_eq!(names, ["client secret", "managed identity", "Azure CLI"]);
        assert!(
            s.child.remove_env.iter().any(|v| v == ENV_CLIENT_SECRET),
            "the consumed client secret does not reach the child"
        );
        assert!(!format!("{s:?}").contains("s3cret"));
    }

    #[test]
    fn two_sources_are_both_named_and_client_id_needs_an_identity() {
        let text = entra("credential = \"managed-identity\"\naccount = \"acct\"");
        let err = validate_with(&text, &env_of(&[(ENV_ACCOUNT_KEY, EMULATOR_KEY)]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("[storage].credential = \"managed-identity\"")
                && err.contains(ENV_ACCOUNT_KEY),
            "{err}"
        );
        assert!(!err.contains(EMULATOR_KEY), "{err}");
        let stray = GOOD.replace("blob = \"svc\"", "blob = \"svc\"\nclient_id = \"x\"");
        let err = refused(&stray);
        assert!(err.contains("[storage].client_id"), "{err}");
    }

    #[test]
    fn ca_file_must_hold_a_certificate() {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), "not a certificate").unwrap();
        let text = GOOD.replace(
            "blob = \"svc\"",
            &format!("blob = \"svc\"\nca_file = {:?}", file.path()),
        );
        let err = refused(&text);
        assert!(
            err.contains("[storage].ca_file") && err.contains("PEM"),
            "{err}"
        );
        let missing = GOOD.replace("blob = \"svc\"", "blob = \"svc\"\nca_file = \"/no/ca.pem\"");
        let err = refused(&missing);
        assert!(err.contains("/no/ca.pem"), "{err}");
    }

    #[test]
    fn secrets_readable_by_others_are_warned_about() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("key");
        std::fs::write(&key, "c2VjcmV0c2VjcmV0c2VjcmV0").unwrap();
        let text = entra(&format!("account = \"a\"\naccess_key_file = {key:?}"));
        for (mode, warned) in [(0o644, true), (0o640, true), (0o600, false), (0o400, false)] {
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(mode)).unwrap();
            let s = validate_with(&text, &no_env).unwrap();
            assert_eq!(
                !s.group.warnings.is_empty(),
                warned,
                "mode {mode:o}: {:?}",
                s.group.warnings
            );
        }

        // The config file itself, when it holds a real connection string.
        let config = dir.path().join("leasehold.toml");
        let real = GOOD.replace(
            "UseDevelopmentStorage=true",
            "AccountName=a;AccountKey=c2VjcmV0c2VjcmV0c2VjcmV0",
        );
        std::fs::write(&config, &real).unwrap();
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
        let s = check_offline(Some(&config), &Overrides::default(), &no_env).unwrap();
        assert!(
            s.group
                .warnings
                .iter()
                .any(|w| w.contains("leasehold.toml")),
            "{:?}",
            s.group.warnings
        );
        assert!(
            !s.group.warnings.iter().any(|w| w.contains("c2VjcmV0")),
            "{:?}",
            s.group.warnings
        );
        // Azurite's published key is no secret.
        std::fs::write(&config, GOOD).unwrap();
        let s = check_offline(Some(&config), &Overrides::default(), &no_env).unwrap();
        assert!(s.group.warnings.is_empty(), "{:?}", s.group.warnings);
    }

    #[test]
    fn the_child_loses_every_storage_variable_unless_it_inherits_them() {
        let s = load(GOOD).unwrap();
        for var in STORAGE_ENV_VARS {
            assert!(s.child.remove_env.iter().any(|v| v == var), "{var}");
        }
        let inherit = GOOD.replace(
            "command = [\"true\"]",
            "command = [\"true\"]\ninherit_storage_credentials = true",
        );
        let kept = load(&inherit).unwrap().child.remove_env;
        assert!(
            !STORAGE_ENV_VARS
                .iter()
                .any(|var| kept.iter().any(|v| v == var)),
            "{kept:?}"
        );
        // leasehold's own settings are never the child's.
        assert!(
            kept.iter().any(|v| v == "LEASEHOLD_HTTP_LISTEN"),
            "{kept:?}"
        );
    }

    #[test]
    fn a_sas_in_the_endpoint_is_refused_without_being_shown() {
        let text = entra(&format!(
            "endpoint = \"https://acct.blob.core.windows.net/?sv=2022-11-02&sig=c2VjcmV0\"\naccess_key_file = {:?}",
            "/dev/null"
        ));
        let key = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(key.path(), EMULATOR_KEY).unwrap();
        let text = text.replace("/dev/null", key.path().to_str().unwrap());
        let err = validate_with(&text, &no_env).unwrap_err().to_string();
        assert!(err.contains("query string"), "{err}");
        assert!(!err.contains("c2VjcmV0"), "{err}");
        let cs = GOOD.replace(
            "UseDevelopmentStorage=true",
            &format!("AccountName=a;AccountKey={EMULATOR_KEY};BlobEndpoint=https://a.blob.core.windows.net/?sig=c2VjcmV0"),
        );
        let err = refused(&cs);
        assert!(
            err.contains("query string") && !err.contains("c2VjcmV0"),
            "{err}"
        );
    }

    /// The flags of the `*_file` keys take the keys' path: the same checks, the same
    /// credential, and errors that name the flag.
    #[test]
    fn credential_flags_are_the_keys_by_another_name() {
        let env = |vars: &[(&str, &str)]| env_of(vars);
        let key = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(key.path(), EMULATOR_KEY).unwrap();
        let run = |o: Overrides, vars: &[(&str, &str)]| {
            let o = Overrides {
                blob: Some("b".into()),
                command: vec!["true".into()],
                ..o
            };
            Config::without_file(&o).validate(&env(vars))
        };
        let by_flag = Overrides {
            access_key_file: Some(key.path().to_owned()),
            account: Some("acct".into()),
            ..Overrides::default()
        };
        let s = run(by_flag.clone(), &[]).unwrap();
        assert!(matches!(
            s.group.storage.credential,
            Credential::AccessKey(_)
        ));
        assert_eq!(
            s.group.storage.endpoint,
            "https://acct.blob.core.windows.net"
        );
        let text = format!(
            "[storage]\naccount = \"acct\"\naccess_key_file = {:?}\nblob = \"b\"\n[child]\ncommand = [\"true\"]\n",
            key.path()
        );
        assert_eq!(
            format!("{:?}", load(&text).unwrap().group.storage),
            format!("{:?}", s.group.storage),
            "the flag and the key give the same target"
        );

        let twice = run(
            by_flag,
            &[(ENV_CONNECTION_STRING, "UseDevelopmentStorage=true")],
        );
        let err = twice.unwrap_err().to_string();
        assert!(
            err.contains("(AZURE_STORAGE_CONNECTION_STRING, --access-key-file)"),
            "{err}"
        );
        let no_account = Overrides {
            sas_token_file: Some(key.path().to_owned()),
            ..Overrides::default()
        };
        let err = run(no_account, &[]).unwrap_err().to_string();
        assert!(
            err.starts_with("--account is missing: --sas-token-file needs"),
            "{err}"
        );
        let entra = Overrides {
            credential: Some(EntraKind::WorkloadIdentity),
            account: Some("acct".into()),
            ..Overrides::default()
        };
        let err = run(entra, &[]).unwrap_err().to_string();
        assert!(
            err.starts_with("--credential workload-identity needs AZURE_TENANT_ID"),
            "{err}"
        );
        let err = run(Overrides::default(), &[]).unwrap_err().to_string();
        assert!(err.contains("or pass --connection-string-file"), "{err}");
    }
}
