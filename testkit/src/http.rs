//! HTTP from the tests' side: `GET` against a daemon's endpoint (reqwest's blocking client),
//! servers a test stands up (axum), and free loopback ports to give daemons and stand-ins.

use std::net::TcpListener;
use std::sync::OnceLock;
use std::time::Duration;

/// One client for the whole process: it owns a thread and a runtime. No proxy from the
/// environment (the daemons are on loopback), no connections kept: the daemon answers one
/// request per connection anyway.
fn client() -> &'static reqwest::blocking::Client {
    static CLIENT: OnceLock<reqwest::blocking::Client> = OnceLock::new();
    CLIENT.get_or_init(|| {
        reqwest::blocking::Client::builder()
            .no_proxy()
            .connect_timeout(Duration::from_secs(2))
            .timeout(Duration::from_secs(5))
            .pool_max_idle_per_host(0)
            .build()
            .expect("an HTTP client")
    })
}

/// `GET http://addr/path`: the status code and the body, or None if nothing answered within
/// 5 s.
pub fn get(addr: &str, path: &str) -> Option<(u16, String)> {
    let response = client().get(format!("http://{addr}{path}")).send().ok()?;
    let code = response.status().as_u16();
    Some((code, response.text().ok()?))
}

/// Serves `app` on `listener` from a thread of its own (a server a test stands up: a token
/// endpoint, the witness's health endpoint) for as long as the process lives.
pub fn serve_in_background(listener: std::net::TcpListener, app: axum::Router) {
    listener
        .set_nonblocking(true)
        .expect("a non-blocking listener");
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            axum::serve(listener, app).await.expect("serve");
        });
    });
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

/// A free loopback address, e.g. for a daemon's HTTP endpoint.
pub fn free_addr() -> String {
    format!("127.0.0.1:{}", free_port())
}
