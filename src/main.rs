//! The `leasehold` command line: parses arguments, loads the config, and calls into the library.

use clap::{Args, Parser, Subcommand};
use leasehold::config::{self, Config, ConfigError, Group, Overrides};
use leasehold::daemon::{self, DaemonError, Exit};
use leasehold::logging::{self, LogFormat};
use leasehold::ops::{self, CheckLine};
use leasehold::secret::Secret;
use leasehold::store::azure::AzureStore;
use leasehold::store::{Failure, StoreError};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

/// Exit codes (design section 7). 1 is for `status`, `check` and `break` failures other than
/// refused credentials.
const EXIT_FAILED: u8 = 1;
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
    /// Show who leads the group now: holder, epoch, since when, lease state.
    Status {
        #[command(flatten)]
        common: Common,
        /// One JSON object instead of text (fields documented in the README).
        #[arg(long)]
        json: bool,
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
        #[arg(long, value_parser = parse_break_period)]
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
    match cli.command {
        Command::Guard { pgid } => {
            leasehold::child::run_guard(pgid);
            ExitCode::SUCCESS
        }
        Command::Run { common, command } => run(cli.log_format, &common, command),
        Command::Status { common, json } => one_shot(cli.log_format, &common, |group| {
            Box::pin(status(group, json))
        }),
        Command::Check { common, offline } => check(cli.log_format, &common, offline),
        Command::Break { common, period } => one_shot(cli.log_format, &common, move |group| {
            let t = &group.timing;
            let safe =
                (t.renew_interval + t.stop_timeout + t.safety_margin).min(Duration::from_secs(60));
            // Azure counts the break period in whole seconds: round the safe default up.
            let safe = Duration::from_secs(safe.as_secs() + u64::from(safe.subsec_nanos() > 0))
                .min(Duration::from_secs(60));
            Box::pin(break_lease(group, period.unwrap_or(safe)))
        }),
    }
}

fn parse_break_period(text: &str) -> Result<Duration, String> {
    let period = humantime::parse_duration(text).map_err(|e| e.to_string())?;
    if period.subsec_nanos() != 0 || period > Duration::from_secs(60) {
        return Err("the break period is 0s to 60s, in whole seconds".to_owned());
    }
    Ok(period)
}

type OneShot = std::pin::Pin<Box<dyn std::future::Future<Output = ExitCode>>>;

/// `status` and `break`: load the group config, then run one async command on a small runtime.
fn one_shot(
    format: LogFormat,
    common: &Common,
    command: impl FnOnce(Group) -> OneShot,
) -> ExitCode {
    let group = match group(&common.config, &common.overrides(Vec::new())) {
        Ok(g) => g,
        Err(e) => return fail(EXIT_CONFIG, &e),
    };
    logging::init_quiet(format);
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(command(group)),
        Err(e) => fail(EXIT_FAILED, &format!("cannot start the runtime: {e}")),
    }
}

fn store(group: &Group) -> Result<AzureStore, ExitCode> {
    AzureStore::new(&group.storage).map_err(|e| fail(EXIT_CONFIG, &e))
}

/// The exit code of a failed storage request in a one-shot command.
fn storage_failure(e: &StoreError) -> ExitCode {
    if e.failure() == Failure::Denied {
        fail(
            EXIT_DENIED,
            &format!("storage refused the credentials ({e}); {}", e.denied_hint()),
        )
    } else {
        fail(EXIT_FAILED, &e)
    }
}

async fn status(group: Group, json: bool) -> ExitCode {
    let store = match store(&group) {
        Ok(s) => s,
        Err(code) => return code,
    };
    match ops::status(&store, &group.storage, group.http_listen).await {
        Ok(report) if json => {
            println!("{}", serde_json::to_string(&report).unwrap_or_default());
            ExitCode::SUCCESS
        }
        Ok(report) => {
            print!("{}", report.render());
            ExitCode::SUCCESS
        }
        Err(e) => storage_failure(&e),
    }
}

async fn break_lease(group: Group, period: Duration) -> ExitCode {
    let store = match store(&group) {
        Ok(s) => s,
        Err(code) => return code,
    };
    match ops::break_lease(&store, &group.storage, period).await {
        Ok(outcome) => {
            print!("{}", outcome.render());
            ExitCode::SUCCESS
        }
        Err(e) => storage_failure(&e),
    }
}

/// `check`: a checklist on stdout, one line per step, with a hint on failure.
fn check(format: LogFormat, common: &Common, offline: bool) -> ExitCode {
    let path = &common.config;
    let config_failed = |e: ConfigError| {
        print!(
            "{}",
            CheckLine::fail("config", e.to_string(), "fix the config file").render()
        );
        ExitCode::from(EXIT_CONFIG)
    };
    let config = match Config::load(path, &common.overrides(Vec::new())) {
        Ok(c) => c,
        Err(e) => return config_failed(e),
    };
    let env = |name: &str| std::env::var(name).ok();
    let group = match config.validate_group(&env).map_err(|e| e.in_file(path)) {
        Ok(g) => g,
        Err(e) => return config_failed(e),
    };
    // `[child]` is checked as `run` checks it; only a missing command is fine here, since it
    // may come after `--` on the command line.
    let child = match config.child_settings() {
        Ok(child) => Some(child),
        Err(ConfigError::Missing { key, .. }) if key == "[child].command" => None,
        Err(e) => return config_failed(e.in_file(path)),
    };
    let t = &group.timing;
    let mut lines = vec![CheckLine::ok(
        "config",
        format!(
            "{}: {} in group {}/{}; lease {}, renew {}, stop timeout {}, margin {}",
            path.display(),
            group.identity,
            group.storage.container,
            group.storage.blob,
            leasehold::human(t.duration),
            leasehold::human(t.renew_interval),
            leasehold::human(t.stop_timeout),
            leasehold::human(t.safety_margin),
        ),
    )];
    lines.extend(
        group
            .warnings
            .iter()
            .map(|w| CheckLine::warn("config", w.clone())),
    );
    lines.push(match child {
        Some(child) => match find_program(&child.command[0], child.working_dir.as_deref()) {
            Ok(found) => CheckLine::ok(
                "child",
                format!("{} is {}", child.command[0], found.display()),
            ),
            Err(e) => CheckLine::fail("child", e, "install the program, or fix [child].command"),
        },
        None => CheckLine::ok(
            "child",
            "no [child].command; give it after `--` to leasehold run",
        ),
    });
    if !offline {
        logging::init_quiet(format);
        let storage = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => match AzureStore::new(&group.storage) {
                Ok(store) => rt.block_on(ops::check(&store, &group.storage, &group.timing)),
                Err(e) => vec![CheckLine::fail(
                    "endpoint",
                    e.to_string(),
                    "check [storage]",
                )],
            },
            Err(e) => vec![CheckLine::fail("runtime", e.to_string(), "")],
        };
        lines.extend(storage);
    }
    for line in &lines {
        print!("{}", line.render());
    }
    if lines.iter().all(CheckLine::passed) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILED)
    }
}

fn run(format: LogFormat, common: &Common, command: Vec<String>) -> ExitCode {
    let env = |name: &str| std::env::var(name).ok();
    let settings = match config::check_offline(&common.config, &common.overrides(command), &env) {
        Ok(s) => s,
        Err(e) => return fail(EXIT_CONFIG, &e),
    };
    // Better one clear line now than a leader that fails to start its child on every election.
    if let Err(e) = find_program(
        &settings.child.command[0],
        settings.child.working_dir.as_deref(),
    ) {
        return fail(EXIT_CONFIG, &e);
    }
    let log = logging::init(format);
    // Before anything opens files or starts a program (see open_files).
    match leasehold::open_files::raise_limit() {
        Ok(raised) if raised.now > raised.inherited => tracing::info!(
            from = raised.inherited,
            to = raised.now,
            "raised the open-file limit to the hard limit; programs leasehold starts get the \
             inherited one"
        ),
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "cannot raise the open-file limit"),
    }
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
    // The child is gone and the lease released: nothing left is worth waiting for (a blocking
    // task stuck on, say, a DNS lookup would hold up an ordinary drop of the runtime).
    runtime.shutdown_background();
    let code = match result {
        Ok(Exit::Clean) => ExitCode::SUCCESS,
        Ok(Exit::Child(code)) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            tracing::error!("{e}");
            match e {
                DaemonError::Denied(_) => ExitCode::from(EXIT_DENIED),
                DaemonError::Missing(_) | DaemonError::Setup(_) => ExitCode::from(EXIT_CONFIG),
            }
        }
    };
    // Bounded: a stalled log consumer does not keep the daemon from exiting.
    log.finish();
    code
}

fn group(path: &Path, overrides: &Overrides) -> Result<Group, ConfigError> {
    let env = |name: &str| std::env::var(name).ok();
    Config::load(path, overrides)?
        .validate_group(&env)
        .map_err(|e| e.in_file(path))
}

/// Finds the child's program as `exec` would: a path as given (relative to `working_dir`), a
/// bare name in PATH.
fn find_program(program: &str, working_dir: Option<&Path>) -> Result<PathBuf, String> {
    let program = Path::new(program);
    let runnable = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let found = if program.components().count() > 1 {
        let full = match working_dir {
            Some(dir) if program.is_relative() => dir.join(program),
            _ => program.to_owned(),
        };
        runnable(&full).then_some(full)
    } else {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(program))
                .find(|p| runnable(p))
        })
    };
    found.ok_or_else(|| {
        format!(
            "[child].command: program {:?} is not an executable file{}",
            program,
            if program.components().count() > 1 {
                ""
            } else {
                " in PATH"
            }
        )
    })
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
