//! One storage request of an operator command: how long it may take, and how its failure is
//! said in one line.

use crate::store::StoreError;
use crate::store::target::StorageTarget;
use std::future::Future;
use std::time::Duration;

/// No single request of an operator command waits longer than this.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// What to look at when storage does not answer: `check`'s hint, and the error line of every
/// other command.
pub const UNREACHABLE_HINT: &str = "check [storage].endpoint (or the connection string's \
    BlobEndpoint / account name), DNS, proxies and firewalls, and that the service is running";

/// A failed request as an operator command says it in one line: where storage was looked for
/// and what to check when it did not answer; for a container or blob that is not there, which
/// one, where, and the likely causes; the error itself otherwise.
pub fn storage_error_line(e: &StoreError, target: &StorageTarget) -> String {
    let endpoint = crate::secret::redact_urls(&target.endpoint);
    let (container, blob) = (&target.container, &target.blob);
    match e {
        StoreError::Unreachable(_) | StoreError::TimedOut(_) => {
            format!("cannot reach storage at {endpoint}: {e}; {UNREACHABLE_HINT}")
        }
        StoreError::Status { status: 404, code }
            if code.as_deref() == Some("ContainerNotFound") =>
        {
            format!(
                "there is no container {container:?} at {endpoint} (storage answered 404 \
                 ContainerNotFound): check [storage].container (--container) for a typo, and \
                 the account; or nothing has run in this group yet: the first `leasehold run` \
                 creates it (create_if_missing = true, the default)"
            )
        }
        StoreError::Status { status: 404, code } => format!(
            "there is no lease blob {blob:?} in container {container:?} at {endpoint} (storage \
             answered 404 {}): check [storage].blob (--blob) and [storage].container for a \
             typo; or nothing has run in this group yet: the first `leasehold run` creates it \
             (create_if_missing = true, the default)",
            code.as_deref().unwrap_or("BlobNotFound")
        ),
        _ => e.to_string(),
    }
}

/// `request`, or a timeout after [`REQUEST_TIMEOUT`].
pub(super) async fn within<T>(
    request: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    tokio::time::timeout(REQUEST_TIMEOUT, request)
        .await
        .unwrap_or(Err(StoreError::TimedOut(REQUEST_TIMEOUT)))
}
