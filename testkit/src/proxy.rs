//! A fault-injecting TCP proxy on loopback, between daemons and Azurite.
//!
//! One proxy per daemon, so that a single leader can be cut off from storage while the others
//! still reach it; or one proxy that every daemon goes through, with a fault of its own for the
//! connections of each process named ([`FaultProxy::set_for`]), where the daemons must name one
//! endpoint alike (the members of a replica set list the same accounts: docs/quorum.md, the
//! rule *One replica set*). The [`Fault`] can be switched at any time, and it applies at once to
//! the connections already open, not only to new ones: the daemon keeps its HTTP connections
//! alive and reuses them, so a fault that waited for the next connection would never bite.
//!
//! Each connection is served by four plain threads: per direction, a reader that stamps every
//! chunk with the instant it arrived, and a writer that forwards it once the current fault lets
//! it go. Keeping reader and writer apart means a delay is per chunk, as on a slow network, and
//! does not add up when several chunks are in flight.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// What the proxy does to the traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Bytes go through as they come.
    Pass,
    /// A network partition: connections stay open and new ones are accepted, but nothing goes
    /// through. What arrived meanwhile is delivered when the fault ends, as TCP would retransmit
    /// it, so a request the daemon gave up on can still reach the server late.
    Blackhole,
    /// Each chunk is forwarded this long after it arrived: `up` towards storage (requests),
    /// `down` towards the daemon (answers).
    Delay { up: Duration, down: Duration },
    /// Open connections are closed, and new ones as soon as they are accepted.
    Reset,
}

impl Fault {
    /// Delayed answers: storage does the work at once, the daemon hears of it late.
    pub fn slow_answers(delay: Duration) -> Self {
        Self::Delay {
            up: Duration::ZERO,
            down: delay,
        }
    }

    /// Delayed requests: storage sees them late.
    pub fn slow_requests(delay: Duration) -> Self {
        Self::Delay {
            up: delay,
            down: Duration::ZERO,
        }
    }
}

/// A request the daemon sent towards storage, as it reached the proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxiedRequest {
    /// When it reached the proxy, on CLOCK_MONOTONIC ([`crate::wait::mono_now`]).
    pub at: std::time::Duration,
    /// The request line, e.g. `PUT /devstoreaccount1/tests/b?comp=lease HTTP/1.1`.
    pub line: String,
    /// `x-ms-lease-action` (`acquire`, `renew`, `release`, `break`, `change`), if any.
    pub lease_action: Option<String>,
    /// `x-ms-proposed-lease-id` for an acquire or change, else `x-ms-lease-id`, if any.
    pub lease_id: Option<String>,
    /// The process that sent it, when it is one of those given a fault of their own
    /// ([`FaultProxy::set_for`]) by then.
    pub from: Option<u32>,
}

impl ProxiedRequest {
    /// Reads a request's head from the first chunk of it; `None` if `chunk` does not start one.
    fn parse(at: std::time::Duration, chunk: &[u8], from: Option<u32>) -> Option<Self> {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut request = httparse::Request::new(&mut headers);
        // A head split over two chunks (Status::Partial) yields what its first chunk holds.
        request.parse(chunk).ok()?;
        let method = request.method?;
        if !["GET", "PUT", "HEAD", "POST", "DELETE"].contains(&method) {
            return None;
        }
        let line = format!("{method} {} HTTP/1.{}", request.path?, request.version?);
        let header = |name: &str| {
            request
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .and_then(|h| std::str::from_utf8(h.value).ok())
                .map(|v| v.trim().to_owned())
        };
        Some(Self {
            at,
            lease_action: header("x-ms-lease-action"),
            lease_id: header("x-ms-proposed-lease-id").or_else(|| header("x-ms-lease-id")),
            line,
            from,
        })
    }
}

/// Which way a chunk travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Daemon -> storage.
    Up,
    /// Storage -> daemon.
    Down,
}

/// What a writer does with the chunk it holds.
enum Verdict {
    Forward,
    /// Close the connection (a reset, or the proxy is going away).
    Close,
}

/// The faults in force.
struct State {
    /// The fault of every connection but those of the processes in `by_process`.
    fault: Fault,
    /// The fault of the connections of each process named.
    by_process: BTreeMap<u32, Fault>,
    /// Grows whenever a process is named for the first time: a connection whose owner was not
    /// known looks again then.
    named: u64,
    /// The proxy is shutting down.
    closed: bool,
}

/// The state every thread of one proxy sees.
struct Shared {
    state: Mutex<State>,
    /// Signalled whenever the state changes, so held chunks are re-examined at once.
    changed: Condvar,
    /// Chunks read but not yet forwarded, per direction (`[up, down]`).
    pending: [AtomicUsize; 2],
    /// Connections accepted so far.
    accepted: AtomicUsize,
    /// Every request that came from the daemon, in arrival order.
    requests: Mutex<Vec<ProxiedRequest>>,
}

impl Shared {
    /// Blocks until the chunk that arrived at `arrived`, travelling `direction` on a connection
    /// of process `owner` (once known), may go.
    fn release(&self, direction: Direction, arrived: Instant, owner: &Owner) -> Verdict {
        loop {
            let pid = owner.pid(self);
            let state = self.state.lock().unwrap();
            if state.closed {
                return Verdict::Close;
            }
            let own = pid.and_then(|pid| state.by_process.get(&pid));
            let fault = own.copied().unwrap_or(state.fault);
            // Woken by any change, the owner is looked for again before the fault is.
            drop(match fault {
                Fault::Pass => return Verdict::Forward,
                Fault::Reset => return Verdict::Close,
                Fault::Blackhole => self.changed.wait(state).unwrap(),
                Fault::Delay { up, down } => {
                    let due = arrived
                        + match direction {
                            Direction::Up => up,
                            Direction::Down => down,
                        };
                    let now = Instant::now();
                    if now >= due {
                        return Verdict::Forward;
                    }
                    self.changed.wait_timeout(state, due - now).unwrap().0
                }
            });
        }
    }

    /// Whether connections must be closed now.
    fn closing(&self) -> bool {
        let state = self.state.lock().unwrap();
        state.closed || state.fault == Fault::Reset
    }
}

/// The process at the other end of one connection, of those given a fault of their own: looked
/// for by /proc as the connection is accepted, and again whenever a process is named for the
/// first time while it is not known (a daemon that connected before it was named: one whose
/// pid is known only once it runs).
struct Owner {
    /// The client's port, and the proxy's.
    ports: Option<(u16, u16)>,
    /// The owner, once found; else the `named` count it was last looked for at.
    found: Mutex<Result<u32, u64>>,
}

impl Owner {
    fn of(client: &TcpStream, port: u16, shared: &Shared) -> Self {
        let ports = client.peer_addr().ok().map(|a| (a.port(), port));
        let owner = Self {
            ports,
            found: Mutex::new(Err(u64::MAX)),
        };
        owner.pid(shared);
        owner
    }

    fn pid(&self, shared: &Shared) -> Option<u32> {
        let mut found = self.found.lock().unwrap();
        let looked_at = match *found {
            Ok(pid) => return Some(pid),
            Err(named) => named,
        };
        let (local, port) = self.ports?;
        let (pids, named) = {
            let state = shared.state.lock().unwrap();
            if state.named == looked_at {
                return None;
            }
            let pids: Vec<u32> = state.by_process.keys().copied().collect();
            (pids, state.named)
        };
        *found = crate::procfs::connection_owner(&pids, local, port).ok_or(named);
        found.ok()
    }
}

/// How often an idle writer looks whether its connection must be closed.
const TICK: Duration = Duration::from_millis(20);

/// A proxy on `127.0.0.1:port` in front of `127.0.0.1:upstream`; stops on drop.
pub struct FaultProxy {
    pub port: u16,
    shared: Arc<Shared>,
}

impl FaultProxy {
    pub fn start(upstream: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().expect("proxy address").port();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                fault: Fault::Pass,
                by_process: BTreeMap::new(),
                named: 0,
                closed: false,
            }),
            changed: Condvar::new(),
            pending: [AtomicUsize::new(0), AtomicUsize::new(0)],
            accepted: AtomicUsize::new(0),
            requests: Mutex::new(Vec::new()),
        });
        let accepting = shared.clone();
        std::thread::spawn(move || accept(listener, upstream, port, accepting));
        Self { port, shared }
    }

    /// The fault of every connection but those of the processes given one of their own.
    pub fn set(&self, fault: Fault) {
        self.shared.state.lock().unwrap().fault = fault;
        self.shared.changed.notify_all();
    }

    /// The fault of the connections of process `pid` (a daemon's), in place of [`Self::set`]'s.
    /// Which process a connection is comes from /proc, as it is accepted and, while not known,
    /// again once a process is named for the first time: a daemon named just after its spawn
    /// has its connections opened before that covered too, from their next chunk on (a chunk
    /// already held by [`Self::set`]'s fault is looked at again on the next change). A fault
    /// that must hold from a daemon's very first request is given to [`Self::set`] before the
    /// daemon starts.
    pub fn set_for(&self, pid: u32, fault: Fault) {
        let mut state = self.shared.state.lock().unwrap();
        if state.by_process.insert(pid, fault).is_none() {
            state.named += 1;
        }
        drop(state);
        self.shared.changed.notify_all();
    }

    pub fn fault(&self) -> Fault {
        self.shared.state.lock().unwrap().fault
    }

    /// Chunks that arrived travelling `direction` and are held back by the fault right now.
    pub fn pending(&self, direction: Direction) -> usize {
        self.shared.pending[direction as usize].load(Ordering::SeqCst)
    }

    /// Every request the daemon sent through this proxy so far (whatever the fault did to it).
    pub fn requests(&self) -> Vec<ProxiedRequest> {
        self.shared.requests.lock().unwrap().clone()
    }

    pub fn accepted(&self) -> usize {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    pub fn endpoint(&self) -> String {
        format!(
            "http://127.0.0.1:{}/{}",
            self.port,
            crate::azurite::EMULATOR_ACCOUNT
        )
    }

    /// The emulator's connection string, with the blob endpoint pointing at this proxy.
    pub fn connection_string(&self) -> String {
        crate::azurite::connection_string(
            crate::azurite::EMULATOR_ACCOUNT,
            crate::azurite::EMULATOR_KEY,
            &self.endpoint(),
        )
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.state.lock().unwrap().closed = true;
        self.shared.changed.notify_all();
        // Wakes the accept loop, which then sees the proxy is closed.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn accept(listener: TcpListener, upstream: u16, port: u16, shared: Arc<Shared>) {
    for client in listener.incoming() {
        if shared.state.lock().unwrap().closed {
            return;
        }
        let Ok(client) = client else { continue };
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        if shared.closing() {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        }
        // Storage down (killed): the daemon sees its connection closed at once, much like a
        // refused connection.
        let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        };
        let _ = client.set_nodelay(true);
        let _ = server.set_nodelay(true);
        let owner = Arc::new(Owner::of(&client, port, &shared));
        pipe(&client, &server, Direction::Up, &owner, &shared);
        pipe(&server, &client, Direction::Down, &owner, &shared);
    }
}

/// Starts the reader and the writer that carry `from` to `to`, on a connection of process
/// `owner` (once known).
fn pipe(
    from: &TcpStream,
    to: &TcpStream,
    direction: Direction,
    owner: &Arc<Owner>,
    shared: &Arc<Shared>,
) {
    let (Ok(mut source), Ok(close_source), Ok(mut sink), Ok(close_sink)) = (
        from.try_clone(),
        from.try_clone(),
        to.try_clone(),
        to.try_clone(),
    ) else {
        let _ = from.shutdown(Shutdown::Both);
        let _ = to.shutdown(Shutdown::Both);
        return;
    };
    // `None` is the end of the stream (a half-close), forwarded in order like any chunk.
    let (chunks, held) = mpsc::channel::<(Instant, Option<Vec<u8>>)>();
    let counter = shared.clone();
    let sender = owner.clone();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let chunk = match source.read(&mut buf) {
                Ok(0) | Err(_) => None,
                Ok(n) => Some(buf[..n].to_vec()),
            };
            if direction == Direction::Up
                && let Some(request) = chunk.as_deref().and_then(|c| {
                    let from = sender.pid(&counter);
                    ProxiedRequest::parse(crate::wait::mono_now(), c, from)
                })
            {
                counter.requests.lock().unwrap().push(request);
            }
            let end = chunk.is_none();
            counter.pending[direction as usize].fetch_add(1, Ordering::SeqCst);
            if chunks.send((Instant::now(), chunk)).is_err() || end {
                return;
            }
        }
    });
    let shared = shared.clone();
    let owner = owner.clone();
    std::thread::spawn(move || {
        let close = || {
            let _ = close_source.shutdown(Shutdown::Both);
            let _ = close_sink.shutdown(Shutdown::Both);
        };
        loop {
            let (arrived, chunk) = match held.recv_timeout(TICK) {
                Ok(c) => c,
                Err(mpsc::RecvTimeoutError::Timeout) if shared.closing() => return close(),
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            };
            let verdict = shared.release(direction, arrived, &owner);
            shared.pending[direction as usize].fetch_sub(1, Ordering::SeqCst);
            match (verdict, chunk) {
                (Verdict::Close, _) => return close(),
                (Verdict::Forward, Some(bytes)) => {
                    if sink.write_all(&bytes).is_err() {
                        return close();
                    }
                }
                (Verdict::Forward, None) => {
                    let _ = sink.shutdown(Shutdown::Write);
                    return;
                }
            }
        }
    });
}
