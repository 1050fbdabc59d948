//! Microsoft Entra ID tokens for the storage client, when `[storage].credential` is set.
//!
//! [`EntraCredential`] is the one `TokenCredential` handed to the SDK. It owns three things:
//!
//! * **The sources** ([`TokenSource`], resolved by the config): the Azure CLI and client-secret
//!   credentials of `azure_identity`, and two of our own, each for a gap in `azure_identity`
//!   0.21: its managed identity cannot ask for a user-assigned identity (`client_id`), and its
//!   workload identity reads the service-account token once, although the kubelet rotates that
//!   token (an hour-old one is refused), so a daemon that runs for days would lose its
//!   credential. Ours re-reads the file for every exchange.
//! * **The choice** among several sources (`credential = "default"`): the first that yields a
//!   token is kept for the life of the daemon, so a machine without IMDS does not probe it again
//!   before every renew.
//! * **The cache**: a token is renewed in the background once it has less than
//!   [`REFRESH_AHEAD`] left, so a lease request never waits on a token endpoint while the old
//!   token still works, and a token endpoint that fails for a while costs nothing until the
//!   token really expires (a failed renewal is retried `BACKGROUND_RETRY` later, not on every
//!   request). Every fetch runs in a task of its own, one at a time: a request that
//!   stops waiting (its own deadline) does not cancel it.
//!
//! Errors keep the SDK's `ErrorKind` convention: [`ErrorKind::Io`] for "could not reach the token
//! endpoint, or it failed for now" (the store reports storage unreachable: retried),
//! [`ErrorKind::Credential`] for a refusal (reported as a credential problem: exit 3 at
//! start-up). No message carries a token: they are built here from status codes and the
//! endpoints' error descriptions.

use super::target::{IdentityEndpoint, TokenSource};
use crate::fmt::human;
use crate::secret::redact;
use azure_core::auth::{AccessToken, TokenCredential};
use azure_core::error::{Error, ErrorKind};
use azure_core::{HttpClient, Method, Request, Url};
use serde::Deserialize;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use time::OffsetDateTime;

/// Renew a token this long before it expires (the other Azure SDKs use 5 minutes too).
pub const REFRESH_AHEAD: Duration = Duration::from_secs(300);
/// A token with less than this left is not sent any more: a request may take a while.
const EXPIRY_MARGIN: Duration = Duration::from_secs(30);
/// After a background renewal failed, the next one waits this long (while the current token
/// still works), so that a token endpoint that is down is not asked, and warned about, on every
/// lease request.
const BACKGROUND_RETRY: Duration = Duration::from_secs(30);
/// How long `default` waits for IMDS before trying the next source: on a machine that is not
/// an Azure VM the address may swallow packets until the connect timeout.
const IMDS_PROBE: Duration = Duration::from_secs(2);
/// The resource whose tokens storage accepts (IMDS speaks resources, not scopes).
const STORAGE_RESOURCE: &str = "https://storage.azure.com";

/// The `TokenCredential` for `[storage].credential`: a chain of sources, a choice, a cache.
#[derive(Clone)]
pub struct EntraCredential {
    inner: Arc<Inner>,
}

struct Inner {
    sources: Vec<(&'static str, Box<dyn TokenCredential>)>,
    /// Whether a source is the managed identity (probed with a short timeout in a chain).
    probes: Vec<bool>,
    /// The source that yielded the last token; once set, the only one asked.
    chosen: std::sync::Mutex<Option<usize>>,
    /// The current token.
    token: std::sync::Mutex<Option<AccessToken>>,
    /// A fetch is under way. At most one runs, in its own task, so that a lease request that
    /// gives up waiting (its own timeout) does not cancel it: a slow source (`az` can take
    /// seconds) still ends up with a token for the next request.
    fetching: AtomicBool,
    /// Bumped whenever a fetch ends, to wake the requests waiting for it.
    ended: tokio::sync::watch::Sender<u64>,
    /// How the last fetch failed, for the requests that waited for it.
    failure: std::sync::Mutex<Option<(ErrorKind, String)>>,
    /// No background renewal before this, after one failed.
    background_after: std::sync::Mutex<Option<tokio::time::Instant>>,
}

impl std::fmt::Debug for EntraCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.inner.sources.iter().map(|(n, _)| *n).collect();
        f.debug_struct("EntraCredential")
            .field("sources", &names)
            .finish_non_exhaustive()
    }
}

impl EntraCredential {
    /// Builds the sources; `http` is the client the storage requests use (with `ca_file`).
    pub fn new(sources: &[TokenSource], http: Arc<dyn HttpClient>) -> Result<Self, String> {
        let mut built: Vec<(&'static str, Box<dyn TokenCredential>)> = Vec::new();
        let mut probes = Vec::new();
        for source in sources {
            let credential: Box<dyn TokenCredential> = match source {
                TokenSource::ManagedIdentity {
                    endpoint,
                    client_id,
                } => Box::new(ManagedIdentity {
                    http: http.clone(),
                    endpoint: endpoint.clone(),
                    client_id: client_id.clone(),
                }),
                TokenSource::WorkloadIdentity {
                    tenant_id,
                    client_id,
                    token_file,
                    authority_host,
                } => Box::new(WorkloadIdentity {
                    http: http.clone(),
                    tenant_id: tenant_id.clone(),
                    client_id: client_id.clone(),
                    token_file: token_file.clone(),
                    authority_host: parse_authority(authority_host)?,
                }),
                TokenSource::ClientSecret {
                    tenant_id,
                    client_id,
                    secret,
                    authority_host,
                } => Box::new(azure_identity::ClientSecretCredential::new(
                    http.clone(),
                    parse_authority(authority_host)?,
                    tenant_id.clone(),
                    client_id.clone(),
                    secret.expose().to_owned(),
                )),
                TokenSource::AzureCli => Box::new(azure_identity::AzureCliCredential::new()),
            };
            built.push((source.name(), credential));
            probes.push(matches!(
                source,
                TokenSource::ManagedIdentity {
                    endpoint: IdentityEndpoint::Imds(_),
                    ..
                }
            ));
        }
        if built.is_empty() {
            return Err("no Entra ID token source is available".to_owned());
        }
        Ok(Self::from_sources(built, probes))
    }

    fn from_sources(
        sources: Vec<(&'static str, Box<dyn TokenCredential>)>,
        probes: Vec<bool>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                sources,
                probes,
                chosen: std::sync::Mutex::new(None),
                token: std::sync::Mutex::new(None),
                fetching: AtomicBool::new(false),
                ended: tokio::sync::watch::Sender::new(0),
                failure: std::sync::Mutex::new(None),
                background_after: std::sync::Mutex::new(None),
            }),
        }
    }
}

fn parse_authority(host: &str) -> Result<Url, String> {
    Url::parse(host).map_err(|_| {
        format!(
            "AZURE_AUTHORITY_HOST {host:?} is not a URL such as https://login.microsoftonline.com/"
        )
    })
}

fn time_left(token: &AccessToken) -> Duration {
    let left = token.expires_on - OffsetDateTime::now_utc();
    left.try_into().unwrap_or(Duration::ZERO)
}

/// Locks a std mutex, ignoring poisoning: every critical section here is a plain assignment.
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[async_trait::async_trait]
impl TokenCredential for EntraCredential {
    async fn get_token(&self, scopes: &[&str]) -> azure_core::Result<AccessToken> {
        let inner = &self.inner;
        let current = lock(&inner.token).clone();
        if let Some(token) = current {
            let left = time_left(&token);
            if left > REFRESH_AHEAD {
                return Ok(token);
            }
            if left > EXPIRY_MARGIN {
                let due = lock(&inner.background_after)
                    .is_none_or(|after| tokio::time::Instant::now() >= after);
                if due {
                    inner.start_fetch(scopes, true);
                }
                return Ok(token);
            }
        }
        // Subscribed before the fetch starts, so its end cannot be missed.
        let mut ended = inner.ended.subscribe();
        inner.start_fetch(scopes, false);
        // The sender lives in `inner`, which outlives this call: changed() cannot fail.
        let _ = ended.changed().await;
        let current = lock(&inner.token).clone();
        match current {
            // Fresh from the source: used even when it lives shorter than the margin.
            Some(token) if time_left(&token) > Duration::ZERO => Ok(token),
            _ => Err(match lock(&inner.failure).clone() {
                Some((kind, message)) => Error::message(kind, message),
                None => Error::message(ErrorKind::Credential, "no Entra ID token"),
            }),
        }
    }

    async fn clear_cache(&self) -> azure_core::Result<()> {
        *lock(&self.inner.token) = None;
        Ok(())
    }
}

/// Marks the end of a fetch when dropped.
struct FetchDone(Arc<Inner>);

impl Drop for FetchDone {
    fn drop(&mut self) {
        self.0.fetching.store(false, Ordering::SeqCst);
        self.0.ended.send_modify(|n| *n += 1);
    }
}

impl Inner {
    /// Starts a fetch in its own task unless one is under way. `background`: the current
    /// token still works, so a failure is only worth a warning.
    fn start_fetch(self: &Arc<Self>, scopes: &[&str], background: bool) {
        if self.fetching.swap(true, Ordering::SeqCst) {
            return;
        }
        let inner = self.clone();
        let scopes: Vec<String> = scopes.iter().map(|s| s.to_string()).collect();
        tokio::spawn(async move {
            // Ends the fetch however the task ends, a panic included: nobody waits forever.
            let _done = FetchDone(inner.clone());
            let scopes: Vec<&str> = scopes.iter().map(String::as_str).collect();
            match inner.fetch(&scopes).await {
                Ok(token) => {
                    *lock(&inner.token) = Some(token);
                    *lock(&inner.failure) = None;
                    *lock(&inner.background_after) = None;
                }
                Err(e) => {
                    if background {
                        tracing::warn!(
                            error = %describe(&e),
                            "cannot renew the Entra ID token; the current one stays in use until it \
                             expires, next try in {}",
                            human(BACKGROUND_RETRY)
                        );
                        *lock(&inner.background_after) =
                            Some(tokio::time::Instant::now() + BACKGROUND_RETRY);
                    }
                    *lock(&inner.failure) = Some((e.kind().clone(), e.to_string()));
                }
            }
        });
    }

    /// One token from the chosen source, or from the first of the sources that yields one.
    async fn fetch(&self, scopes: &[&str]) -> azure_core::Result<AccessToken> {
        let chosen = *lock(&self.chosen);
        if let Some(i) = chosen {
            let (name, source) = &self.sources[i];
            return source.get_token(scopes).await.map_err(|e| {
                Error::message(e.kind().clone(), format!("{name}: {}", describe(&e)))
            });
        }
        if let [(name, source)] = self.sources.as_slice() {
            let token = source.get_token(scopes).await.map_err(|e| {
                Error::message(e.kind().clone(), format!("{name}: {}", describe(&e)))
            })?;
            *lock(&self.chosen) = Some(0);
            return Ok(token);
        }
        // A chain: a source that fails in any way is "not available here"; the next is tried.
        let mut failures = Vec::new();
        for (i, (name, source)) in self.sources.iter().enumerate() {
            let attempt = source.get_token(scopes);
            let result = if self.probes[i] {
                tokio::time::timeout(IMDS_PROBE, attempt)
                    .await
                    .unwrap_or_else(|_| {
                        Err(Error::message(
                            ErrorKind::Io,
                            "no answer from the instance metadata service (not an Azure VM?)",
                        ))
                    })
            } else {
                attempt.await
            };
            match result {
                Ok(token) => {
                    tracing::info!(source = name, "using the Entra ID token of the {name}");
                    *lock(&self.chosen) = Some(i);
                    return Ok(token);
                }
                Err(e) => failures.push(format!("{name}: {}", describe(&e))),
            }
        }
        Err(Error::message(
            ErrorKind::Credential,
            format!("no source gave a token ({})", failures.join("; ")),
        ))
    }
}

/// An error and its causes on one line, deduplicated (the SDK repeats inner messages), with
/// URLs' queries and anything token-like removed.
pub fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = next {
        let text = err
            .to_string()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if !text.is_empty() && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = err.source();
    }
    let mut line = redact(&parts.join(": "));
    if line.len() > 400 {
        let mut cut = 400;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        line.truncate(cut);
        line.push_str("...");
    }
    line
}

/// Whether a token failure is worth retrying: the endpoint could not be reached or failed
/// for now (our sources and the SDK's transport both report that as [`ErrorKind::Io`]).
pub fn is_transient(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = next {
        if let Some(azure) = err.downcast_ref::<Error>() {
            match azure.kind() {
                ErrorKind::Io => return true,
                ErrorKind::HttpResponse { status, .. } => {
                    let status = u16::from(*status);
                    if status == 429 || status >= 500 {
                        return true;
                    }
                }
                _ => {}
            }
        }
        next = err.source();
    }
    false
}

/// A managed identity: IMDS (VMs, scale sets, AKS nodes) or the App Service-style endpoint.
#[derive(Debug)]
struct ManagedIdentity {
    http: Arc<dyn HttpClient>,
    endpoint: IdentityEndpoint,
    client_id: Option<String>,
}

/// What both managed identity endpoints answer. `expires_on` is seconds since the epoch, as a
/// string (IMDS, App Service) or a number (some hosts).
#[derive(Deserialize)]
struct ManagedIdentityToken {
    access_token: azure_core::auth::Secret,
    expires_on: Option<NumberOrString>,
    expires_in: Option<NumberOrString>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum NumberOrString {
    Number(i64),
    String(String),
}

impl NumberOrString {
    fn value(&self) -> Option<i64> {
        match self {
            Self::Number(n) => Some(*n),
            Self::String(s) => s.trim().parse().ok(),
        }
    }
}

/// The error body of IMDS and of the Entra token endpoint.
#[derive(Deserialize, Default)]
struct ErrorBody {
    error: Option<String>,
    error_description: Option<String>,
}

fn error_body(body: &[u8]) -> String {
    let parsed: ErrorBody = azure_core::from_json(body).unwrap_or_default();
    let text = [parsed.error, parsed.error_description]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(": ");
    // Entra's descriptions carry trace and correlation ids on further lines.
    text.lines().next().unwrap_or("").to_owned()
}

/// The failure for an error status of a token endpoint: 404 and 410 (IMDS starting or
/// upgrading), 429 and 5xx are worth retrying; the rest is a refusal.
fn status_error(what: &str, status: u16, body: &[u8]) -> Error {
    let detail = error_body(body);
    let transient = matches!(status, 404 | 410 | 429) || status >= 500;
    let message = if detail.is_empty() {
        format!("{what} answered {status}")
    } else {
        format!("{what} answered {status}: {detail}")
    };
    let hint = if status == 400 && what.contains("managed identity") {
        "; check that the identity is assigned to this VM or app, and its client_id"
    } else {
        ""
    };
    Error::message(
        if transient {
            ErrorKind::Io
        } else {
            ErrorKind::Credential
        },
        format!("{message}{hint}"),
    )
}

#[async_trait::async_trait]
impl TokenCredential for ManagedIdentity {
    async fn get_token(&self, _scopes: &[&str]) -> azure_core::Result<AccessToken> {
        let (url, what) = match &self.endpoint {
            IdentityEndpoint::Imds(url) => (url, "the managed identity endpoint (IMDS)"),
            IdentityEndpoint::AppService { url, .. } => {
                (url, "the managed identity endpoint (IDENTITY_ENDPOINT)")
            }
        };
        let mut url = Url::parse(url).map_err(|_| {
            Error::message(
                ErrorKind::Credential,
                format!("{what} {url:?} is not a URL"),
            )
        })?;
        let api_version = match self.endpoint {
            IdentityEndpoint::Imds(_) => "2018-02-01",
            IdentityEndpoint::AppService { .. } => "2019-08-01",
        };
        url.query_pairs_mut()
            .append_pair("api-version", api_version)
            .append_pair("resource", STORAGE_RESOURCE);
        if let Some(id) = &self.client_id {
            url.query_pairs_mut().append_pair("client_id", id);
        }
        let mut request = Request::new(url, Method::Get);
        match &self.endpoint {
            IdentityEndpoint::Imds(_) => request.insert_header("metadata", "true"),
            IdentityEndpoint::AppService { header, .. } => {
                request.insert_header("x-identity-header", header.expose().to_owned())
            }
        }
        let response = self.http.execute_request(&request).await?;
        let (status, _headers, body) = response.deconstruct();
        let body = body.collect().await?;
        if !status.is_success() {
            return Err(status_error(what, u16::from(status), &body));
        }
        let token: ManagedIdentityToken = azure_core::from_json(&body).map_err(|_| {
            Error::message(
                ErrorKind::Credential,
                format!("{what} answered something that is not a token"),
            )
        })?;
        let expires_on = expiry(token.expires_on.as_ref(), token.expires_in.as_ref());
        Ok(AccessToken::new(token.access_token, expires_on))
    }

    async fn clear_cache(&self) -> azure_core::Result<()> {
        Ok(())
    }
}

/// The expiry from `expires_on` (epoch seconds) or `expires_in` (seconds from now); a token
/// that says neither is renewed after 5 minutes.
fn expiry(on: Option<&NumberOrString>, within: Option<&NumberOrString>) -> OffsetDateTime {
    let now = OffsetDateTime::now_utc();
    on.and_then(NumberOrString::value)
        .and_then(|t| OffsetDateTime::from_unix_timestamp(t).ok())
        .or_else(|| {
            within
                .and_then(NumberOrString::value)
                .map(|s| now + Duration::from_secs(s.max(0) as u64))
        })
        .unwrap_or(now + REFRESH_AHEAD + EXPIRY_MARGIN)
}

/// AKS workload identity: the projected service-account token, exchanged at the Entra token
/// endpoint for a storage token (OAuth client credentials with a federated assertion).
#[derive(Debug)]
struct WorkloadIdentity {
    http: Arc<dyn HttpClient>,
    tenant_id: String,
    client_id: String,
    token_file: std::path::PathBuf,
    authority_host: Url,
}

#[async_trait::async_trait]
impl TokenCredential for WorkloadIdentity {
    async fn get_token(&self, scopes: &[&str]) -> azure_core::Result<AccessToken> {
        // Read for every exchange: the kubelet replaces the token long before it expires.
        let assertion = tokio::fs::read_to_string(&self.token_file)
            .await
            .map_err(|e| {
                Error::message(
                    ErrorKind::Credential,
                    format!(
                        "cannot read the service-account token {} (AZURE_FEDERATED_TOKEN_FILE): {e}",
                        self.token_file.display()
                    ),
                )
            })?;
        let response = azure_identity::federated_credentials_flow::perform(
            self.http.clone(),
            &self.client_id,
            assertion.trim(),
            scopes,
            &self.tenant_id,
            &self.authority_host,
        )
        .await
        .map_err(|e| match e.kind() {
            // Only the status and code: azure_identity has logged the body (an ERROR line).
            ErrorKind::HttpResponse { status, error_code } => {
                let body = error_code
                    .as_ref()
                    .map(|code| format!(r#"{{"error":{code:?}}}"#))
                    .unwrap_or_default();
                status_error(
                    "the Entra ID token endpoint",
                    u16::from(*status),
                    body.as_bytes(),
                )
            }
            _ => e,
        })?;
        let expires_on = response.expires_on.unwrap_or_else(|| {
            OffsetDateTime::now_utc() + Duration::from_secs(response.expires_in)
        });
        Ok(AccessToken::new(
            response.access_token().clone(),
            expires_on,
        ))
    }

    async fn clear_cache(&self) -> azure_core::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests;
