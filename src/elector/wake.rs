//! Wake-ups (design section 10): a leader that has just handed its lease to a member tells it
//! so with `POST <advertise>/wake`, so that it acquires now instead of at its next poll.
//!
//! A wake-up carries no authority: it only makes this instance try its acquire now, which
//! storage refuses unless the lease was handed to it (or is free). [`Waker`] is the receiving
//! end (the daemon's `POST /wake` calls it; a program that embeds the elector may too), limited
//! to one attempt per [`WAKE_INTERVAL`] whoever sends; [`send`] is the sending end.

use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

/// At most one wake-up per this long makes the elector try; the others are refused.
pub const WAKE_INTERVAL: Duration = Duration::from_millis(100);

/// How long the old leader waits for the member it woke to answer.
pub(crate) const SEND_TIMEOUT: Duration = Duration::from_millis(500);

/// Makes a waiting [`Elector`](crate::Elector) try its acquire now: the receiving end of
/// wake-ups. Cheap to clone; from [`Elector::waker`](crate::Elector::waker).
#[derive(Clone, Default)]
pub struct Waker {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    notify: Notify,
    /// When the last wake-up was accepted.
    last: Mutex<Option<Instant>>,
}

impl Waker {
    /// Asks the elector to try its acquire now (if it is waiting to campaign). Returns false,
    /// doing nothing, when another wake-up was accepted less than 100 ms ago.
    /// Never waits.
    pub fn wake(&self) -> bool {
        let now = Instant::now();
        {
            let mut last = self.inner.last.lock().unwrap_or_else(|e| e.into_inner());
            if last.is_some_and(|at| now.saturating_duration_since(at) < WAKE_INTERVAL) {
                return false;
            }
            *last = Some(now);
        }
        // One stored permit: a wake-up that comes while the elector is busy (an acquire in
        // flight) is taken at its next pause, and never counts twice.
        self.inner.notify.notify_one();
        true
    }

    /// Resolves at the next accepted wake-up (or at once for one accepted since the last).
    pub(crate) async fn woken(&self) {
        self.inner.notify.notified().await;
    }

    /// Forgets a wake-up accepted while it could not be acted on (while leading).
    pub(crate) fn forget(&self) {
        // A stored permit is consumed by a `notified()` that is polled once.
        use std::future::Future;
        use std::task::Context;
        let notified = self.inner.notify.notified();
        let mut notified = std::pin::pin!(notified);
        let mut context = Context::from_waker(std::task::Waker::noop());
        // Pending: no permit was stored, and dropping the future leaves none.
        let _ = notified.as_mut().poll(&mut context);
    }
}

/// How a wake-up that was sent ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum WakeSent {
    /// Answered 2xx (accepted) or 429 (another came first): the member is awake.
    Ok,
    /// Answered with another status.
    Refused,
    /// No answer within [`SEND_TIMEOUT`], or no connection.
    Failed,
}

impl WakeSent {
    #[cfg_attr(not(feature = "daemon"), allow(dead_code))]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Refused => "refused",
            Self::Failed => "failed",
        }
    }
}

/// Sends `POST <advertise>/wake` once, waiting at most [`SEND_TIMEOUT`]. A failure is only
/// reported: the member finds the handoff at its next poll anyway.
pub(crate) async fn send(client: &reqwest::Client, advertise: &str) -> WakeSent {
    let url = format!("{}/wake", advertise.trim_end_matches('/'));
    let sent = tokio::time::timeout(SEND_TIMEOUT, client.post(&url).send()).await;
    match sent {
        Ok(Ok(answer)) if answer.status().is_success() || answer.status().as_u16() == 429 => {
            WakeSent::Ok
        }
        Ok(Ok(answer)) => {
            tracing::warn!(
                url,
                status = answer.status().as_u16(),
                "the wake-up was refused"
            );
            WakeSent::Refused
        }
        Ok(Err(e)) if !e.is_timeout() => {
            tracing::warn!(url, error = %e, "could not send the wake-up; the member finds the handoff at its next poll");
            WakeSent::Failed
        }
        Ok(Err(_)) | Err(_) => {
            tracing::warn!(
                url,
                "no answer to the wake-up within {SEND_TIMEOUT:?}; the member finds the handoff at its next poll"
            );
            WakeSent::Failed
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

/// The simulator's delivery of a wake-up to the URL it names.
#[cfg(any(test, feature = "test-util"))]
pub(crate) type Deliver =
    std::sync::Arc<dyn Fn(&str) -> futures::future::BoxFuture<'static, WakeSent> + Send + Sync>;

impl Default for Sender {
    fn default() -> Self {
        Self::Http(Default::default())
    }
}

impl Sender {
    /// Sends one wake-up to `advertise`, as [`send`] does.
    pub async fn send(&self, advertise: &str) -> WakeSent {
        match self {
            Self::Http(client) => match client.get_or_init(crate::elector::wake::client) {
                Some(client) => send(client, advertise).await,
                None => WakeSent::Failed,
            },
            #[cfg(any(test, feature = "test-util"))]
            Self::Simulated(deliver) => deliver(advertise).await,
        }
    }
}

/// The client wake-ups are sent with: no proxy from the environment (the peers are on the
/// group's own network), a connect timeout within [`SEND_TIMEOUT`], and no redirect followed
/// (an advertised URL comes from a member record, which anyone who can write to the container
/// can forge: the leader sends the wake-up there and nowhere else).
pub(crate) fn client() -> Option<reqwest::Client> {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(SEND_TIMEOUT)
        .timeout(SEND_TIMEOUT)
        .build()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn one_wake_up_per_interval_whoever_sends() {
        let waker = Waker::default();
        assert!(waker.wake());
        assert!(!waker.wake(), "too soon");
        tokio::time::advance(WAKE_INTERVAL - Duration::from_millis(1)).await;
        assert!(!waker.clone().wake(), "too soon, from a clone");
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(waker.wake());
        // Both accepted wake-ups left one permit: taken once.
        tokio::time::timeout(Duration::from_millis(1), waker.woken())
            .await
            .expect("a stored wake-up");
        assert!(
            tokio::time::timeout(Duration::from_secs(1), waker.woken())
                .await
                .is_err(),
            "not twice"
        );
        // One accepted while leading is forgotten.
        tokio::time::advance(WAKE_INTERVAL).await;
        assert!(waker.wake());
        waker.forget();
        assert!(
            tokio::time::timeout(Duration::from_secs(1), waker.woken())
                .await
                .is_err()
        );
    }
}
