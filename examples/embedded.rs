//! leasehold as a library: a task inside this program that runs only while this instance holds
//! the group's lease. The same config file as the daemon's (`[child]` may be left out; its
//! `stop_timeout` is how long the task gets to stop).
//!
//! ```text
//! cargo run --example embedded -- -c config/azurite.toml --identity a    # in one terminal
//! cargo run --example embedded -- -c config/azurite.toml --identity b    # in another
//! ```
//!
//! The leader prints its epoch every second; Ctrl-C (or SIGTERM) stops its task, releases the
//! lease, and exits 0, and the other instance leads within about a second, with a larger epoch.
//! A program that embeds leasehold depends on it with `default-features = false` (no daemon),
//! and on `tokio` and, for logs, `tracing-subscriber` of its own.

use leasehold::{Config, Elector, Error, Leadership, Overrides};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tokio::signal::unix::{SignalKind, signal};

#[tokio::main]
async fn main() -> ExitCode {
    // leasehold logs through `tracing`: each change of leadership is one INFO line. The storage
    // client's crates stay at `warn` whatever RUST_LOG says: at `debug` the legacy azure_core
    // logs each request's Authorization header (RUSTSEC-2026-0275, SECURITY.md).
    let mut filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let capped = [
        "azure_core",
        "azure_storage",
        "azure_storage_blobs",
        "azure_identity",
        "reqwest",
        "hyper",
        "hyper_util",
    ];
    for target in capped {
        if let Ok(cap) = format!("{target}=warn").parse() {
            filter = filter.add_directive(cap);
        }
    }
    tracing_subscriber::fmt().with_env_filter(filter).init();
    let (path, overrides) = match arguments() {
        Ok(parsed) => parsed,
        Err(usage) => {
            eprintln!("embedded: {usage}");
            return ExitCode::from(2);
        }
    };
    let config = match Config::load(&path, &overrides) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("embedded: {e}");
            return ExitCode::from(2);
        }
    };
    let elector = match Elector::connect(&config).await {
        Ok(elector) => elector,
        // The daemon's exit codes: 3 for refused credentials, 2 for the rest of the set-up.
        Err(e @ Error::Denied(_)) => {
            eprintln!("embedded: {e}");
            return ExitCode::from(3);
        }
        Err(e) => {
            eprintln!("embedded: {e}");
            return ExitCode::from(2);
        }
    };
    let shutdown = async {
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    };
    match elector.run_while_leader(shutdown, work).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("embedded: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The leader's work: here, a line a second. A real task passes `leadership.epoch()` along
/// with every write it makes, so that the systems it writes to can refuse a stale leader's.
async fn work(leadership: Leadership) {
    let (identity, epoch) = (leadership.identity(), leadership.epoch());
    println!("task started: {identity} leads with epoch {epoch}");
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = tick.tick() => println!("{identity} leads with epoch {epoch}"),
            // The stop deadline, a lost lease, or shutdown: finish up within stop_timeout.
            () = leadership.cancelled() => break,
        }
    }
    println!("task stopped: epoch {epoch}");
}

/// `-c FILE` (or `LEASEHOLD_CONFIG`), and `--identity NAME` to replace the config's.
fn arguments() -> Result<(PathBuf, Overrides), String> {
    let mut path = std::env::var_os("LEASEHOLD_CONFIG").map(PathBuf::from);
    let mut overrides = Overrides::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-c" | "--config" => path = args.next().map(PathBuf::from),
            "--identity" => overrides.identity = args.next(),
            other => {
                return Err(format!(
                    "unknown argument {other:?}; usage: embedded -c FILE [--identity NAME]"
                ));
            }
        }
    }
    let path = path.ok_or("usage: embedded -c FILE [--identity NAME]")?;
    Ok((path, overrides))
}
