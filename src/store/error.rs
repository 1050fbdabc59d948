//! What a failed storage request was, and how the elector treats it.

use std::time::Duration;

/// A failed store operation. Messages never contain credentials or request URLs.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The service answered with an error status.
    #[error("storage answered {status} {}", code.as_deref().unwrap_or("(no error code)"))]
    Status {
        /// The HTTP status.
        status: u16,
        /// The storage error code (`LeaseAlreadyPresent`, ...), when it sent one.
        code: Option<String>,
    },
    /// No answer: connection refused or reset, DNS, TLS.
    #[error("storage unreachable: {0}")]
    Unreachable(String),
    /// No answer in time (the caller's per-request timeout).
    #[error("storage did not answer within {0:?}")]
    TimedOut(Duration),
    /// No Entra ID token could be had: the identity is not available here, or was refused.
    /// (A token endpoint that cannot be reached is [`StoreError::Unreachable`].)
    #[error("no Entra ID token: {0}")]
    Token(String),
    /// The blob's leasehold metadata is not what a leader writes; refusing to guess an epoch.
    #[error("blob metadata {key} = {value:?} is not valid; fix or delete that metadata key")]
    BadMetadata {
        /// The metadata key.
        key: &'static str,
        /// Its value.
        value: String,
    },
    /// Anything else the client library reported (already redacted).
    #[error("storage client error: {0}")]
    Client(String),
}

/// How the elector treats a failure (the core's: the roles decide by it).
pub use leasehold_core::Failure;

impl leasehold_core::StoreFailure for StoreError {
    fn failure(&self) -> Failure {
        StoreError::failure(self)
    }

    fn condition_failed(&self) -> bool {
        self.code() == Some("ConditionNotMet")
    }

    fn service_answered(&self) -> bool {
        matches!(self, Self::Status { .. })
    }

    fn lease_id_missing(&self) -> bool {
        self.code() == Some("LeaseIdMissing")
    }
}

impl StoreError {
    /// The storage error code, when the service sent one.
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Status { code, .. } => code.as_deref(),
            _ => None,
        }
    }

    /// How the elector treats it.
    pub fn failure(&self) -> Failure {
        match self {
            Self::Status { status, code } => match (*status, code.as_deref().unwrap_or("")) {
                (409, "LeaseAlreadyPresent" | "LeaseIsBreakingAndCannotBeAcquired") => {
                    Failure::Held
                }
                (404, _) => Failure::Missing,
                (409 | 412, _) => Failure::LeaseLost,
                (401 | 403, _) => Failure::Denied,
                (408 | 429 | 500..=599, _) => Failure::Transient,
                _ => Failure::Permanent,
            },
            Self::Token(_) => Failure::Denied,
            Self::Unreachable(_) | Self::TimedOut(_) => Failure::Transient,
            Self::BadMetadata { .. } | Self::Client(_) => Failure::Permanent,
        }
    }

    /// How to fix a refusal, for people.
    pub fn denied_hint(&self) -> &'static str {
        if let StoreError::Token(_) = self {
            return "check that this identity exists here and is set up for leasehold (README, \
                    \"Microsoft Entra ID\")";
        }
        match self.code() {
            Some("AuthorizationPermissionMismatch" | "AuthorizationResourceTypeMismatch") => {
                "the credential is valid but lacks a permission: acquiring the lease and writing \
                 its metadata need write, so a SAS needs sp=rw (and creating a missing container \
                 an account SAS with srt=co), and an Entra ID identity needs the Storage Blob Data \
                 Contributor role"
            }
            Some("AuthenticationFailed" | "AuthorizationFailure") => {
                "check the account key or SAS token (and that the SAS has not expired), or that \
                 the Entra ID token is for this tenant and for https://storage.azure.com"
            }
            Some("AuthorizationSourceIPMismatch" | "AuthorizationProtocolMismatch") => {
                "the storage account's network rules or the SAS's IP/protocol limits refuse this host"
            }
            _ => "check the credential, its permissions and the storage account's settings",
        }
    }

    /// For a renew: does this failure mean someone else may lead already (rule 2)? The core's
    /// rule ([`leasehold_core::StoreFailure::loses_lease`]), callable without its trait.
    pub fn loses_lease(&self) -> bool {
        leasehold_core::StoreFailure::loses_lease(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(s: u16, c: &str) -> StoreError {
        StoreError::Status {
            status: s,
            code: Some(c.to_owned()),
        }
    }

    /// Only a write refused for its ETag is a condition that failed: the acquisition attempt
    /// reads the blob again after it (`leasehold_core::attempt`), and fails at anything else.
    #[test]
    fn a_write_refused_for_its_etag_is_a_condition_that_failed() {
        use leasehold_core::StoreFailure;
        assert!(status(412, "ConditionNotMet").condition_failed());
        assert!(!status(412, "LeaseIdMismatchWithBlobOperation").condition_failed());
        assert!(!status(409, "LeaseAlreadyPresent").condition_failed());
        assert!(!StoreError::Unreachable("refused".into()).condition_failed());
    }

    #[test]
    fn renew_failures_that_lose_the_lease() {
        assert!(status(409, "LeaseIdMismatchWithLeaseOperation").loses_lease());
        assert!(status(409, "LeaseIsBrokenAndCannotBeRenewed").loses_lease());
        assert!(status(404, "BlobNotFound").loses_lease());
        assert!(status(412, "LeaseIdMismatchWithBlobOperation").loses_lease());
        assert!(!status(500, "InternalError").loses_lease());
        assert!(!status(503, "ServerBusy").loses_lease());
        assert!(!status(403, "AuthorizationFailure").loses_lease());
        assert!(!StoreError::TimedOut(Duration::from_secs(1)).loses_lease());
        assert!(!StoreError::Unreachable("refused".into()).loses_lease());
    }
}
