//! Entra ID tokens on paused time: the cache and its background renewal, a failing source
//! retried after a pause, a chain keeping the source that works; expiries, endpoint failures
//! and descriptions.

use super::*;
use std::sync::atomic::AtomicUsize;

/// A token source that counts its calls, takes `delay`, and hands out tokens that live
/// `lifetime`, or fails.
#[derive(Debug)]
struct Scripted {
    calls: Arc<AtomicUsize>,
    delay: Duration,
    lifetime: Duration,
    /// Calls from this one on fail.
    fails_from: usize,
}

#[async_trait::async_trait]
impl TokenCredential for Scripted {
    async fn get_token(&self, _: &[&str]) -> azure_core::Result<AccessToken> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(self.delay).await;
        if n >= self.fails_from {
            return Err(Error::message(ErrorKind::Credential, "not here"));
        }
        Ok(AccessToken::new(
            format!("token-{n}"),
            OffsetDateTime::now_utc() + self.lifetime,
        ))
    }
    async fn clear_cache(&self) -> azure_core::Result<()> {
        Ok(())
    }
}

/// How many times a [`Scripted`] source was asked.
struct Calls(Arc<AtomicUsize>);

impl Calls {
    fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

fn scripted(delay_ms: u64, lifetime_s: u64, fails: bool) -> (Box<Scripted>, Calls) {
    scripted_failing_from(delay_ms, lifetime_s, if fails { 0 } else { usize::MAX })
}

fn scripted_failing_from(
    delay_ms: u64,
    lifetime_s: u64,
    fails_from: usize,
) -> (Box<Scripted>, Calls) {
    let calls = Arc::new(AtomicUsize::new(0));
    let source = Scripted {
        calls: calls.clone(),
        delay: Duration::from_millis(delay_ms),
        lifetime: Duration::from_secs(lifetime_s),
        fails_from,
    };
    (Box::new(source), Calls(calls))
}

/// A credential with `source` as its only source.
fn only(source: Box<Scripted>) -> EntraCredential {
    EntraCredential::from_sources(vec![("s", source)], vec![false])
}

const SCOPE: &[&str] = &["https://storage.azure.com/.default"];

#[tokio::test]
async fn a_token_is_kept_then_renewed_in_the_background() {
    let (source, calls) = scripted(0, 3600, false);
    let credential = only(source);
    let first = credential.get_token(SCOPE).await.unwrap();
    let again = credential.get_token(SCOPE).await.unwrap();
    assert_eq!(first.token.secret(), again.token.secret());
    assert_eq!(calls.count(), 1, "cached");

    // Inside the renewal window: the current token is returned at once, a new one fetched.
    let (source, calls) = scripted(50, 200, false);
    let credential = only(source);
    let first = credential.get_token(SCOPE).await.unwrap();
    let at_once = tokio::time::timeout(Duration::from_millis(20), credential.get_token(SCOPE))
        .await
        .expect("no waiting for the refresh")
        .unwrap();
    assert_eq!(at_once.token.secret(), first.token.secret());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(calls.count(), 2, "renewed in the background");
    let renewed = credential.get_token(SCOPE).await.unwrap();
    assert_eq!(renewed.token.secret(), "token-1");
}

#[tokio::test(start_paused = true)]
async fn a_failed_background_renewal_is_retried_after_a_pause_not_on_every_request() {
    // The first token lives 200 s: inside the renewal window, outside the expiry margin.
    let (source, calls) = scripted_failing_from(0, 200, 1);
    let credential = only(source);
    let first = credential.get_token(SCOPE).await.unwrap();
    credential.get_token(SCOPE).await.unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(calls.count(), 2, "one background renewal, failed");
    for _ in 0..20 {
        let token = credential.get_token(SCOPE).await.unwrap();
        assert_eq!(token.token.secret(), first.token.secret());
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert_eq!(calls.count(), 2, "not asked again for 20 s");
    tokio::time::sleep(BACKGROUND_RETRY).await;
    credential.get_token(SCOPE).await.unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(calls.count(), 3, "asked again after the pause");
}

#[tokio::test]
async fn a_request_that_stops_waiting_does_not_cancel_the_fetch() {
    let (source, calls) = scripted(100, 3600, false);
    let credential = only(source);
    let gave_up =
        tokio::time::timeout(Duration::from_millis(10), credential.get_token(SCOPE)).await;
    assert!(gave_up.is_err());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let token = credential.get_token(SCOPE).await.unwrap();
    assert_eq!(token.token.secret(), "token-0");
    assert_eq!(calls.count(), 1, "the first fetch finished and was kept");
}

#[tokio::test]
async fn a_chain_keeps_the_first_source_that_works() {
    let (absent, absent_calls) = scripted(0, 3600, true);
    let (present, present_calls) = scripted(0, 10, false);
    let credential = EntraCredential::from_sources(
        vec![("absent", absent), ("present", present)],
        vec![false, false],
    );
    credential.get_token(SCOPE).await.unwrap();
    // The token lives 10 s, less than the margin: every request fetches again, from the
    // chosen source only.
    credential.get_token(SCOPE).await.unwrap();
    assert_eq!(absent_calls.count(), 1);
    assert_eq!(present_calls.count(), 2);

    let (a, _) = scripted(0, 3600, true);
    let (b, _) = scripted(0, 3600, true);
    let none = EntraCredential::from_sources(vec![("a", a), ("b", b)], vec![false, false]);
    let e = none.get_token(SCOPE).await.unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Credential));
    assert_eq!(
        e.to_string(),
        "no source gave a token (a: not here; b: not here)"
    );
}

#[test]
fn expiry_reads_either_form() {
    let on = NumberOrString::String("2000000000".into());
    assert_eq!(expiry(Some(&on), None).unix_timestamp(), 2_000_000_000);
    let on = NumberOrString::Number(2_000_000_000);
    assert_eq!(expiry(Some(&on), None).unix_timestamp(), 2_000_000_000);
    let within = NumberOrString::String("3599".into());
    let left = expiry(None, Some(&within)) - OffsetDateTime::now_utc();
    assert!(left > time::Duration::seconds(3590), "{left}");
}

#[test]
fn token_endpoint_failures_are_sorted_into_retry_and_refusal() {
    let retry = status_error("IMDS", 503, b"");
    assert!(is_transient(&retry));
    let refused = status_error(
        "the managed identity endpoint (IMDS)",
        400,
        br#"{"error":"invalid_request","error_description":"Identity not found"}"#,
    );
    assert!(!is_transient(&refused));
    let text = describe(&refused);
    assert!(
        text.contains("400: invalid_request: Identity not found"),
        "{text}"
    );
    assert!(text.contains("client_id"), "{text}");
}

#[test]
fn descriptions_hide_tokens_and_queries() {
    let e = Error::message(
        ErrorKind::Io,
        "error sending request for url (http://h/t?sig=abc): refused eyJhbGciOi.eyJzdWIi.c2ln",
    );
    let text = describe(&e);
    assert!(!text.contains("sig=abc") && !text.contains("eyJ"), "{text}");
}
