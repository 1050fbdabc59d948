//! The `leasehold` command line: parses arguments, loads the config, and calls into the library.

use clap::{Args, Parser, Subcommand};
use leasehold::config::{Config, ConfigError, Overrides, Settings};
use leasehold::daemon::{self, DaemonError, Exit};
use leasehold::logging::{self, LogFormat};
use leasehold::secret::Secret;
use leasehold::store::azure::AzureStore;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// Exit codes (design section 7).
const EXIT_CONFIG: u8 = 2;
const EXIT_DENIED: u8 = 3;

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
    match cli.command {
        Command::Guard { pgid } => {
            leasehold::child::run_guard(pgid);
            ExitCode::SUCCESS
        }
        Command::Run { common, command } => run(cli.log_format, &common, command),
    }
}

fn run(format: LogFormat, common: &Common, command: Vec<String>) -> ExitCode {
    let settings = match settings(&common.config, &common.overrides(command)) {
        Ok(s) => s,
        Err(e) => return fail(EXIT_CONFIG, &e),
    };
    if let Err(e) = find_program(&settings) {
        return fail(EXIT_CONFIG, &e);
    }
    logging::init(format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(EXIT_CONFIG, &format!("cannot start the runtime: {e}")),
    };
    let result = runtime.block_on(async {
        let controls = daemon::signal_controls()
            .map_err(|e| DaemonError::Setup(format!("cannot install signal handlers: {e}")))?;
        let store =
            AzureStore::new(&settings.storage).map_err(|e| DaemonError::Setup(e.to_string()))?;
        daemon::run(&settings, Arc::new(store), controls).await
    });
    match result {
        Ok(Exit::Clean) => ExitCode::SUCCESS,
        Ok(Exit::Child(code)) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            tracing::error!("{e}");
            match e {
                DaemonError::Denied(_) => ExitCode::from(EXIT_DENIED),
                DaemonError::Missing(_) | DaemonError::Setup(_) => ExitCode::from(EXIT_CONFIG),
            }
        }
    }
}

fn settings(path: &Path, overrides: &Overrides) -> Result<Settings, ConfigError> {
    let env = |name: &str| std::env::var(name).ok();
    Config::load(path, overrides)?
        .validate(&env)
        .map_err(|e| e.in_file(path))
}

/// Refuses to start when the child's program cannot be found: better one clear line now than a
/// leader that fails to start its child on every election.
fn find_program(settings: &Settings) -> Result<(), String> {
    let program = Path::new(&settings.child.command[0]);
    let runnable = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let found = if program.components().count() > 1 {
        let full = match &settings.child.working_dir {
            Some(dir) if program.is_relative() => dir.join(program),
            _ => program.to_owned(),
        };
        runnable(&full)
    } else {
        std::env::var_os("PATH").is_some_and(|path| {
            std::env::split_paths(&path).any(|dir| runnable(&dir.join(program)))
        })
    };
    if found {
        Ok(())
    } else {
        Err(format!(
            "[child].command: program {:?} is not an executable file{}",
            program,
            if program.components().count() > 1 {
                ""
            } else {
                " in PATH"
            }
        ))
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
    fail(EXIT_CONFIG, &format!("{first} (see leasehold --help)"))
}

fn fail(code: u8, error: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("leasehold: error: {error}");
    ExitCode::from(code)
}
