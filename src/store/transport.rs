//! The HTTP client the storage SDK sends through ([`Transport`]): kept-alive connections in
//! two pools ([`Lanes`]), never one the server is about to close, on a thread of the store's
//! own.

use super::lanes::Lanes;
use azure_core::error::ErrorKind;
use std::sync::{Mutex, RwLock};
use std::time::Duration;

/// How long an idle connection is kept for reuse when the server does not say how long it keeps
/// it: long enough that every request of a daemon (a renew every few seconds, a watcher's read
/// every 5-6 s, a member record's renew every 10 s) finds its connection open.
const IDLE_WITHOUT_ANNOUNCEMENT: Duration = Duration::from_secs(50);

/// How long before the server's announced idle close a connection is no longer reused: the
/// server counts from when it sent its answer, we from when we read it, and the next request
/// must be written well before the close, not as it happens.
const BEFORE_THE_SERVER_CLOSES: Duration = Duration::from_millis(500);

/// The HTTP client the SDK sends through: reqwest with TCP_NODELAY, a connect timeout, the
/// `ca_file` certificates, and a pool of kept-alive connections that never hands out one the
/// server is about to close.
///
/// A server that closes idle connections after a while may say so on every answer
/// (`Keep-Alive: timeout=5`, as Azurite does, like any Node server; it closes after about
/// 6 s). hyper's pool does not read that header (hyperium/hyper#2720): a request sent on a
/// connection idle for just that long is written as the server closes it, and fails with
/// "connection closed before message completed", though storage was never unreachable (renews
/// 6 s apart against Azurite: 2 of 20 failed so). So once a server
/// announces a time shorter than the pool's, the pool is replaced by one that drops idle
/// connections half a second earlier: a request after a longer pause opens a new connection
/// instead of racing the close. From a server that announces nothing, connections are reused
/// for [`IDLE_WITHOUT_ANNOUNCEMENT`].
#[derive(Debug)]
pub(super) struct Transport {
    /// Extra trusted certificates (`[storage].ca_file`), for building the pool again.
    certificates: Vec<reqwest::Certificate>,
    /// The clients whose two pools requests go out on now ([`Lanes`]), and their idle limit.
    pool: RwLock<([reqwest::Client; 2], Duration)>,
    /// Which of the two pools the next request takes.
    lanes: Mutex<Lanes>,
    /// Where the requests run.
    io: IoThread,
}

impl Transport {
    pub(super) fn new(certificates: Vec<reqwest::Certificate>) -> Result<Self, String> {
        let clients =
            Self::clients(&certificates, IDLE_WITHOUT_ANNOUNCEMENT).map_err(|e| e.to_string())?;
        let io = IoThread::start().map_err(|e| format!("cannot start its thread: {e}"))?;
        Ok(Self {
            certificates,
            pool: RwLock::new((clients, IDLE_WITHOUT_ANNOUNCEMENT)),
            lanes: Mutex::default(),
            io,
        })
    }

    /// The two clients of [`Lanes`], each with a pool of its own.
    fn clients(
        certificates: &[reqwest::Certificate],
        idle: Duration,
    ) -> reqwest::Result<[reqwest::Client; 2]> {
        Ok([
            Self::client(certificates, idle)?,
            Self::client(certificates, idle)?,
        ])
    }

    fn client(
        certificates: &[reqwest::Certificate],
        idle: Duration,
    ) -> reqwest::Result<reqwest::Client> {
        let mut http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(3))
            // A backstop only; the elector cancels requests much earlier.
            .timeout(Duration::from_secs(60))
            .tcp_nodelay(true)
            .pool_idle_timeout(idle);
        if idle.is_zero() {
            http = http.pool_max_idle_per_host(0);
        }
        for certificate in certificates {
            http = http.add_root_certificate(certificate.clone());
        }
        http.build()
    }

    /// The server keeps idle connections `announced`: from now on, reuse none idle for longer
    /// than [`BEFORE_THE_SERVER_CLOSES`] less. Connections of the old pool are dropped once
    /// their requests are answered.
    fn keep_under(&self, announced: Duration) {
        let idle = announced.saturating_sub(BEFORE_THE_SERVER_CLOSES);
        let mut pool = self.pool.write().unwrap_or_else(|e| e.into_inner());
        if idle >= pool.1 {
            return;
        }
        // The old pool stays if a new one cannot be built (it was built the same way).
        if let Ok(client) = Self::clients(&self.certificates, idle) {
            tracing::debug!(
                keep_alive = ?announced,
                reuse_for = ?idle,
                "storage closes idle connections; reusing them for less"
            );
            *pool = (client, idle);
        }
    }
}

impl Transport {
    /// The pool the next request goes out on, held until the returned guard is dropped (the
    /// request answered or given up).
    fn take_lane(&self, idle: Duration) -> LaneTaken<'_> {
        let mut lanes = self.lanes.lock().unwrap_or_else(|e| e.into_inner());
        LaneTaken(lanes.take(tokio::time::Instant::now(), idle), &self.lanes)
    }
}

/// A request in flight on a pool of [`Lanes`].
struct LaneTaken<'a>(usize, &'a Mutex<Lanes>);

impl Drop for LaneTaken<'_> {
    fn drop(&mut self) {
        self.1
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .done(self.0);
    }
}

#[async_trait::async_trait]
impl azure_core::HttpClient for Transport {
    async fn execute_request(
        &self,
        request: &azure_core::Request,
    ) -> azure_core::Result<azure_core::Response> {
        let (clients, idle) = self.pool.read().unwrap_or_else(|e| e.into_inner()).clone();
        let lane = self.take_lane(idle);
        let client = clients[lane.0].clone();
        let request = request.clone();
        // On the store's own thread; dropped there too if the caller gives up (its timeout).
        let sent = self.io.handle.spawn(async move {
            let response = client.execute_request(&request).await?;
            // The whole answer is read on that thread, and its connection gets its turn to go
            // back to the pool before the answer is handed over: hyper puts it back from a
            // task of its own once it has seen the end of the answer.
            let (status, headers, body) = response.deconstruct();
            let bytes = body.collect().await?;
            tokio::task::yield_now().await;
            Ok::<_, azure_core::Error>((status, headers, bytes))
        });
        let (status, headers, bytes) = AbortOnDrop(sent).await.map_err(|e| {
            azure_core::Error::full(ErrorKind::Io, e, "the storage thread dropped the request")
        })??;
        if let Some(announced) = keep_alive_timeout(&headers)
            && announced.saturating_sub(BEFORE_THE_SERVER_CLOSES) < idle
        {
            self.keep_under(announced);
        }
        Ok(azure_core::Response::new(
            status,
            headers,
            Box::pin(futures::stream::once(async move { Ok(bytes) })),
        ))
    }
}

/// The thread the store's requests run on: a single-threaded runtime of its own, so that a
/// connection is back in the pool before the next request looks for one. On a multi-threaded
/// runtime (the daemon's) hyper's connection task and the request ran on different threads,
/// and a request sent right after an answer with a body (a 409 to a follower's poll, a
/// listing) always found the pool empty and opened a second connection (on Azure, a TCP and
/// TLS handshake), which the official SDK, reading each answer to its end before it returns,
/// never does. Ends when the store is dropped.
#[derive(Debug)]
struct IoThread {
    handle: tokio::runtime::Handle,
    /// Dropping it ends the thread.
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl IoThread {
    fn start() -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("leasehold-storage".into())
            .spawn(move || {
                let _ = runtime.block_on(stopped);
            })?;
        Ok(Self {
            handle,
            _stop: stop,
        })
    }
}

/// A task of the storage thread that is aborted when whoever waits for it stops waiting.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> std::future::Future for AbortOnDrop<T> {
    type Output = Result<T, tokio::task::JoinError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.0).poll(cx)
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The `timeout` of a `Keep-Alive` answer header (`timeout=5, max=1000`): how long the server
/// keeps an idle connection.
fn keep_alive_timeout(headers: &azure_core::headers::Headers) -> Option<Duration> {
    let value =
        headers.get_optional_str(&azure_core::headers::HeaderName::from_static("keep-alive"))?;
    value.split(',').find_map(|parameter| {
        let (name, seconds) = parameter.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("timeout")
            .then(|| seconds.trim().trim_matches('"').parse().ok())
            .flatten()
            .map(Duration::from_secs)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use azure_core::headers::{HeaderName, HeaderValue, Headers};

    fn keep_alive(value: &str) -> Option<Duration> {
        let mut headers = Headers::new();
        headers.insert(
            HeaderName::from_static("keep-alive"),
            HeaderValue::from(value.to_owned()),
        );
        keep_alive_timeout(&headers)
    }

    #[test]
    fn reads_the_idle_time_a_server_announces() {
        assert_eq!(keep_alive("timeout=5"), Some(Duration::from_secs(5)));
        assert_eq!(
            keep_alive("max=1000, Timeout = 30"),
            Some(Duration::from_secs(30))
        );
        assert_eq!(keep_alive("timeout=\"2\""), Some(Duration::from_secs(2)));
        assert_eq!(keep_alive("max=1000"), None);
        assert_eq!(keep_alive("timeout=soon"), None);
        assert_eq!(keep_alive_timeout(&Headers::new()), None);
    }

    #[test]
    fn a_shorter_announcement_shortens_reuse_and_a_longer_one_does_not() {
        let transport = Transport::new(Vec::new()).unwrap();
        let idle = || transport.pool.read().unwrap().1;
        assert_eq!(idle(), IDLE_WITHOUT_ANNOUNCEMENT);
        transport.keep_under(Duration::from_secs(5));
        assert_eq!(idle(), Duration::from_millis(4500));
        transport.keep_under(Duration::from_secs(30));
        assert_eq!(idle(), Duration::from_millis(4500));
        // Nothing to spare: no connection is kept at all.
        transport.keep_under(Duration::from_millis(300));
        assert_eq!(idle(), Duration::ZERO);
    }
}
