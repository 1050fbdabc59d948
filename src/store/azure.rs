//! [`LeaseStore`] over Azure Blob Storage, with the community `azure_storage_blobs` 0.21 crate.
//!
//! Every SDK type stays in this file, so moving to the official `azure_storage_blob` 1.x (once it
//! can sign with a shared key and so talk to Azurite) touches nothing else.
//!
//! Two SDK defaults are replaced on purpose: its retry policy (up to 8 tries over 60 s, far past
//! any stop deadline) is switched off, and its HTTP client (no timeout, keep-alive disabled) is
//! replaced by [`Transport`]: connection reuse that never races the server's own idle close, one
//! connection where the official SDK uses one (requests run on a thread of the store's own,
//! each answer read to its end there), a connect timeout and the `ca_file` certificates. The
//! Entra ID token sources (in `identity`) use the same client. Per-request deadlines are the
//! elector's job.

use super::blob::{BlobState, ETag, Holder, LeaseCheck, LeaseId, LeaseState, Notice, SlotRecord};
use super::error::{Failure, StoreError};
use super::identity::{self, EntraCredential};
use super::lease::{GroupStore, LeaseStore};
use super::member::{MEMBERS_SUFFIX, Member, MemberKey, MemberRecord};
use super::metadata::{
    META_RECREATED, META_REPLICA_ID, META_REPLICA_SET, SLOTS_SUFFIX, holder_from_metadata,
    holder_to_metadata, passed_over_from_metadata, recreated_from_metadata, reserved_from_metadata,
    stamp_from_metadata, successor_from_metadata,
};
use super::target::{Credential, StorageTarget};
use super::transport::Transport;
use crate::secret::redact;
use azure_core::error::ErrorKind;
use azure_core::prelude::{IfMatchCondition, Metadata};
use azure_core::request_options::LeaseBreakPeriod;
use azure_storage::{CloudLocation, StorageCredentials};
use azure_storage_blobs::prelude::{BlobClient, ClientBuilder, ContainerClient};
use leasehold_core::quorum::{Fingerprint, ReplicaId, Stamp};
use std::sync::Arc;
use std::time::Duration;

/// The lease on an Azure blob (or Azurite's), over the storage SDK: one client per target,
/// whose connections are kept alive between requests.
///
/// Everything the store sends (the lease, the member records, the slots) shares one pair of
/// pools (requests that keep coming often alternate between them, so that the two a
/// woken successor sends side by side both find a connection open), the records' own store
/// (`with_own_connections`) included: the member records' renews and
/// listings (every 10 s or so) then ride on the connection the lease's renews (every 4 s) or a
/// follower's polls (every second) keep open, instead of opening one of their own each time
/// (their own pool's connection had always been closed by the server in between). A renew
/// sent while a listing holds that connection opens a second one; it never waits behind it.
pub struct AzureStore {
    container: ContainerClient,
    blob: BlobClient,
}

impl AzureStore {
    /// A client for each of `replicas` (`[[storage.replica]]`, in the set's order); the error
    /// says which replica's (from 1) cannot be built.
    pub(crate) fn for_replicas(
        replicas: &[StorageTarget],
    ) -> Result<Vec<Self>, (usize, StoreError)> {
        (replicas.iter().enumerate())
            .map(|(i, target)| Self::new(target).map_err(|e| (i + 1, e)))
            .collect()
    }

    /// A client for `target`. Sends nothing yet; fails only when its HTTP client cannot be
    /// built (e.g. `ca_file` holds no usable certificate).
    pub fn new(target: &StorageTarget) -> Result<Self, StoreError> {
        let mut certificates = Vec::new();
        if let Some((path, pem)) = &target.ca_certificates {
            certificates = reqwest::Certificate::from_pem_bundle(pem)
                .ok()
                .filter(|c| !c.is_empty())
                .ok_or_else(|| {
                    StoreError::Client(format!(
                        "[storage].ca_file {}: not a PEM certificate bundle",
                        path.display()
                    ))
                })?;
        }
        let http: Arc<dyn azure_core::HttpClient> = Arc::new(
            Transport::new(certificates)
                .map_err(|e| StoreError::Client(format!("cannot build the HTTP client: {e}")))?,
        );
        let credentials = match &target.credential {
            Credential::AccessKey(key) => StorageCredentials::access_key(
                target.account.clone(),
                azure_core::auth::Secret::new(key.expose().to_owned()),
            ),
            Credential::SasToken(token) => StorageCredentials::sas_token(token.expose())
                .map_err(|_| StoreError::Client("the SAS token cannot be parsed".to_owned()))?,
            Credential::Entra { sources, .. } => StorageCredentials::token_credential(Arc::new(
                EntraCredential::new(sources, http.clone()).map_err(StoreError::Client)?,
            )),
        };
        let location = CloudLocation::Custom {
            account: target.account.clone(),
            uri: target.endpoint.clone(),
        };
        let container = ClientBuilder::with_location(location, credentials)
            .retry(azure_core::RetryOptions::none())
            .transport(azure_core::TransportOptions::new(http))
            .container_client(target.container.clone());
        let blob = container.blob_client(target.blob.clone());
        Ok(Self { container, blob })
    }

    /// Creates the lease blob, empty, with metadata `pairs`, unless a blob of that name exists
    /// (If-None-Match: *, so that a blob created meanwhile, with its epoch, is never
    /// overwritten). Whether this call created it.
    /// Creates the container; one created meanwhile is no error.
    async fn create_container(&self) -> Result<(), StoreError> {
        match self.container.create().await.map_err(convert) {
            Ok(()) => tracing::info!(
                container = %self.container.container_name(),
                "created the container"
            ),
            Err(e) if e.code() == Some("ContainerAlreadyExists") => {}
            Err(e) => return Err(e),
        }
        Ok(())
    }

    async fn create_blob(&self, pairs: Vec<(&'static str, String)>) -> Result<bool, StoreError> {
        let created = self
            .blob
            .put_block_blob(Vec::<u8>::new())
            .metadata(metadata(pairs))
            .if_match(IfMatchCondition::NotMatch("*".to_owned()))
            .await;
        match created.map_err(convert) {
            Ok(_) => Ok(true),
            Err(StoreError::Status {
                status: 409 | 412, ..
            }) => Ok(false),
            Err(other) => Err(other),
        }
    }
}

impl LeaseStore for AzureStore {
    async fn prepare(&self, create: bool) -> Result<(), StoreError> {
        match self.blob.get_properties().await.map_err(convert) {
            Ok(_) => return Ok(()),
            Err(e) if !create || e.failure() != Failure::Missing => return Err(e),
            Err(e) => {
                if e.code() == Some("ContainerNotFound") {
                    self.create_container().await?;
                }
            }
        }
        if self.create_blob(Vec::new()).await? {
            tracing::info!(blob = %self.blob.blob_name(), "created the lease blob");
        }
        Ok(())
    }

    async fn acquire(&self, id: LeaseId, seconds: u8) -> Result<(), StoreError> {
        let duration = azure_core::request_options::LeaseDuration::Seconds(seconds);
        done(
            self.blob
                .acquire_lease(duration)
                .proposed_lease_id(lease_id(id)),
        )
        .await
    }

    async fn renew(&self, id: LeaseId) -> Result<(), StoreError> {
        done(self.blob.blob_lease_client(lease_id(id)).renew()).await
    }

    async fn release(&self, id: LeaseId) -> Result<(), StoreError> {
        done(self.blob.blob_lease_client(lease_id(id)).release()).await
    }

    async fn break_lease(&self, period: Duration) -> Result<u64, StoreError> {
        let response = self
            .blob
            .break_lease()
            .lease_break_period(LeaseBreakPeriod::from(period))
            .await
            .map_err(convert)?;
        Ok(response.lease_time.into())
    }
}

impl GroupStore for AzureStore {
    async fn read(&self) -> Result<BlobState, StoreError> {
        self.read_stamped().await.map(|(state, _)| state)
    }

    async fn read_stamped(&self) -> Result<(BlobState, Stamp), StoreError> {
        let answer = self.blob.get_properties().await.map_err(convert)?;
        let age = (answer.date - answer.blob.properties.creation_time)
            .try_into()
            .unwrap_or_default();
        let blob = answer.blob;
        let lease = lease_state(blob.properties.lease_state);
        let metadata = blob.metadata.unwrap_or_default();
        let get = |key: &str| {
            metadata
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(key))
                .map(|(_, v)| v.as_str())
        };
        let holder = holder_from_metadata(get)?;
        let state = BlobState {
            lease,
            holder,
            etag: ETag(blob.properties.etag.to_string()),
            successor: successor_from_metadata(get),
            passed_over: passed_over_from_metadata(get),
            reserved: reserved_from_metadata(get),
            recreated: recreated_from_metadata(get),
            age,
        };
        Ok((state, stamp_from_metadata(get)))
    }

    async fn check_lease(&self, id: LeaseId) -> Result<LeaseCheck, StoreError> {
        match self
            .blob
            .get_properties()
            .lease_id(lease_id(id))
            .await
            .map_err(convert)
        {
            Ok(_) => Ok(LeaseCheck::Active),
            Err(e) => match (&e, e.code()) {
                (
                    StoreError::Status { status: 412, .. },
                    Some("LeaseIdMismatchWithBlobOperation"),
                ) => Ok(LeaseCheck::HeldByAnother),
                (
                    StoreError::Status { status: 412, .. },
                    Some("LeaseNotPresentWithBlobOperation"),
                ) => Ok(LeaseCheck::NotLeased),
                _ => Err(e),
            },
        }
    }

    async fn write_holder(
        &self,
        id: LeaseId,
        etag: &ETag,
        holder: &Holder,
    ) -> Result<ETag, StoreError> {
        self.blob
            .set_metadata()
            .metadata(metadata(holder_to_metadata(holder)))
            .lease_id(lease_id(id))
            .if_match(IfMatchCondition::Match(etag.0.clone()))
            .await
            .map(|written| ETag(written.etag))
            .map_err(convert)
    }

    async fn change(
        &self,
        id: LeaseId,
        proposed: LeaseId,
        if_match: Option<&ETag>,
    ) -> Result<(), StoreError> {
        let mut request = self.blob.blob_lease_client(lease_id(id)).change(
            azure_core::request_options::ProposedLeaseId::from(lease_id(proposed)),
        );
        if let Some(etag) = if_match {
            request = request.if_match(IfMatchCondition::Match(etag.0.clone()));
        }
        done(request).await
    }

    async fn write_notice(
        &self,
        id: LeaseId,
        holder: &Holder,
        notice: &Notice,
        if_match: Option<&ETag>,
    ) -> Result<ETag, StoreError> {
        let mut pairs = holder_to_metadata(holder);
        pairs.extend(notice.to_metadata());
        let mut request = self
            .blob
            .set_metadata()
            .metadata(metadata(pairs))
            .lease_id(lease_id(id));
        if let Some(etag) = if_match {
            request = request.if_match(IfMatchCondition::Match(etag.0.clone()));
        }
        let written = request.await.map_err(convert)?;
        Ok(ETag(written.etag))
    }

    async fn release_if(&self, id: LeaseId, etag: &ETag) -> Result<(), StoreError> {
        done(
            self.blob
                .blob_lease_client(lease_id(id))
                .release()
                .if_match(IfMatchCondition::Match(etag.0.clone())),
        )
        .await
    }

    async fn recreate(&self, by: &str) -> Result<(), StoreError> {
        if self
            .create_blob(vec![(META_RECREATED, by.to_owned())])
            .await?
        {
            tracing::warn!(blob = %self.blob.blob_name(), "created the lease blob again, under a lock-delay");
        }
        Ok(())
    }

    async fn create_stamped(&self, fingerprint: Fingerprint) -> Result<(), StoreError> {
        let id = ReplicaId(uuid::Uuid::new_v4().as_u128());
        let stamp = vec![
            (META_REPLICA_SET, fingerprint.to_string()),
            (META_REPLICA_ID, id.to_string()),
        ];
        let created = match self.create_blob(stamp.clone()).await {
            Err(e) if e.code() == Some("ContainerNotFound") => {
                self.create_container().await?;
                self.create_blob(stamp).await?
            }
            created => created?,
        };
        if created {
            tracing::info!(blob = %self.blob.blob_name(), "created the replica's lease blob, stamped with its set");
        }
        Ok(())
    }

    fn slot(&self, slot: u32) -> Arc<Self> {
        let name = format!("{}{SLOTS_SUFFIX}{slot}", self.blob.blob_name());
        Arc::new(Self {
            blob: self.container.blob_client(name),
            container: self.container.clone(),
        })
    }

    async fn read_member(&self, key: &MemberKey) -> Result<(LeaseState, ETag), StoreError> {
        let blob = self
            .member(key)
            .get_properties()
            .await
            .map_err(convert)?
            .blob;
        Ok((
            lease_state(blob.properties.lease_state),
            record_etag(&blob.properties.etag),
        ))
    }

    async fn read_record(&self, key: &MemberKey) -> Result<Option<MemberRecord>, StoreError> {
        let answer = self.member(key).get_properties().await.map_err(convert)?;
        let blob = answer.blob;
        let metadata = blob.metadata.clone().unwrap_or_default();
        let get = |k: &str| {
            metadata
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(k))
                .map(|(_, v)| v.as_str())
        };
        Ok(member_record(
            key.as_str(),
            &blob.properties,
            get,
            answer.date,
        ))
    }

    async fn list_group(&self) -> Result<(Vec<MemberRecord>, Vec<SlotRecord>), StoreError> {
        self.list(self.blob.blob_name().to_owned()).await
    }

    async fn list_members(&self) -> Result<Vec<MemberRecord>, StoreError> {
        let prefix = format!("{}{MEMBERS_SUFFIX}", self.blob.blob_name());
        Ok(self.list(prefix).await?.0)
    }

    async fn create_member(&self, key: &MemberKey, member: &Member) -> Result<(), StoreError> {
        done(
            self.member(key)
                .put_block_blob(Vec::<u8>::new())
                .metadata(metadata(member.to_metadata()))
                .if_match(IfMatchCondition::NotMatch("*".to_owned())),
        )
        .await
    }

    async fn acquire_member(
        &self,
        key: &MemberKey,
        id: LeaseId,
        seconds: u8,
    ) -> Result<(), StoreError> {
        let duration = azure_core::request_options::LeaseDuration::Seconds(seconds);
        done(
            self.member(key)
                .acquire_lease(duration)
                .proposed_lease_id(lease_id(id)),
        )
        .await
    }

    async fn renew_member(&self, key: &MemberKey, id: LeaseId) -> Result<(), StoreError> {
        done(self.member(key).blob_lease_client(lease_id(id)).renew()).await
    }

    async fn write_member(
        &self,
        key: &MemberKey,
        id: LeaseId,
        member: &Member,
    ) -> Result<(), StoreError> {
        done(
            self.member(key)
                .set_metadata()
                .metadata(metadata(member.to_metadata()))
                .lease_id(lease_id(id)),
        )
        .await
    }

    async fn delete_member(
        &self,
        key: &MemberKey,
        lease: Option<LeaseId>,
        etag: Option<&ETag>,
    ) -> Result<(), StoreError> {
        let mut request = self.member(key).delete();
        if let Some(id) = lease {
            request = request.lease_id(lease_id(id));
        }
        if let Some(etag) = etag {
            request = request.if_match(IfMatchCondition::Match(etag.0.clone()));
        }
        done(request).await
    }
}

impl AzureStore {
    /// Lists the blobs whose names start with `prefix` (all pages, with metadata): the member
    /// records and the slot blobs among them.
    async fn list(
        &self,
        prefix: String,
    ) -> Result<(Vec<MemberRecord>, Vec<SlotRecord>), StoreError> {
        use futures::StreamExt;
        let group = self.blob.blob_name();
        let members_prefix = format!("{group}{MEMBERS_SUFFIX}");
        let slots_prefix = format!("{group}{SLOTS_SUFFIX}");
        let mut pages = self
            .container
            .list_blobs()
            .prefix(prefix)
            .include_metadata(true)
            .into_stream();
        let (mut records, mut slots) = (Vec::new(), Vec::new());
        while let Some(page) = pages.next().await {
            let page = page.map_err(convert)?;
            for blob in page.blobs.blobs() {
                let metadata = blob.metadata.clone().unwrap_or_default();
                let get = |key: &str| {
                    metadata
                        .iter()
                        .find(|(k, _)| k.eq_ignore_ascii_case(key))
                        .map(|(_, v)| v.as_str())
                };
                let slot = if blob.name == group {
                    Some(0)
                } else {
                    blob.name
                        .strip_prefix(&slots_prefix)
                        .and_then(|i| i.parse::<u32>().ok())
                        .filter(|i| *i >= 1 && blob.name == format!("{slots_prefix}{i}"))
                };
                if let Some(slot) = slot {
                    // A slot whose metadata is not a leader's counts as free of a holder.
                    slots.push(SlotRecord {
                        slot,
                        lease: lease_state(blob.properties.lease_state),
                        holder: holder_from_metadata(get).ok().flatten(),
                        successor: successor_from_metadata(get),
                    });
                    continue;
                }
                let Some(key) = blob.name.strip_prefix(&members_prefix) else {
                    continue;
                };
                match member_record(key, &blob.properties, get, page.date) {
                    Some(record) => records.push(record),
                    None => tracing::debug!(name = %blob.name, "not a member record; left out"),
                }
            }
        }
        Ok((records, slots))
    }

    /// The record `key` beside the lease blob.
    fn member(&self, key: &MemberKey) -> BlobClient {
        self.container
            .blob_client(key.blob_name(self.blob.blob_name()))
    }
}

/// A member record's ETag as a listing shows it: a listing gives it bare, Get Blob Properties
/// in quotes (`"0x..."`), and a record read must compare equal to the same record listed (a
/// waiting member's watch compares the two; a handoff puts a read record in the line).
fn record_etag(etag: &azure_core::Etag) -> ETag {
    ETag(etag.to_string().trim_matches('"').to_owned())
}

/// The member record a blob holds, named `key` (its name under the members' folder), from its
/// properties and metadata (`get`) in an answer dated `date`: `None` unless its metadata is a
/// member's and names it after that member's identity (only the record a member writes for
/// itself counts).
fn member_record<'m>(
    key: &str,
    properties: &azure_storage_blobs::blob::BlobProperties,
    get: impl Fn(&str) -> Option<&'m str>,
    date: time::OffsetDateTime,
) -> Option<MemberRecord> {
    let member = Member::from_metadata(get).ok()?;
    let named = MemberKey::of(&member.identity);
    (named.as_str() == key).then(|| MemberRecord {
        key: named,
        member,
        joined: properties.creation_time,
        lease: lease_state(properties.lease_state),
        etag: record_etag(&properties.etag),
        age: (date - properties.creation_time)
            .try_into()
            .unwrap_or_default(),
    })
}

fn lease_state(state: Option<azure_core::LeaseState>) -> LeaseState {
    use azure_core::LeaseState as Sdk;
    match state {
        Some(Sdk::Leased) => LeaseState::Leased,
        Some(Sdk::Expired) => LeaseState::Expired,
        Some(Sdk::Breaking) => LeaseState::Breaking,
        Some(Sdk::Broken) => LeaseState::Broken,
        Some(Sdk::Available) | None => LeaseState::Available,
    }
}

fn metadata(pairs: Vec<(&'static str, String)>) -> Metadata {
    let mut metadata = Metadata::new();
    for (k, v) in pairs {
        metadata.insert(k, v);
    }
    metadata
}

/// Sends `request`; only whether it succeeded matters.
async fn done<T>(
    request: impl IntoFuture<Output = azure_core::Result<T>>,
) -> Result<(), StoreError> {
    request.await.map(drop).map_err(convert)
}

fn lease_id(id: LeaseId) -> azure_core::prelude::LeaseId {
    azure_core::prelude::LeaseId::from(id.0)
}

/// Maps an SDK error to ours without its text: the SDK's messages quote request URLs, which carry
/// SAS tokens, and its connection-string errors quote the whole string.
fn convert(e: azure_core::Error) -> StoreError {
    match e.kind() {
        ErrorKind::HttpResponse { status, error_code } => StoreError::Status {
            status: u16::from(*status),
            code: error_code.clone(),
        },
        ErrorKind::Io => StoreError::Unreachable(transport_reason(&e)),
        // The SDK wraps every token failure as "failed to get bearer token"; the cause says why.
        ErrorKind::Credential => match std::error::Error::source(&e) {
            Some(cause) if identity::is_transient(cause) => StoreError::Unreachable(format!(
                "no Entra ID token yet: {}",
                identity::describe(cause)
            )),
            Some(cause) => StoreError::Token(identity::describe(cause)),
            None => StoreError::Client("the credential could not sign the request".to_owned()),
        },
        kind => StoreError::Client(redact(&format!("{kind}: {e}"))),
    }
}

/// The innermost cause of a transport error ("Connection refused", "dns error"), redacted.
fn transport_reason(e: &azure_core::Error) -> String {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    let mut reason = None;
    while let Some(s) = source {
        reason = Some(s.to_string());
        source = s.source();
    }
    let reason = redact(&reason.unwrap_or_else(|| "connection failed".to_owned()));
    if reason.contains("certificate") || reason.contains("UnknownIssuer") {
        format!(
            "{reason} (if the endpoint's certificate comes from a private CA, trust it with [storage].ca_file)"
        )
    } else {
        reason
    }
}
