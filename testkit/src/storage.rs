//! The storage side as an operator (or a cleanup script) sees it, through the storage SDK beside
//! the daemons: a group's blob ([`BlobAdmin`]: its lease, its metadata, deleting it) and an
//! Azurite account (containers, listings, SAS tokens). Things leasehold itself never does.

use crate::azurite::Azurite;
use azure_core::RetryOptions;
use azure_storage::{CloudLocation, ConnectionString, StorageCredentials};
use azure_storage_blobs::prelude::{BlobClient, ClientBuilder, ContainerClient};
use std::time::{Duration, Instant};

/// A client for `account` at `endpoint`, without the SDK's retries: a test sees each answer.
fn client(account: &str, endpoint: &str, credentials: StorageCredentials) -> ClientBuilder {
    ClientBuilder::with_location(
        CloudLocation::Custom {
            account: account.to_owned(),
            uri: endpoint.to_owned(),
        },
        credentials,
    )
    .retry(RetryOptions::none())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime for the storage SDK")
}

/// One blob of a group (the lease blob), reached with the group's connection string.
pub struct BlobAdmin {
    blob: BlobClient,
    rt: tokio::runtime::Runtime,
}

/// A member record beside a group's lease blob (`<blob>.members/<key>`), as List Blobs shows it:
/// what the tests check of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberProbe {
    /// `leasehold_member`: the member's identity.
    pub identity: String,
    /// Whether its record lease is held: the member is alive.
    pub alive: bool,
    /// `leasehold_wake_token`: what a `POST /wake` to it must carry, when it publishes one.
    pub wake_token: Option<String>,
}

impl BlobAdmin {
    /// The blob `blob` in `container`, with the account, key and blob endpoint of
    /// `connection_string`.
    pub fn new(connection_string: &str, container: &str, blob: &str) -> Self {
        let parsed = ConnectionString::new(connection_string).expect("a connection string");
        let account = parsed.account_name.expect("AccountName=");
        let endpoint = parsed.blob_endpoint.expect("BlobEndpoint=");
        let credentials = parsed.storage_credentials().expect("AccountKey=");
        Self {
            blob: client(account, endpoint, credentials).blob_client(container, blob),
            rt: runtime(),
        }
    }

    /// Breaks whatever lease the blob has; others may acquire after `period`.
    pub fn break_lease(&self, period: Duration) -> Result<(), String> {
        let period = azure_core::request_options::LeaseBreakPeriod::from(period);
        self.rt
            .block_on(
                self.blob
                    .break_lease()
                    .lease_break_period(period)
                    .into_future(),
            )
            .map(drop)
            .map_err(|e| e.to_string())
    }

    /// Deletes the blob whoever holds it: its lease broken at once (if it has one), then the
    /// blob, a few milliseconds apart, as an operator wiping a container would. A member may
    /// acquire the broken lease in between (the delete then needs its lease id: 412): broken
    /// again, up to five times.
    pub fn break_and_delete(&self) -> Result<(), String> {
        let mut last = String::new();
        for _ in 0..5 {
            // Not leased: nothing to break (the service says so), and the delete goes through.
            let _ = self.break_lease(Duration::ZERO);
            match self.rt.block_on(self.blob.delete().into_future()) {
                Ok(_) => return Ok(()),
                Err(e) => last = e.to_string(),
            }
        }
        Err(last)
    }

    /// Whether nobody holds the lease: an acquire with a fresh lease id succeeds (and is
    /// released at once) only then.
    pub fn lease_is_free(&self) -> bool {
        let id = azure_core::prelude::LeaseId::from(uuid::Uuid::new_v4());
        let acquired = self.rt.block_on(
            self.blob
                .acquire_lease(Duration::from_secs(15))
                .proposed_lease_id(id)
                .into_future(),
        );
        if acquired.is_err() {
            return false;
        }
        self.rt
            .block_on(self.blob.blob_lease_client(id).release().into_future())
            .expect("release the probe lease");
        true
    }

    /// The member records beside the blob, in the order List Blobs gives them (by name).
    pub fn member_records(&self) -> Result<Vec<MemberProbe>, String> {
        use futures::StreamExt;
        let prefix = format!("{}.members/", self.blob.blob_name());
        let container = self.blob.container_client();
        self.rt.block_on(async {
            let mut records = Vec::new();
            let mut pages = container
                .list_blobs()
                .prefix(prefix)
                .include_metadata(true)
                .into_stream();
            while let Some(page) = pages.next().await {
                let page = page.map_err(|e| format!("List Blobs failed: {e}"))?;
                for blob in page.blobs.blobs() {
                    let meta = blob.metadata.clone().unwrap_or_default();
                    let get = |key: &str| {
                        meta.iter()
                            .find(|(k, _)| k.eq_ignore_ascii_case(key))
                            .map(|(_, v)| v.clone())
                    };
                    records.push(MemberProbe {
                        identity: get("leasehold_member").unwrap_or_default(),
                        alive: matches!(
                            blob.properties.lease_state,
                            Some(azure_core::LeaseState::Leased)
                        ),
                        wake_token: get("leasehold_wake_token"),
                    });
                }
            }
            Ok(records)
        })
    }

    /// Whether the blob is leased now (Get Blob Properties), without taking the lease.
    pub fn is_leased(&self) -> Result<bool, String> {
        let properties = self
            .rt
            .block_on(self.blob.get_properties().into_future())
            .map_err(|e| e.to_string())?;
        Ok(matches!(
            properties.blob.properties.lease_state,
            Some(azure_core::LeaseState::Leased)
        ))
    }

    /// Deletes the blob, with its metadata and so its epoch. Fails while it is leased.
    pub fn delete(&self) {
        self.rt
            .block_on(self.blob.delete().into_future())
            .expect("delete the blob");
    }

    /// Deletes the blob under its holder's lease, with the lease id its metadata records (as anyone
    /// who can read the metadata could): the holder loses blob, lease and epoch at once
    /// (docs/safety.md, "Recovery from anything"). Tried for up to 5 s while the blob is between
    /// holders.
    pub fn delete_under_lease(&self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let attempt = self.rt.block_on(async {
                let properties = self
                    .blob
                    .get_properties()
                    .into_future()
                    .await
                    .map_err(|e| e.to_string())?;
                let id = properties
                    .blob
                    .metadata
                    .as_ref()
                    .and_then(|m| m.get("leasehold_lease_id"))
                    .ok_or("the blob's metadata records no lease id")?
                    .parse::<uuid::Uuid>()
                    .map_err(|e| e.to_string())?;
                self.blob
                    .delete()
                    .lease_id(azure_core::request_options::LeaseId::from(id))
                    .into_future()
                    .await
                    .map_err(|e| e.to_string())?;
                Ok::<(), String>(())
            });
            match attempt {
                Ok(()) => return Ok(()),
                Err(e) if Instant::now() < deadline => {
                    eprintln!("delete the blob under its lease: {e}; again");
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The blob's metadata, by key (keys as the service returns them).
    pub fn metadata(&self) -> Result<std::collections::BTreeMap<String, String>, String> {
        let properties = self
            .rt
            .block_on(self.blob.get_properties().into_future())
            .map_err(|e| e.to_string())?;
        Ok(properties
            .blob
            .metadata
            .unwrap_or_default()
            .into_iter()
            .collect())
    }

    /// Writes the blob's metadata again as it is, plus `extra`, under its holder's lease (the
    /// lease id its metadata records, as anyone who can read the metadata could): the ETag
    /// changes, and nothing a leader wrote does.
    pub fn rewrite_metadata_under_lease(&self, extra: (&str, &str)) -> Result<(), String> {
        let mut pairs = self.metadata()?;
        let id = pairs
            .get("leasehold_lease_id")
            .ok_or("the blob's metadata records no lease id")?
            .parse::<uuid::Uuid>()
            .map_err(|e| e.to_string())?;
        pairs.insert(extra.0.to_owned(), extra.1.to_owned());
        let pairs: Vec<(&str, &str)> = pairs
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        self.rt
            .block_on(
                self.blob
                    .set_metadata()
                    .metadata(metadata(&pairs))
                    .lease_id(azure_core::request_options::LeaseId::from(id))
                    .into_future(),
            )
            .map(drop)
            .map_err(|e| e.to_string())
    }

    /// Takes the lease by hand, for `duration` (15..60 s) with a fresh lease id, and writes
    /// `pairs` into the metadata under it with that id as `leasehold_lease_id`: what a holder
    /// writes once it has acquired (its `leasehold_holder`, `leasehold_epoch`, ... in `pairs`).
    /// The blob must exist. Returns the lease id.
    pub fn hold(&self, duration: Duration, pairs: &[(&str, &str)]) -> Result<String, String> {
        let id = uuid::Uuid::new_v4();
        let lease = azure_core::prelude::LeaseId::from(id);
        self.rt
            .block_on(
                self.blob
                    .acquire_lease(duration)
                    .proposed_lease_id(lease)
                    .into_future(),
            )
            .map_err(|e| format!("acquire: {e}"))?;
        let id = id.to_string();
        let mut pairs = pairs.to_vec();
        pairs.push(("leasehold_lease_id", &id));
        self.rt
            .block_on(
                self.blob
                    .set_metadata()
                    .metadata(metadata(&pairs))
                    .lease_id(lease)
                    .into_future(),
            )
            .map_err(|e| format!("write the metadata under the lease: {e}"))?;
        Ok(id)
    }

    pub fn exists(&self) -> bool {
        self.rt
            .block_on(self.blob.exists())
            .expect("ask whether the blob exists")
    }

    /// Replaces the blob's metadata. While a daemon holds the lease for a moment (an attempt
    /// that is refused and released), the write is refused (412) and tried again, for up to 5 s.
    pub fn set_metadata(&self, pairs: &[(&str, &str)]) {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let written = self.rt.block_on(
                self.blob
                    .set_metadata()
                    .metadata(metadata(pairs))
                    .into_future(),
            );
            match written {
                Ok(_) => return,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("set the metadata: {e}; again");
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => panic!("set the metadata: {e}"),
            }
        }
    }

    /// Creates the blob, empty, with this metadata (and its container, if missing).
    pub fn create(&self, pairs: &[(&str, &str)]) {
        let container = self.blob.container_client();
        let _ = self.rt.block_on(container.create().into_future());
        self.rt
            .block_on(
                self.blob
                    .put_block_blob(Vec::<u8>::new())
                    .metadata(metadata(pairs))
                    .into_future(),
            )
            .expect("create the blob");
    }
}

fn metadata(pairs: &[(&str, &str)]) -> azure_core::prelude::Metadata {
    let mut metadata = azure_core::prelude::Metadata::new();
    for (k, v) in pairs {
        metadata.insert(k.to_string(), v.to_string());
    }
    metadata
}

/// An account of a plain-http Azurite, with its key.
impl Azurite {
    fn container_client(&self, container: &str) -> ContainerClient {
        let (account, key) = self.account();
        client(
            account,
            &self.endpoint(),
            StorageCredentials::access_key(account.to_owned(), key.to_owned()),
        )
        .container_client(container)
    }

    /// Creates `container` with the account key (a SAS limited to one container cannot).
    pub fn create_container(&self, container: &str) {
        runtime()
            .block_on(self.container_client(container).create().into_future())
            .expect("create the container");
    }

    /// The names of the blobs in `container`, as the service lists them (List Blobs sends no
    /// blob name, so nothing on the way can rewrite one).
    pub fn list_blobs(&self, container: &str) -> Result<Vec<String>, String> {
        use futures::StreamExt;
        let client = self.container_client(container);
        runtime().block_on(async {
            let mut names = Vec::new();
            let mut pages = client.list_blobs().into_stream();
            while let Some(page) = pages.next().await {
                let page = page.map_err(|e| format!("List Blobs failed: {e}"))?;
                names.extend(page.blobs.blobs().map(|b| b.name.clone()));
            }
            Ok(names)
        })
    }

    /// A service SAS for `container` with `permissions` (some of `r`, `a`, `c`, `w`), valid for
    /// an hour, signed with the account key by the SDK's signer.
    pub fn container_sas(&self, container: &str, permissions: &str) -> String {
        use azure_storage::shared_access_signature::SasToken;
        use azure_storage::shared_access_signature::service_sas::{
            BlobSasPermissions, BlobSharedAccessSignature, BlobSignedResource,
        };
        let (account, key) = self.account();
        let has = |c: char| permissions.contains(c);
        let sas = BlobSharedAccessSignature::new(
            azure_core::auth::Secret::new(key.to_owned()),
            format!("/blob/{account}/{container}"),
            BlobSasPermissions {
                read: has('r'),
                add: has('a'),
                create: has('c'),
                write: has('w'),
                ..BlobSasPermissions::default()
            },
            time::OffsetDateTime::now_utc() + time::Duration::hours(1),
            BlobSignedResource::Container,
        );
        sas.token().expect("sign the SAS")
    }
}
