//! The log subscriber: human text by default, JSON lines for collectors, `RUST_LOG` to filter.
//!
//! The HTTP, storage-client and identity crates are capped at `warn` whatever `RUST_LOG` says:
//! at debug level they log request URLs (with a SAS credential the URL carries the token) and
//! requests (with Entra ID, the token endpoints' answers).

use tracing_subscriber::EnvFilter;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

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

/// For the daemon: `info` unless `RUST_LOG` says otherwise.
pub fn init(format: LogFormat) {
    init_with(format, "info")
}

/// For one-shot commands, whose result goes to stdout: `warn` unless `RUST_LOG` says otherwise.
pub fn init_quiet(format: LogFormat) {
    init_with(format, "warn")
}

fn init_with(format: LogFormat, default: &str) {
    let mut filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    for target in CAPPED {
        if let Ok(directive) = format!("{target}=warn").parse() {
            filter = filter.add_directive(directive);
        }
    }
    use std::io::IsTerminal;
    let colour = std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}
