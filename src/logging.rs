//! The log subscriber: human text by default, JSON lines for collectors, `RUST_LOG` to filter.
//!
//! The HTTP, storage-client and identity crates are capped at `warn` whatever `RUST_LOG` says:
//! at debug level they log request URLs (with a SAS credential the URL carries the token) and
//! requests (with Entra ID, the token endpoints' answers).
//!
//! **The daemon never waits on its log.** stderr is often a pipe whose consumer can stall
//! (Docker's default log mode blocks the writer when its driver falls behind; journald or a
//! Kubernetes log agent can fall behind too), and the child writes to the same pipe. A thread that
//! writes a log line to a full pipe blocks until the consumer reads again, and a daemon whose
//! threads are blocked cannot stop its child by the lease's deadline. So `run` hands each line to
//! a queue of at most [`QUEUE_LINES`] lines, which a thread of its own writes to stderr
//! (`tracing-appender`'s non-blocking writer, in lossy mode); when the queue is full the line is
//! dropped and counted (`leasehold_log_lines_dropped_total`, and a WARN line with the count once
//! stderr takes lines again). At exit the queued lines get at most [`FLUSH_LIMIT`].
//!
//! The one-shot commands (`status`, `check`, `break`) supervise nothing and write to stderr
//! directly, losing no line.

use std::io::{self, Write};
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tracing_appender::non_blocking::{ErrorCounter, NonBlocking, NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
/// How log lines look on stderr.
pub enum LogFormat {
    /// Human-readable text.
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// The most log lines `run` keeps waiting for stderr; more are dropped and counted. A burst of
/// the daemon's (a term ending, a storage outage) is a dozen lines, which a consumer that keeps
/// up takes in microseconds; this many waiting means it has stalled. 128 lines of up to a few
/// hundred bytes are tens of KiB at most, next to the 64 KiB a pipe itself holds.
pub const QUEUE_LINES: usize = 128;

/// At exit, how long the lines still queued get to reach stderr. A stalled consumer keeps the
/// daemon no longer than this from exiting (after it has stopped its child and released).
pub const FLUSH_LIMIT: Duration = Duration::from_secs(1);

/// At most one WARN line about dropped lines per this period.
const DROP_NOTICE_EVERY: Duration = Duration::from_secs(10);

/// Crates that may log credentials, and the most they may log.
const CAPPED: [&str; 12] = [
    "azure_core",
    "azure_identity",
    "azure_storage",
    "azure_storage_blobs",
    "azure_svc_blobstorage",
    "oauth2",
    "async_process",
    "reqwest",
    "hyper",
    "hyper_util",
    "h2",
    "rustls",
];

/// The daemon's log queue, once [`init`] has set it up.
static QUEUE: OnceLock<Arc<Progress>> = OnceLock::new();

/// Log lines dropped so far because stderr did not take them in time (0 before [`init`]).
pub fn dropped_lines() -> u64 {
    QUEUE.get().map_or(0, |q| q.dropped())
}

/// For `run`: `level` (`info` for the daemon, `warn` for a one-shot) unless `RUST_LOG` says
/// otherwise, through the queue (module doc). Keep the returned handle and call
/// [`LogFlush::finish`] last thing before exiting.
pub fn init(format: LogFormat, level: &str) -> LogFlush {
    let (queue, flush) = queue(io::stderr(), QUEUE_LINES);
    let _ = QUEUE.set(flush.progress.clone());
    install(format, level, queue);
    // A panic message is a log line too; the default hook writes it to stderr itself, blocking
    // on a stalled consumer.
    std::panic::set_hook(Box::new(|info| tracing::error!("{info}")));
    flush
}

/// For one-shot commands, whose result goes to stdout: `warn` unless `RUST_LOG` says otherwise.
pub fn init_quiet(format: LogFormat) {
    install(format, "warn", io::stderr);
}

fn install<W>(format: LogFormat, default: &str, writer: W)
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let mut filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    for target in CAPPED {
        if let Ok(directive) = format!("{target}=warn").parse() {
            filter = filter.add_directive(directive);
        }
    }
    use std::io::IsTerminal;
    let colour = io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(writer);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}

/// Where a queue stands: lines offered, written, and (from tracing-appender) dropped.
#[derive(Default)]
struct Progress {
    offered: AtomicU64,
    written: AtomicU64,
    dropped: OnceLock<ErrorCounter>,
}

impl Progress {
    fn dropped(&self) -> u64 {
        self.dropped.get().map_or(0, |c| c.dropped_lines() as u64)
    }

    /// Lines queued or being written.
    fn pending(&self) -> u64 {
        // Dropped and written lines were offered first: read those two before `offered`.
        let done = self.dropped() + self.written.load(Ordering::Acquire);
        self.offered.load(Ordering::Acquire).saturating_sub(done)
    }
}

/// A queue of at most `lines` lines in front of `out`, written by a thread of its own.
fn queue<W: Write + Send + Sync + 'static>(out: W, lines: usize) -> (Queue, LogFlush) {
    let progress = Arc::new(Progress::default());
    let sink = Sink {
        out,
        progress: progress.clone(),
        reported: 0,
        last_notice: None,
    };
    let (lines, guard) = NonBlockingBuilder::default()
        .lossy(true)
        .buffered_lines_limit(lines)
        .thread_name("leasehold-log")
        .finish(sink);
    let _ = progress.dropped.set(lines.error_counter());
    (
        Queue {
            lines,
            progress: progress.clone(),
        },
        LogFlush {
            // Dropping the guard waits for the writer thread, which a stalled consumer blocks,
            // and when the queue is full it prints to stdout, which may be stalled as well.
            // The daemon flushes with its own bound instead ([`LogFlush::finish`]).
            _guard: ManuallyDrop::new(guard),
            progress,
        },
    )
}

/// The subscriber's side of the queue: hands each line over without waiting.
#[derive(Clone)]
struct Queue {
    lines: NonBlocking,
    progress: Arc<Progress>,
}

impl Write for Queue {
    fn write(&mut self, line: &[u8]) -> io::Result<usize> {
        self.progress.offered.fetch_add(1, Ordering::AcqRel);
        // Never blocks: a full queue drops the line and counts it.
        self.lines.write(line)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Queue {
    type Writer = Queue;

    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// The writer thread's side: writes each line to `out`, and says so when lines were dropped.
struct Sink<W> {
    out: W,
    progress: Arc<Progress>,
    /// Dropped lines already reported in a WARN line.
    reported: u64,
    last_notice: Option<Instant>,
}

impl<W: Write> Write for Sink<W> {
    /// The writer thread hands over one whole line per call.
    fn write(&mut self, line: &[u8]) -> io::Result<usize> {
        self.write_all(line).map(|()| line.len())
    }

    fn write_all(&mut self, line: &[u8]) -> io::Result<()> {
        let result = self.out.write_all(line);
        self.progress.written.fetch_add(1, Ordering::AcqRel);
        if result.is_ok() {
            self.report_drops();
        }
        result
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

impl<W> Sink<W> {
    /// Once stderr takes lines again, one WARN line with the count of those it missed.
    fn report_drops(&mut self) {
        let dropped = self.progress.dropped();
        if dropped <= self.reported
            || self
                .last_notice
                .is_some_and(|t| t.elapsed() < DROP_NOTICE_EVERY)
        {
            return;
        }
        let missed = dropped - self.reported;
        self.reported = dropped;
        self.last_notice = Some(Instant::now());
        // From this thread, the line goes through the queue like any other.
        tracing::warn!(
            dropped = missed,
            "log lines dropped: stderr did not take them in time (its reader stalled); \
             see leasehold_log_lines_dropped_total"
        );
    }
}

/// The daemon's handle on its log queue, for the end.
pub struct LogFlush {
    _guard: ManuallyDrop<WorkerGuard>,
    progress: Arc<Progress>,
}

impl LogFlush {
    /// Gives the lines still queued up to [`FLUSH_LIMIT`] to reach stderr, then returns whether
    /// they all did. Those that did not are lost with the process.
    pub fn finish(self) -> bool {
        self.finish_within(FLUSH_LIMIT)
    }

    fn finish_within(self, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        while self.progress.pending() > 0 {
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pipe nobody reads, like stderr behind a stalled log driver: the writer thread blocks on
    /// it once it is full, the queue fills, and then lines are dropped and counted, while every
    /// write returns at once. The flush at exit gives up at its limit.
    #[test]
    fn a_stalled_consumer_costs_dropped_lines_never_a_blocked_writer() {
        let (stalled, write_end) = nix::unistd::pipe().unwrap();
        let (mut queue, flush) = queue(std::fs::File::from(write_end), 16);
        // 8 KiB lines: the pipe (64 KiB) takes 8, the writer thread blocks on the 9th.
        let line = format!("{}\n", "x".repeat(8191));
        let began = Instant::now();
        let mut slowest = Duration::ZERO;
        for _ in 0..500 {
            let t = Instant::now();
            queue.write_all(line.as_bytes()).unwrap();
            slowest = slowest.max(t.elapsed());
        }
        let took = began.elapsed();
        let progress = flush.progress.clone();
        let dropped = progress.dropped();
        println!(
            "500 lines of 8 KiB into a stalled pipe: {dropped} dropped, {} pending; all handed \
             over in {took:?}, the slowest in {slowest:?}",
            progress.pending()
        );
        // At most 8 in the pipe, 1 in the writer's hands and 16 queued were kept; at least the
        // 16 the queue holds.
        assert!(
            (500 - 8 - 1 - 16..=500 - 16).contains(&dropped),
            "{dropped} dropped"
        );
        assert!(progress.pending() > 0);
        assert!(slowest < Duration::from_millis(50), "{slowest:?}");

        let began = Instant::now();
        assert!(
            !flush.finish_within(Duration::from_millis(200)),
            "nothing more can reach a stalled pipe"
        );
        let took = began.elapsed();
        println!("the flush gave up after {took:?} (limit 200ms)");
        assert!(took < Duration::from_millis(300), "{took:?}");
        drop(stalled);
    }

    /// With a reader that keeps up, a burst the size of the queue loses nothing, and the flush
    /// returns once the reader has it all.
    #[test]
    fn a_live_consumer_gets_every_line() {
        let (read_end, write_end) = nix::unistd::pipe().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use io::BufRead;
            for line in io::BufReader::new(std::fs::File::from(read_end)).lines() {
                let _ = tx.send(line.unwrap());
            }
        });
        let (mut queue, flush) = queue(std::fs::File::from(write_end), 16);
        for i in 0..16 {
            queue.write_all(format!("line {i}\n").as_bytes()).unwrap();
        }
        let progress = flush.progress.clone();
        assert!(flush.finish_within(Duration::from_secs(5)), "flushed");
        assert_eq!(progress.dropped(), 0);
        let got: Vec<String> = (0..16)
            .map(|_| rx.recv_timeout(Duration::from_secs(5)).unwrap())
            .collect();
        assert_eq!(got.last().map(String::as_str), Some("line 15"));
    }
}
