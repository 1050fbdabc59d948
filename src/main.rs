//! The `leasehold` command line: parses the arguments and calls the library, which runs each
//! subcommand to its exit code.

use clap::{Args, Parser, Subcommand};
use leasehold::Overrides;
use leasehold::cli::{self, LogFormat};
use leasehold::store::Secret;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "leasehold",
    version,
    about = "Leader election on an Azure Blob Storage lease: runs a command only while this instance holds the lease.",
    after_help = "Exit codes: 0 clean shutdown, 2 bad configuration or usage, 3 storage refused the \
                  credentials at start-up; with on_exit = \"exit\", the child's code."
)]
struct Cli {
    /// Log format on stderr; filter with RUST_LOG (default "info").
    #[arg(long, global = true, value_enum, default_value = "text")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once per process
enum Command {
    /// Compete for the lease and run the child command while leading.
    Run {
        #[command(flatten)]
        common: Common,
        /// The child command; replaces [child].command.
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Show who leads the group now: holder, epoch, since when, lease state, the line of members.
    Status {
        #[command(flatten)]
        common: Common,
        /// One JSON object instead of text (fields documented in the README).
        #[arg(long)]
        json: bool,
        /// Keep looking, and show it again whenever it changes, until Ctrl-C.
        #[arg(long)]
        watch: bool,
        /// How often --watch looks (100ms to 1h).
        #[arg(long, value_parser = cli::parse_watch_interval, default_value = "2s", requires = "watch")]
        interval: std::time::Duration,
    },
    /// Validate the config, reach storage, prove the credentials and lease permissions.
    Check {
        #[command(flatten)]
        common: Common,
        /// Only validate the config (and find the child's program); do not reach storage.
        #[arg(long)]
        offline: bool,
    },
    /// Break the lease (admin): the leader stops its child at its next renew, and another
    /// instance can lead once the break period is over.
    Break {
        #[command(flatten)]
        common: Common,
        /// How long nobody may acquire the lease after the break: 0s..60s, whole seconds.
        /// Default: renew_interval + stop_timeout + safety_margin of the config (at most 60s),
        /// so that the old leader notices at its next renew and its child is gone before anyone
        /// else can lead. `--period 0s` lets another instance lead at once, while the old
        /// child may still run.
        #[arg(long, value_parser = cli::parse_break_period)]
        period: Option<Duration>,
    },
    /// Internal: kills a child's process group when the daemon dies.
    #[command(name = "__guard", hide = true)]
    Guard { pgid: i32 },
}

#[derive(Args)]
struct Common {
    /// The TOML config file.
    #[arg(
        short = 'c',
        long = "config",
        env = "LEASEHOLD_CONFIG",
        value_name = "FILE"
    )]
    config: PathBuf,
    /// Replaces `identity`.
    #[arg(long)]
    identity: Option<String>,
    /// Replaces [storage].container.
    #[arg(long)]
    container: Option<String>,
    /// Replaces [storage].blob.
    #[arg(long)]
    blob: Option<String>,
    /// Replaces [storage].account.
    #[arg(long)]
    account: Option<String>,
    /// Replaces [storage].endpoint.
    #[arg(long)]
    endpoint: Option<String>,
    /// Replaces [storage].connection_string. Visible to other local users in the process list:
    /// prefer the file, connection_string_file, or AZURE_STORAGE_CONNECTION_STRING.
    #[arg(long, value_name = "STRING")]
    connection_string: Option<String>,
    /// Replaces [http].listen.
    #[arg(long, value_name = "ADDR")]
    http_listen: Option<SocketAddr>,
}

impl Common {
    fn overrides(&self, command: Vec<String>) -> Overrides {
        Overrides {
            identity: self.identity.clone(),
            container: self.container.clone(),
            blob: self.blob.clone(),
            account: self.account.clone(),
            endpoint: self.endpoint.clone(),
            connection_string: self.connection_string.clone().map(Secret::new),
            http_listen: self.http_listen,
            command,
        }
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help and --version.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => return usage_error(&e),
    };
    let format = cli.log_format;
    match cli.command {
        Command::Guard { pgid } => cli::guard(pgid),
        Command::Run { common, command } => {
            cli::run(format, &common.config, &common.overrides(command))
        }
        Command::Status {
            common,
            json,
            watch,
            interval,
        } => cli::status(
            format,
            &common.config,
            &common.overrides(Vec::new()),
            json,
            watch.then_some(interval),
        ),
        Command::Check { common, offline } => cli::check(
            format,
            &common.config,
            &common.overrides(Vec::new()),
            offline,
        ),
        Command::Break { common, period } => cli::break_lease(
            format,
            &common.config,
            &common.overrides(Vec::new()),
            period,
        ),
    }
}

/// clap's usage errors, folded into one line.
fn usage_error(e: &clap::Error) -> ExitCode {
    let text = e.render().to_string();
    let first = text
        .split("\n\n")
        .next()
        .unwrap_or(&text)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let first = first.strip_prefix("error: ").unwrap_or(&first);
    cli::fail(cli::EXIT_CONFIG, &format!("{first} (see leasehold --help)"))
}
