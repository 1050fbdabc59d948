//! Where a lease lives and how to reach it: the [`StorageTarget`] (account, endpoint, credential,
//! container, blob) that [`super::AzureStore`] is built from, and the rules a target must keep so
//! that storage accepts it and stores the blob under the name given.
//!
//! The config resolves one from the TOML file and the environment (`crate::config`); a program
//! can build one in code from a connection string ([`StorageTarget::from_connection_string`]) or
//! from its parts ([`StorageTarget::new`]). Connection strings are parsed here without ever
//! echoing their values.

use crate::secret::Secret;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Azurite's well-known development account (public, documented by Microsoft).
pub(crate) const EMULATOR_ACCOUNT: &str = "devstoreaccount1";
pub(crate) const EMULATOR_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// Where the lease lives and the credential to reach it.
///
/// ```
/// use leasehold::store::StorageTarget;
///
/// let target =
///     StorageTarget::from_connection_string("UseDevelopmentStorage=true", "leasehold", "my-service")?;
/// assert_eq!(target.endpoint(), "http://127.0.0.1:10000/devstoreaccount1");
/// # Ok::<(), leasehold::store::InvalidTarget>(())
/// ```
#[derive(Debug, Clone)]
pub struct StorageTarget {
    pub(crate) account: String,
    /// The blob service endpoint, without a trailing slash.
    pub(crate) endpoint: String,
    pub(crate) credential: Credential,
    /// `[storage].ca_file` and its contents: extra trusted CA certificates (PEM).
    pub(crate) ca_certificates: Option<(PathBuf, Vec<u8>)>,
    pub(crate) container: String,
    pub(crate) blob: String,
    pub(crate) create_if_missing: bool,
}

impl StorageTarget {
    /// The target a connection string names (`UseDevelopmentStorage=true` for Azurite, or one
    /// with `AccountName`, `AccountKey` or `SharedAccessSignature`, and optionally
    /// `BlobEndpoint`), with the lease on `blob` in `container`. Creates a missing container and
    /// blob unless told otherwise ([`StorageTarget::create_if_missing`]).
    pub fn from_connection_string(
        connection_string: &str,
        container: &str,
        blob: &str,
    ) -> Result<Self, InvalidTarget> {
        let cs =
            ConnectionString::parse(connection_string).map_err(InvalidTarget::ConnectionString)?;
        if let Credential::SasToken(token) = &cs.credential
            && !token.expose().contains("sig=")
        {
            return Err(InvalidTarget::ConnectionString(
                "its SharedAccessSignature has no sig= parameter; give the whole token \
                 (sv=...&sig=...)"
                    .to_owned(),
            ));
        }
        Self::new(&cs.account, &cs.endpoint, cs.credential, container, blob)
    }

    /// The target of `blob` in `container` on the blob service at `endpoint` (e.g.
    /// `https://myaccount.blob.core.windows.net`) of storage account `account`. The endpoint
    /// must be https, or http on loopback (Azurite). Creates a missing container and blob unless
    /// told otherwise ([`StorageTarget::create_if_missing`]).
    pub fn new(
        account: &str,
        endpoint: &str,
        credential: Credential,
        container: &str,
        blob: &str,
    ) -> Result<Self, InvalidTarget> {
        let endpoint = endpoint.trim_end_matches('/');
        check_endpoint(endpoint, false)?;
        check_container(container)?;
        check_blob(blob)?;
        Ok(Self {
            account: account.to_owned(),
            endpoint: endpoint.to_owned(),
            credential,
            ca_certificates: None,
            container: container.to_owned(),
            blob: blob.to_owned(),
            create_if_missing: true,
        })
    }

    /// Whether a missing container and blob are created (`[storage].create_if_missing`,
    /// default true); with `false`, a missing one is an error at start-up.
    pub fn create_if_missing(mut self, create: bool) -> Self {
        self.create_if_missing = create;
        self
    }

    /// The storage account.
    pub fn account(&self) -> &str {
        &self.account
    }

    /// The blob service endpoint, without a trailing slash.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The credential (whose secrets never print).
    pub fn credential(&self) -> &Credential {
        &self.credential
    }

    /// The container of the lease blob.
    pub fn container(&self) -> &str {
        &self.container
    }

    /// The lease blob: one per leadership group.
    pub fn blob(&self) -> &str {
        &self.blob
    }

    /// Whether a missing container and blob are created.
    pub fn creates_if_missing(&self) -> bool {
        self.create_if_missing
    }
}

/// A storage target that storage would refuse, or that would reach a blob under another name
/// than the one given. `Display` is one line that never shows a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidTarget {
    /// The connection string cannot be used; the text says why, without its values.
    #[error("not a valid connection string: {0}")]
    ConnectionString(String),
    /// A name or the endpoint breaks a rule.
    #[error("{key} = {value}: {rule}")]
    Value {
        /// The config key it would be set by, e.g. `[storage].blob`.
        key: &'static str,
        /// The value, as shown.
        value: String,
        /// The rule it breaks.
        rule: String,
    },
}

impl InvalidTarget {
    fn value(key: &'static str, value: impl Into<String>, rule: impl Into<String>) -> Self {
        Self::Value {
            key,
            value: value.into(),
            rule: rule.into(),
        }
    }
}

/// A storage credential. The secrets stay inside [`Secret`], which never prints its value.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Credential {
    /// Shared key (account key), signed per request.
    AccessKey(Secret),
    /// A SAS token, without the leading `?`.
    SasToken(Secret),
    /// Microsoft Entra ID bearer tokens, from the first of `sources` that yields one.
    Entra {
        /// What the user asked for, for messages.
        kind: EntraKind,
        /// Where tokens come from, tried in this order.
        sources: Vec<TokenSource>,
    },
}

impl Credential {
    /// What kind of credential this is, for people (never its value).
    pub fn describe(&self) -> String {
        match self {
            Self::AccessKey(_) => "account key".to_owned(),
            Self::SasToken(_) => "SAS token".to_owned(),
            Self::Entra { kind, .. } => format!("Entra ID ({})", kind.as_str()),
        }
    }
}

/// `[storage].credential`: where a Microsoft Entra ID token comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EntraKind {
    /// The managed identity of the VM, scale set, App Service or Container App (IMDS, or
    /// `IDENTITY_ENDPOINT`); `client_id` picks a user-assigned one.
    ManagedIdentity,
    /// AKS workload identity: a Kubernetes service-account token exchanged for an Entra token.
    WorkloadIdentity,
    /// The developer's `az login`.
    AzureCli,
    /// The first that works of: environment (client secret or workload identity), managed
    /// identity, Azure CLI; like `DefaultAzureCredential` in the other Azure SDKs.
    Default,
}

impl EntraKind {
    /// The name in the config file (`managed-identity`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ManagedIdentity => "managed-identity",
            Self::WorkloadIdentity => "workload-identity",
            Self::AzureCli => "azure-cli",
            Self::Default => "default",
        }
    }
}

/// One place an Entra ID token can come from, with everything it needs resolved from the
/// config and the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenSource {
    /// The managed identity of this machine or app.
    ManagedIdentity {
        /// Where its tokens are fetched.
        endpoint: IdentityEndpoint,
        /// A user-assigned identity; `None` for the system-assigned one.
        client_id: Option<String>,
    },
    /// Exchanges the service-account token in `token_file` (re-read for every exchange: the
    /// kubelet rotates it) for an Entra token.
    WorkloadIdentity {
        /// `AZURE_TENANT_ID`.
        tenant_id: String,
        /// The application's client id.
        client_id: String,
        /// `AZURE_FEDERATED_TOKEN_FILE`.
        token_file: PathBuf,
        /// `AZURE_AUTHORITY_HOST`, or Microsoft's public one.
        authority_host: String,
    },
    /// An application's client secret (`AZURE_CLIENT_SECRET`); only in the `default` chain.
    ClientSecret {
        /// `AZURE_TENANT_ID`.
        tenant_id: String,
        /// The application's client id.
        client_id: String,
        /// The secret itself.
        secret: Secret,
        /// `AZURE_AUTHORITY_HOST`, or Microsoft's public one.
        authority_host: String,
    },
    /// `az account get-access-token`.
    AzureCli,
}

impl TokenSource {
    /// Its name, for people.
    pub fn name(&self) -> &'static str {
        match self {
            Self::ManagedIdentity { .. } => "managed identity",
            Self::WorkloadIdentity { .. } => "workload identity",
            Self::ClientSecret { .. } => "client secret",
            Self::AzureCli => "Azure CLI",
        }
    }
}

/// Where the managed identity's tokens are fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdentityEndpoint {
    /// The Instance Metadata Service of VMs, scale sets and AKS nodes: the full token URL.
    Imds(String),
    /// App Service, Functions, Container Apps: `IDENTITY_ENDPOINT`, with `IDENTITY_HEADER`
    /// proving the request comes from inside.
    AppService {
        /// `IDENTITY_ENDPOINT`.
        url: String,
        /// `IDENTITY_HEADER`.
        header: Secret,
    },
}

/// What a connection string says, parsed without ever echoing its values.
pub(crate) struct ConnectionString {
    pub account: String,
    pub endpoint: String,
    pub credential: Credential,
}

impl ConnectionString {
    /// Errors name the key at fault, never a value.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut pairs: BTreeMap<&str, &str> = BTreeMap::new();
        for part in text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((k, v)) = part.split_once('=') else {
                return Err("expected Key=Value pairs separated by ';'".to_owned());
            };
            let (k, v) = (k.trim(), v.trim());
            if k.is_empty() || v.is_empty() {
                return Err(format!("key {k:?} has no value"));
            }
            pairs.insert(k, v);
        }
        const KNOWN: [&str; 12] = [
            "UseDevelopmentStorage",
            "DevelopmentStorageProxyUri",
            "AccountName",
            "AccountKey",
            "SharedAccessSignature",
            "DefaultEndpointsProtocol",
            "EndpointSuffix",
            "BlobEndpoint",
            "BlobSecondaryEndpoint",
            "QueueEndpoint",
            "TableEndpoint",
            "FileEndpoint",
        ];
        if let Some(k) = pairs.keys().find(|k| !KNOWN.contains(k)) {
            return Err(format!("unknown key {k:?}"));
        }
        if let Some(v) = pairs.get("UseDevelopmentStorage") {
            if !v.eq_ignore_ascii_case("true") {
                return Err("UseDevelopmentStorage must be true when present".to_owned());
            }
            let host = pairs
                .get("DevelopmentStorageProxyUri")
                .map(|u| u.trim_end_matches('/').to_owned())
                .unwrap_or_else(|| "http://127.0.0.1".to_owned());
            return Ok(Self {
                account: EMULATOR_ACCOUNT.to_owned(),
                endpoint: format!("{host}:10000/{EMULATOR_ACCOUNT}"),
                credential: Credential::AccessKey(Secret::new(EMULATOR_KEY.to_owned())),
            });
        }
        let account = pairs.get("AccountName").map(|s| s.to_string());
        let endpoint = match (pairs.get("BlobEndpoint"), &account) {
            (Some(e), _) => e.to_string(),
            (None, Some(a)) => {
                let proto = pairs.get("DefaultEndpointsProtocol").unwrap_or(&"https");
                let suffix = pairs.get("EndpointSuffix").unwrap_or(&"core.windows.net");
                format!("{proto}://{a}.blob.{suffix}")
            }
            (None, None) => return Err("needs AccountName or BlobEndpoint".to_owned()),
        };
        let account = match account.or_else(|| account_from_endpoint(&endpoint)) {
            Some(a) => a,
            None => return Err("needs AccountName".to_owned()),
        };
        let credential = match (pairs.get("SharedAccessSignature"), pairs.get("AccountKey")) {
            (Some(_), Some(_)) => {
                return Err("has both AccountKey and SharedAccessSignature; keep one".to_owned());
            }
            (Some(sas), None) => {
                Credential::SasToken(Secret::new(sas.trim_start_matches('?').to_owned()))
            }
            (None, Some(key)) => {
                if !is_base64(key) {
                    return Err("AccountKey is not valid base64".to_owned());
                }
                Credential::AccessKey(Secret::new(key.to_string()))
            }
            (None, None) => {
                return Err("needs AccountKey or SharedAccessSignature".to_owned());
            }
        };
        Ok(Self {
            account,
            endpoint,
            credential,
        })
    }
}

/// Guesses the account from `https://ACCOUNT.blob.core.windows.net` or from an emulator-style
/// `http://host:port/ACCOUNT`.
pub(crate) fn account_from_endpoint(endpoint: &str) -> Option<String> {
    let rest = endpoint.split_once("://")?.1;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let path = path.trim_matches('/');
    if !path.is_empty() {
        return Some(path.split('/').next()?.to_owned());
    }
    let host = host.split(':').next()?;
    let (first, tail) = host.split_once('.')?;
    tail.starts_with("blob.").then(|| first.to_owned())
}

/// https anywhere; plain http only on loopback (Azurite) or where `allow_insecure_http` says so;
/// never a query string (a SAS pasted into the URL would be logged with the endpoint).
pub(crate) fn check_endpoint(
    endpoint: &str,
    allow_insecure_http: bool,
) -> Result<(), InvalidTarget> {
    // Refused without echoing the query.
    if let Some((base, _)) = endpoint.split_once('?') {
        return Err(InvalidTarget::value(
            "[storage].endpoint",
            format!("{:?}", format!("{base}?<query>")),
            "must not carry a query string: give a SAS token in sas_token_file or \
             AZURE_STORAGE_SAS_TOKEN, and the endpoint without it",
        ));
    }
    let invalid =
        |rule: &str| InvalidTarget::value("[storage].endpoint", format!("{endpoint:?}"), rule);
    let Some((scheme, rest)) = endpoint.split_once("://") else {
        return Err(invalid(
            "must be a URL such as https://myaccount.blob.core.windows.net",
        ));
    };
    let host = rest.split('/').next().unwrap_or("");
    let host = host.rsplit_once(':').map_or(host, |(h, port)| {
        if port.chars().all(|c| c.is_ascii_digit()) {
            h
        } else {
            host
        }
    });
    if host.is_empty() {
        return Err(invalid("has no host"));
    }
    match scheme {
        "https" => Ok(()),
        "http" if allow_insecure_http || is_loopback(host) => Ok(()),
        "http" => Err(invalid(
            "plain http to a non-loopback host would send credentials unencrypted; use https, \
             or set [storage].allow_insecure_http = true on a closed test network",
        )),
        _ => Err(invalid("scheme must be https (or http on loopback)")),
    }
}

fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

pub(crate) fn is_base64(s: &str) -> bool {
    !s.is_empty()
        && s.len().is_multiple_of(4)
        && s.trim_end_matches('=')
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

/// Container names: 3-63 characters of lowercase letters, digits and single hyphens.
pub(crate) fn check_container(name: &str) -> Result<(), InvalidTarget> {
    let ok = (3..=63).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--");
    if ok {
        Ok(())
    } else {
        Err(InvalidTarget::value(
            "[storage].container",
            format!("{name:?}"),
            "container names are 3-63 lowercase letters, digits and single hyphens, \
             starting and ending with a letter or digit",
        ))
    }
}

/// Blob names that reach the service exactly as written. The storage client puts the name into
/// the URL path segment by segment (`azure_storage_blobs` 0.21 `BlobClient::url`: the name is
/// trimmed of '/' at both ends, split on '/', and each part pushed with the `url` crate), and on
/// the way leading '/' are lost, `.` and `..` segments are dropped, and tabs, CR and LF are
/// removed. A '\\' is sent (as `%5C`), but the service stores it as '/': `a\\b` and `a/b` would
/// be one lease. Azure refuses control characters and more than 254 path segments, and advises
/// against a segment ending in '.'. An empty segment (`a//b`) survives on Azurite, but it names
/// no directory, and a proxy or a hierarchical-namespace account may fold it: it is refused too.
/// tests/it/operate.rs checks a table of names against what Azurite lists.
pub(crate) fn check_blob(name: &str) -> Result<(), InvalidTarget> {
    let segments = || name.split('/');
    let problem = if name.is_empty() || name.chars().count() > 1024 {
        "is not 1-1024 characters long"
    } else if name.contains('\\') {
        "contains '\\', which storage stores as '/'"
    } else if name.chars().any(char::is_control) {
        "contains a control character, which the storage client drops or storage refuses"
    } else if segments().any(str::is_empty) {
        "has an empty path segment (a leading, trailing or doubled '/'; the storage client \
         drops leading and trailing ones)"
    } else if segments().any(|s| s.ends_with('.')) {
        "has a path segment ending in '.' (the storage client drops '.' and '..' segments, and \
         Azure advises against the others)"
    } else if segments().count() > 254 {
        "has more than 254 path segments (Azure's limit)"
    } else {
        return Ok(());
    };
    Err(InvalidTarget::value(
        "[storage].blob",
        format!("{name:?}"),
        format!(
            "{problem}; a blob name is 1-1024 characters in at most 254 path segments separated \
             by single '/', each segment non-empty and not ending in '.', with no '\\' and no \
             control characters, so that storage keeps it exactly as written"
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_from_a_connection_string_needs_no_config_file() {
        let cs = format!(
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={EMULATOR_KEY};BlobEndpoint=http://127.0.0.1:12345/devstoreaccount1;"
        );
        let t = StorageTarget::from_connection_string(&cs, "tests", "a/b").unwrap();
        assert_eq!(t.endpoint(), "http://127.0.0.1:12345/devstoreaccount1");
        assert_eq!(t.account(), "devstoreaccount1");
        assert!(t.creates_if_missing());
        assert!(!t.create_if_missing(false).creates_if_missing());
        let bad = StorageTarget::from_connection_string(
            "AccountName=a;AccountKey=c2VjcmV0!",
            "tests",
            "b",
        )
        .unwrap_err()
        .to_string();
        assert!(bad.contains("base64") && !bad.contains("c2VjcmV0"), "{bad}");
        let name = StorageTarget::from_connection_string(&cs, "tests", "a//b").unwrap_err();
        assert!(
            matches!(
                name,
                InvalidTarget::Value {
                    key: "[storage].blob",
                    ..
                }
            ),
            "{name}"
        );
        let off_loopback = cs.replace("127.0.0.1", "azurite");
        let err = StorageTarget::from_connection_string(&off_loopback, "tests", "b").unwrap_err();
        assert!(err.to_string().contains("allow_insecure_http"), "{err}");
    }

    #[test]
    fn endpoint_account_guess() {
        assert_eq!(
            account_from_endpoint("https://acct.blob.core.windows.net").as_deref(),
            Some("acct")
        );
        assert_eq!(
            account_from_endpoint("http://127.0.0.1:10000/devstoreaccount1").as_deref(),
            Some("devstoreaccount1")
        );
        assert_eq!(account_from_endpoint("https://example.com"), None);
    }
}
