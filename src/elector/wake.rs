//! Wake-ups (docs/succession.md, "The handoff"): a leader that has just handed
//! its lease to a member tells it so with `POST <advertise>/wake`, so that it acquires now instead
//! of at its next poll.
//!
//! A wake-up carries no authority: it only makes this instance try its acquire now, which
//! storage refuses unless the lease was handed to it (or is free). Still, each attempt is a
//! storage request that the account pays for, so only members may send one: each member
//! publishes a random [wake token](Waker::wake) in its record (readable only by those with
//! access to the storage account), and a wake-up must carry the woken member's token in the
//! [`WAKE_HEADER`] header. [`Waker`] is the receiving end (the daemon's `POST /wake` calls it;
//! a program that embeds the elector may too): it refuses a wake-up without the token before
//! anything else, and acts on at most one per [`Pace::WAKE_INTERVAL`] (the core's
//! `leasehold_core::wake` decides); [`send`] is the sending end.

use crate::random;
use crate::secret::Secret;
use crate::store::ETag;
use leasehold_core::Pace;
use leasehold_core::line::Found;
pub use leasehold_core::wake::WakeAnswer;
use leasehold_core::wake::{Wakes, same};
use std::sync::{Arc, Mutex};
use tokio::time::Instant;

/// The header a wake-up carries the woken member's token in.
pub const WAKE_HEADER: &str = "x-leasehold-wake";

/// The header a handoff's wake-up carries the epoch the old leader reserved for the woken member
/// in, with the ETag of the blob as that leader's notice left it: `<epoch> <etag>`
/// (docs/succession.md, "The handoff"). With it the member writes that epoch beside its acquire,
/// instead of reading the blob after it and writing then: one storage round trip less.
pub const HANDOFF_HEADER: &str = "x-leasehold-handoff";

/// The header that makes a `POST /wake` a probe: with the member's wake token in
/// [`WAKE_HEADER`], the process answers 204 if it is the member that token belongs to (401 if
/// not), and does nothing else. A member waiting for a slot asks so of the member ahead of it
/// whose record has not changed: one that answers with another token, or that nothing answers
/// for, is a record whose process is gone (docs/slots.md).
pub const PROBE_HEADER: &str = "x-leasehold-probe";

/// Makes a waiting [`Elector`](crate::Elector) try its acquire now: the receiving end of
/// wake-ups. Cheap to clone; from [`Elector::waker`](crate::Elector::waker).
#[derive(Clone)]
pub struct Waker {
    inner: Arc<Inner>,
}

struct Inner {
    /// The member running now, which answers a wake-up in the caller's step.
    member: Mutex<Option<Arc<dyn Wakeable>>>,
    /// This member's wake token: what a wake-up must carry.
    token: Secret,
    /// The wake-ups answered while no member runs: when the last one was accepted.
    wakes: Mutex<Wakes<Instant, ETag>>,
}

/// A waker with a wake token from the operating system.
impl Default for Waker {
    fn default() -> Self {
        Self::new(random::Source::Os)
    }
}

impl Waker {
    /// A waker whose wake token (a random UUID as 32 hex digits) is drawn from `random`.
    pub(crate) fn new(random: random::Source) -> Self {
        let inner = Inner {
            member: Mutex::new(None),
            token: Secret::new(random.uuid().simple().to_string()),
            wakes: Mutex::new(Wakes::default()),
        };
        Self {
            inner: Arc::new(inner),
        }
    }

    /// Asks the elector to try its acquire now (if it is waiting to campaign), on behalf of a
    /// wake-up that carried `token` (the [`WAKE_HEADER`] header of `POST /wake`). Refuses it
    /// ([`WakeAnswer::WrongToken`]) unless `token` is this member's wake token, the one its
    /// member record publishes; does nothing ([`WakeAnswer::TooSoon`]) when another was
    /// accepted less than a second ago. Never waits, and never logs the token.
    pub fn wake(&self, token: &str) -> WakeAnswer {
        self.wake_handed(token, None)
    }

    /// [`Waker::wake`] for a wake-up that may also carry the [`HANDOFF_HEADER`] header
    /// (`handoff`: its value): the epoch the leader that handed this member the lease reserved
    /// for it, and the blob's ETag as that leader left it. The elector then writes that epoch
    /// beside its acquire, conditional on that ETag and under its own lease id, and leads one
    /// round trip sooner; if the blob changed meanwhile the write is refused and it reads and
    /// writes as without the header. A value that does not parse is ignored.
    pub fn wake_handed(&self, token: &str, handoff: Option<&str>) -> WakeAnswer {
        let matches = same(token.as_bytes(), self.inner.token.expose().as_bytes());
        if let Some(member) = self.member() {
            return member.wake(matches, handoff);
        }
        // No member runs: the wake-up is answered as one would, and wakes nobody.
        self.wakes().wake(matches, Instant::now(), handoff)
    }

    /// A probe ([`PROBE_HEADER`]) carrying `token`: [`WakeAnswer::Accepted`] when it is this
    /// member's wake token, [`WakeAnswer::WrongToken`] otherwise. Nothing is done or counted.
    pub fn probe(&self, token: &str) -> WakeAnswer {
        match same(token.as_bytes(), self.inner.token.expose().as_bytes()) {
            true => WakeAnswer::Accepted,
            false => WakeAnswer::WrongToken,
        }
    }

    /// From now on `member` answers the wake-ups (`None`: no member runs).
    pub(crate) fn attach(&self, member: Option<Arc<dyn Wakeable>>) {
        *self.inner.member.lock().unwrap_or_else(|e| e.into_inner()) = member;
    }

    fn member(&self) -> Option<Arc<dyn Wakeable>> {
        (self.inner.member.lock().unwrap_or_else(|e| e.into_inner())).clone()
    }

    /// This member's wake token, which its record publishes.
    pub(crate) fn token(&self) -> &Secret {
        &self.inner.token
    }

    fn wakes(&self) -> std::sync::MutexGuard<'_, Wakes<Instant, ETag>> {
        self.inner.wakes.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running member, which takes a wake-up in the caller's step and answers it there.
pub(crate) trait Wakeable: Send + Sync {
    /// A wake-up came: whether it carried the member's token, and a handoff's reservation
    /// (the [`HANDOFF_HEADER`] value).
    fn wake(&self, token_matches: bool, handoff: Option<&str>) -> WakeAnswer;
}

/// What a handoff's wake-up tells the woken member ([`HANDOFF_HEADER`]; the core's
/// [`Reserved`](leasehold_core::wake::Reserved)).
pub(crate) type Reserved = leasehold_core::wake::Reserved<ETag>;

/// How a wake-up that was sent ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum WakeSent {
    /// Answered 2xx (accepted): the member tries its acquire now.
    Ok,
    /// Answered 429: another wake-up came first, and the member's attempt for it may have come
    /// before the lease was handed to it; it is awake, but finds the handoff at its next poll.
    Later,
    /// Answered with another status.
    Refused,
    /// Nothing listens there: the connection was refused or reset.
    Unreachable,
    /// No answer within [`Pace::WAKE_SEND_TIMEOUT`].
    Failed,
}

impl WakeSent {
    #[cfg_attr(not(feature = "daemon"), allow(dead_code))]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok | Self::Later => "ok",
            Self::Refused => "refused",
            // Both are "no answer" to whoever reads the metric.
            Self::Unreachable | Self::Failed => "failed",
        }
    }

    /// What a probe that met this found at the URL; the core judges it.
    pub fn found(self) -> Found {
        match self {
            Self::Ok | Self::Later => Found::Itself,
            Self::Refused => Found::Another,
            Self::Unreachable => Found::Nothing,
            Self::Failed => Found::NoAnswer,
        }
    }
}

/// Sends `POST <advertise>/wake` once, with the member's `token` (from its record) in
/// [`WAKE_HEADER`], waiting at most [`Pace::WAKE_SEND_TIMEOUT`]. A failure is only reported: the member
/// finds the handoff at its next poll anyway. Without a token it is a probe (is a process
/// listening there?), whose expected answer is 401.
pub(crate) async fn send(
    client: &reqwest::Client,
    advertise: &str,
    token: Option<&Secret>,
    reserved: Option<&Reserved>,
    probe: bool,
) -> WakeSent {
    let url = format!("{}/wake", advertise.trim_end_matches('/'));
    let mut request = client.post(&url);
    if probe {
        request = request.header(PROBE_HEADER, "1");
    }
    if let Some(token) = token {
        request = request.header(WAKE_HEADER, token.expose());
    }
    if let Some(reserved) = reserved {
        request = request.header(HANDOFF_HEADER, reserved.to_header());
    }
    let sent = tokio::time::timeout(Pace::WAKE_SEND_TIMEOUT, request.send()).await;
    match sent {
        Ok(Ok(answer)) => answered(&url, answer.status(), probe || token.is_none()),
        Ok(Err(e)) if !e.is_timeout() => {
            // Nothing listens there: a member that just left, or a wrong URL. Which, the
            // handoff's confirmation tells (and warns of the wrong URL).
            tracing::info!(url, error = %e, "could not send the wake-up; the member finds the handoff at its next poll");
            WakeSent::Unreachable
        }
        Ok(Err(_)) | Err(_) => {
            tracing::warn!(
                url,
                "no answer to the wake-up within {:?}; the member finds the handoff at its next poll",
                Pace::WAKE_SEND_TIMEOUT
            );
            WakeSent::Failed
        }
    }
}

/// What a wake-up's answer (`status`) means; a probe (or a wake-up without a token) expects
/// 401 from a process that listens there.
fn answered(url: &str, status: reqwest::StatusCode, probe: bool) -> WakeSent {
    match status.as_u16() {
        _ if status.is_success() => WakeSent::Ok,
        429 => WakeSent::Later,
        401 if probe => WakeSent::Refused,
        status => {
            tracing::warn!(url, status, "the wake-up was refused");
            WakeSent::Refused
        }
    }
}

/// Where a leader's wake-ups go: over HTTP to the advertised URL, or (in the simulator) to the
/// simulated member that URL names.
#[derive(Clone)]
pub(crate) enum Sender {
    /// `POST <advertise>/wake` with this client (made at the first wake-up).
    Http(std::sync::Arc<std::sync::OnceLock<Option<reqwest::Client>>>),
    /// The simulator's delivery.
    #[cfg(any(test, feature = "test-util"))]
    Simulated(Deliver),
}

/// The simulator's delivery of a wake-up to the URL it names, with the token and the
/// [`HANDOFF_HEADER`] value it carries; a probe ([`PROBE_HEADER`]) when the last is `true`.
#[cfg(any(test, feature = "test-util"))]
pub(crate) type Deliver = std::sync::Arc<
    dyn Fn(
            &str,
            Option<&Secret>,
            Option<String>,
            bool,
        ) -> futures::future::BoxFuture<'static, WakeSent>
        + Send
        + Sync,
>;

impl Default for Sender {
    fn default() -> Self {
        Self::Http(Default::default())
    }
}

impl Sender {
    /// Makes the HTTP client in the background, if it is not made yet (in the simulator: nothing
    /// to make).
    pub fn warm(&self) {
        // (Without test-util, HTTP is the only sender.)
        #[cfg_attr(not(any(test, feature = "test-util")), allow(irrefutable_let_patterns))]
        if let Self::Http(client) = self {
            let client = client.clone();
            std::thread::Builder::new()
                .name("leasehold-wake-client".into())
                .spawn(move || {
                    client.get_or_init(crate::elector::wake::client);
                })
                .ok();
        }
    }

    /// Sends one wake-up with `token` (and the epoch `reserved` for the member, if any) to
    /// `advertise`, as [`send`] does.
    pub async fn send(
        &self,
        advertise: &str,
        token: Option<&Secret>,
        reserved: Option<&Reserved>,
    ) -> WakeSent {
        self.deliver(advertise, token, reserved, false).await
    }

    /// Asks the process at `advertise` whether it is the member whose wake `token` that is
    /// ([`PROBE_HEADER`]): [`WakeSent::Ok`] if it is, [`WakeSent::Refused`] if another process
    /// answers, [`WakeSent::Unreachable`] if none does, [`WakeSent::Failed`] without an answer.
    pub async fn probe(&self, advertise: &str, token: &Secret) -> WakeSent {
        self.deliver(advertise, Some(token), None, true).await
    }

    async fn deliver(
        &self,
        advertise: &str,
        token: Option<&Secret>,
        reserved: Option<&Reserved>,
        probe: bool,
    ) -> WakeSent {
        match self {
            Self::Http(client) => match client.get_or_init(crate::elector::wake::client) {
                Some(client) => send(client, advertise, token, reserved, probe).await,
                None => WakeSent::Failed,
            },
            #[cfg(any(test, feature = "test-util"))]
            Self::Simulated(deliver) => {
                deliver(advertise, token, reserved.map(Reserved::to_header), probe).await
            }
        }
    }
}

/// The client wake-ups are sent with: no proxy from the environment (the peers are on the
/// group's own network), a connect timeout within [`Pace::WAKE_SEND_TIMEOUT`], and no redirect followed
/// (an advertised URL comes from a member record, which anyone who can write to the container
/// can forge: the leader sends the wake-up there and nowhere else).
pub(crate) fn client() -> Option<reqwest::Client> {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Pace::WAKE_SEND_TIMEOUT)
        .timeout(Pace::WAKE_SEND_TIMEOUT)
        .build()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn one_wake_up_per_interval_and_only_with_the_token() {
        let waker = Waker::default();
        let token = waker.token().expose().to_owned();
        assert_eq!(token.len(), 32);
        assert_ne!(
            token,
            Waker::default().token().expose(),
            "a token of its own"
        );
        assert!(
            !format!("{:?}", waker.token()).contains(&token),
            "never shown"
        );
        // Without the token: refused, and it does not count against the interval.
        for forged in [
            "",
            "nope",
            &token[..31],
            &format!("{token}0"),
            &token.to_uppercase(),
        ] {
            assert_eq!(waker.wake(forged), WakeAnswer::WrongToken, "{forged:?}");
        }
        assert_eq!(waker.wake(&token), WakeAnswer::Accepted);
        assert_eq!(waker.wake(&token), WakeAnswer::TooSoon);
        tokio::time::advance(Pace::WAKE_INTERVAL - Duration::from_millis(1)).await;
        assert_eq!(
            waker.clone().wake(&token),
            WakeAnswer::TooSoon,
            "from a clone"
        );
        assert_eq!(waker.wake("nope"), WakeAnswer::WrongToken);
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(waker.wake(&token), WakeAnswer::Accepted);
    }

    /// A running member answers the wake-ups, in the caller's step, whatever their token
    /// (the member compares nothing: it is told whether the token matched); with none, the
    /// Waker answers alone and wakes nobody.
    #[tokio::test(start_paused = true)]
    async fn the_running_member_answers_a_wake_up_in_the_callers_step() {
        type Told = std::sync::Mutex<Vec<(bool, Option<String>)>>;
        struct Member(Told);
        impl Wakeable for Member {
            fn wake(&self, token_matches: bool, handoff: Option<&str>) -> WakeAnswer {
                let told = (token_matches, handoff.map(str::to_owned));
                self.0.lock().unwrap().push(told);
                WakeAnswer::TooSoon
            }
        }
        let waker = Waker::default();
        let token = waker.token().expose().to_owned();
        let member = Arc::new(Member(Told::default()));
        waker.attach(Some(member.clone()));
        let handed = waker.wake_handed(&token, Some("7 x"));
        assert_eq!(handed, WakeAnswer::TooSoon, "the member's answer");
        assert_eq!(waker.wake("nope"), WakeAnswer::TooSoon);
        let told = member.0.lock().unwrap().clone();
        assert_eq!(told, [(true, Some("7 x".to_owned())), (false, None)]);
        waker.attach(None);
        assert_eq!(waker.wake(&token), WakeAnswer::Accepted, "alone again");
        assert_eq!(
            member.0.lock().unwrap().len(),
            2,
            "the member is told no more"
        );
    }

    /// A probe says whether the token is this member's, and does nothing: no wake-up stored,
    /// none counted against the interval.
    #[tokio::test(start_paused = true)]
    async fn a_probe_answers_for_the_token_and_wakes_nothing() {
        let waker = Waker::default();
        let token = waker.token().expose().to_owned();
        assert_eq!(waker.probe(&token), WakeAnswer::Accepted);
        assert_eq!(
            waker.probe(&token),
            WakeAnswer::Accepted,
            "not rate-limited"
        );
        assert_eq!(waker.probe("nope"), WakeAnswer::WrongToken);
        assert_eq!(
            waker.wake(&token),
            WakeAnswer::Accepted,
            "nor counts as one"
        );
    }
}

/// An advertised URL comes from a member record, which anyone who can write to the container
/// can forge: the leader sends the wake-up there and nowhere else.
#[cfg(test)]
mod redirects {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// Answers each connection with `answer`, and counts the requests.
    async fn serve(answer: String) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = count.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let mut request = [0u8; 4096];
                let _ = socket.read(&mut request).await;
                let _ = socket.write_all(answer.as_bytes()).await;
            }
        });
        (url, count)
    }

    #[tokio::test]
    async fn a_wake_up_follows_no_redirect() {
        let (elsewhere, reached) =
            serve("HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n".to_owned()).await;
        let (forged, asked) = serve(format!(
            "HTTP/1.1 307 Temporary Redirect\r\nlocation: {elsewhere}/wake\r\ncontent-length: 0\r\n\r\n"
        ))
        .await;
        let sent = Sender::default().send(&forged, None, None).await;
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(
            reached.load(std::sync::atomic::Ordering::SeqCst),
            0,
            "the redirect was not followed"
        );
        assert_eq!(sent, WakeSent::Refused);
        // The same server reached directly does answer: the count can move.
        assert_eq!(
            Sender::default().send(&elsewhere, None, None).await,
            WakeSent::Ok
        );
        assert_eq!(reached.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}
