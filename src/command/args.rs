//! The command line: clap's definitions (from which the help, the completions and the man pages
//! are generated), what each subcommand is given, the values its flags take, and [`main`],
//! which parses the arguments and runs the subcommand.

use super::exit::{EXIT_CONFIG, EXIT_NOT_ACQUIRED, fail};
use super::given::{Invocation, RunOptions};
use super::{operator, pages, run, usage};
use crate::config::{OnExit, Overrides};
use crate::logging::LogFormat;
use crate::secret::Secret;
use crate::store::EntraKind;
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// The guard's subcommand; see [`main`].
const GUARD: &str = crate::guard::SUBCOMMAND;

#[derive(Parser)]
#[command(
    name = "leasehold",
    version,
    propagate_version = true,
    about = "Leader election on an Azure Blob Storage lease: runs a command only while this instance holds the lease.",
    after_help = "Exit codes: 0 clean shutdown; 2 bad configuration or usage; 3 storage refused the \
                  credentials at start-up; with on_exit = \"exit\", the command's code. A one-shot \
                  run (--try, --timeout, or no config file) exits with the command's code, or 75 \
                  not elected (another instance holds the lease; --conflict-exit-code), 69 storage \
                  unreachable or too few free files (the command did not run), 4 leadership \
                  ended before the command did (it was stopped), 128+N stopped by signal N."
)]
pub(super) struct Cli {
    /// Log format on stderr; filter with RUST_LOG (default "info"; "warn" for one-shot runs and
    /// the other commands).
    #[arg(long, global = true, value_enum, default_value = "text")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once per process
enum Command {
    /// Compete for the lease and run COMMAND while leading. With a config file, a daemon: term
    /// after term, until SIGTERM. Without one (or with --try or --timeout), a one-shot like
    /// `consul lock`: wait for the lease, run COMMAND once, exit with its code.
    #[command(after_help = "Examples:\n  \
            leasehold run --blob nightly -- ./job.sh          # wait for the lease, run once\n  \
            leasehold run --try --blob nightly -- ./job.sh    # cron on N machines: one runs it\n  \
            leasehold run --timeout 30s --blob nightly -- ./job.sh\n  \
            leasehold run -c leasehold.toml                   # a long-running sidecar\n\
            The credential comes from AZURE_STORAGE_CONNECTION_STRING (or AZURE_STORAGE_KEY or \
            AZURE_STORAGE_SAS_TOKEN with --account) or the Storage flags above.")]
    Run {
        #[command(flatten)]
        file: ConfigFile,
        #[command(flatten)]
        instance: Instance,
        #[command(flatten)]
        storage: StorageFlags,
        #[command(flatten)]
        timing: TimingFlags,
        #[command(flatten)]
        run: RunFlags,
        /// The command to run while leading; replaces [child].command.
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Show who leads the group now: holder, epoch, since when, lease state, the line of members.
    Status {
        #[command(flatten)]
        file: ConfigFile,
        #[command(flatten)]
        storage: StorageFlags,
        /// This host's daemon: its HTTP endpoint, whose view status adds; replaces
        /// [http].listen.
        #[arg(
            long,
            value_name = "ADDR",
            env = "LEASEHOLD_HTTP_LISTEN",
            value_parser = parse_listen,
            help_heading = "This instance"
        )]
        http_listen: Option<SocketAddr>,
        /// One JSON object instead of text (fields documented in docs/operations.md).
        #[arg(long)]
        json: bool,
        /// Keep looking, and show it again whenever it changes, until Ctrl-C.
        #[arg(long)]
        watch: bool,
        /// How often --watch looks (100ms to 1h).
        #[arg(long, value_parser = parse_watch_interval, default_value = "2s", requires = "watch")]
        interval: std::time::Duration,
    },
    /// Validate the config, reach storage, prove the credentials and lease permissions.
    Check {
        #[command(flatten)]
        file: ConfigFile,
        #[command(flatten)]
        instance: Instance,
        #[command(flatten)]
        storage: StorageFlags,
        #[command(flatten)]
        timing: TimingFlags,
        /// Only validate the config (and find the child's program); do not reach storage.
        #[arg(long)]
        offline: bool,
    },
    /// Break the lease (admin): the leader stops its child at its next renew, and another
    /// instance can lead once the break period is over.
    Break {
        #[command(flatten)]
        file: ConfigFile,
        #[command(flatten)]
        storage: StorageFlags,
        #[command(flatten)]
        timing: TimingFlags,
        /// How long nobody may acquire the lease after the break: 0s..60s, whole seconds.
        /// Default: renew_interval + stop_timeout + safety_margin of the config (at most 60s),
        /// so that the old leader notices at its next renew and its child is gone before anyone
        /// else can lead. `--period 0s` lets another instance lead at once, while the old
        /// child may still run: it needs --force.
        #[arg(long, value_name = "DUR", value_parser = parse_break_period)]
        period: Option<Duration>,
        /// With `--period 0s`: break it anyway, accepting that the old leader's child and the
        /// new one may run at the same time for a few seconds.
        #[arg(long)]
        force: bool,
    },
    /// Print a shell completion script on stdout, e.g.
    /// `leasehold completions bash > /etc/bash_completion.d/leasehold`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print a man page (roff) on stdout: leasehold(1), or the page of one subcommand, e.g.
    /// `leasehold man run > leasehold-run.1`.
    Man {
        /// A subcommand (run, status, check, break, completions).
        subcommand: Option<String>,
    },
}

/// The config file, which every subcommand that reaches the group reads.
#[derive(Args)]
struct ConfigFile {
    /// The TOML config file. Optional: without it every setting has its default and the flags
    /// below give the rest (--blob at least).
    #[arg(
        short = 'c',
        long = "config",
        env = "LEASEHOLD_CONFIG",
        value_name = "FILE"
    )]
    config: Option<PathBuf>,
}

/// This instance's own settings: `run` uses them, `check` checks them; `status` and `break`
/// act on the group and take none of them (status takes `--http-listen`, for this host's view).
#[derive(Args)]
struct Instance {
    /// Replaces `identity` (default: <hostname>-<pid>).
    #[arg(
        long,
        value_name = "ID",
        env = "LEASEHOLD_IDENTITY",
        help_heading = "This instance"
    )]
    identity: Option<String>,
    /// Replaces [election].priority: higher leads first (default 0).
    #[arg(
        long,
        value_name = "N",
        env = "LEASEHOLD_PRIORITY",
        value_parser = parse_priority,
        allow_negative_numbers = true,
        help_heading = "This instance"
    )]
    priority: Option<i64>,
    /// Replaces [election].advertise: the URL where the other members reach this instance's
    /// HTTP endpoint to wake it when they hand it the lease; "auto" (the default with an HTTP
    /// endpoint: its own address) or "off".
    #[arg(
        long,
        value_name = "URL",
        env = "LEASEHOLD_ADVERTISE",
        help_heading = "This instance"
    )]
    advertise: Option<String>,
    /// Serve /healthz, /readyz, /status and /metrics here; replaces [http].listen.
    #[arg(
        long,
        value_name = "ADDR",
        env = "LEASEHOLD_HTTP_LISTEN",
        value_parser = parse_listen,
        help_heading = "This instance"
    )]
    http_listen: Option<SocketAddr>,
}

/// Where the group's lease blob is, and the credential: every subcommand that reaches the group.
#[derive(Args)]
struct StorageFlags {
    /// The lease blob, one per leadership group; replaces [storage].blob.
    #[arg(long, value_name = "NAME", help_heading = "Storage")]
    blob: Option<String>,
    /// Replaces [storage].container (default: leasehold).
    #[arg(long, value_name = "NAME", help_heading = "Storage")]
    container: Option<String>,
    /// Replaces [storage].account (default: AZURE_STORAGE_ACCOUNT).
    #[arg(long, value_name = "NAME", help_heading = "Storage")]
    account: Option<String>,
    /// Replaces [storage].endpoint (default: https://<account>.blob.core.windows.net).
    #[arg(long, value_name = "URL", help_heading = "Storage")]
    endpoint: Option<String>,
    /// Replaces [storage].connection_string. Visible to other local users in the process list:
    /// prefer --connection-string-file or AZURE_STORAGE_CONNECTION_STRING.
    #[arg(long, value_name = "STRING", help_heading = "Storage")]
    connection_string: Option<String>,
    /// A file holding the connection string; replaces [storage].connection_string_file.
    #[arg(long, value_name = "FILE", help_heading = "Storage")]
    connection_string_file: Option<PathBuf>,
    /// A file holding the account key (with --account); replaces [storage].access_key_file.
    #[arg(long, value_name = "FILE", help_heading = "Storage")]
    access_key_file: Option<PathBuf>,
    /// A file holding a SAS token (with --account); replaces [storage].sas_token_file.
    #[arg(long, value_name = "FILE", help_heading = "Storage")]
    sas_token_file: Option<PathBuf>,
    /// Microsoft Entra ID instead of a key or SAS (with --account); replaces
    /// [storage].credential.
    #[arg(long, value_enum, value_name = "KIND", help_heading = "Storage")]
    credential: Option<Credential>,
    /// With --credential managed-identity: a user-assigned identity's client id; replaces
    /// [storage].client_id.
    #[arg(long, value_name = "ID", help_heading = "Storage")]
    client_id: Option<String>,
}

/// The lease timings: `run` uses them, `check` checks them, and `break`'s default period is
/// renew_interval + stop_timeout + safety_margin.
#[derive(Args)]
struct TimingFlags {
    /// L: the lease duration, whole seconds from 15s to 60s; replaces [lease].duration
    /// (default 15s).
    #[arg(long, value_name = "DUR", value_parser = parse_duration, help_heading = "Lease timing (2R + G + M <= L)")]
    lease_duration: Option<Duration>,
    /// R: how often the leader renews, 1s to L; replaces [lease].renew_interval (default 4s).
    #[arg(long, value_name = "DUR", value_parser = parse_duration, help_heading = "Lease timing (2R + G + M <= L)")]
    renew_interval: Option<Duration>,
    /// How often a follower tries to acquire, 100ms to 1h; replaces [lease].acquire_interval
    /// (default 1s).
    #[arg(long, value_name = "DUR", value_parser = parse_duration, help_heading = "Lease timing (2R + G + M <= L)")]
    acquire_interval: Option<Duration>,
    /// M: slack for clock drift and a late kill, 500ms to L; replaces [lease].safety_margin
    /// (default 1s).
    #[arg(long, value_name = "DUR", value_parser = parse_duration, help_heading = "Lease timing (2R + G + M <= L)")]
    safety_margin: Option<Duration>,
    /// G: how long the child gets to stop before its group is SIGKILLed, 0s to L; replaces
    /// [child].stop_timeout (default 5s).
    #[arg(long, value_name = "DUR", value_parser = parse_duration, help_heading = "Lease timing (2R + G + M <= L)")]
    stop_timeout: Option<Duration>,
}

/// `run`'s own flags.
#[derive(Args)]
struct RunFlags {
    /// One attempt: if another instance holds the lease, exit at once with the conflict exit
    /// code (75) without running COMMAND; if won, run it once and exit with its code.
    #[arg(long = "try", help_heading = "One-shot")]
    try_once: bool,
    /// Campaign at most DUR (0s to 7days), then exit with the conflict exit code (75) without
    /// running COMMAND; if won, run it once and exit with its code.
    #[arg(long, value_name = "DUR", value_parser = parse_timeout, conflicts_with = "try_once", help_heading = "One-shot")]
    timeout: Option<Duration>,
    /// The exit code of a one-shot that was not elected.
    #[arg(long, value_name = "N", default_value_t = EXIT_NOT_ACQUIRED, help_heading = "One-shot")]
    conflict_exit_code: u8,
    /// What to do when COMMAND ends by itself; replaces [child].on_exit (default: release with a
    /// config file, exit without). One-shot runs always exit.
    #[arg(long, value_enum, value_name = "WHAT")]
    on_exit: Option<OnExitArg>,
    /// Run COMMAND with /bin/sh -c (its words joined by spaces), like `consul lock -shell`:
    /// pipes, redirections and variables such as $LEASEHOLD_EPOCH work. Quote it as one word
    /// to keep the shell you type it in from expanding them first.
    #[arg(long, requires = "command", help_heading = "The command")]
    shell: bool,
    /// Give COMMAND this process's standard input (default: /dev/null), like
    /// `consul lock -pass-stdin`. Not a terminal: pipe the input in.
    #[arg(long, help_heading = "The command")]
    pass_stdin: bool,
}

/// `--on-exit`: [child].on_exit's values.
#[derive(Clone, Copy, ValueEnum)]
enum OnExitArg {
    /// Release the lease, then rejoin the election.
    Release,
    /// Keep the lease and restart COMMAND.
    Restart,
    /// Release the lease and exit with COMMAND's code.
    Exit,
}

/// `--credential`: [storage].credential's values.
#[derive(Clone, Copy, ValueEnum)]
enum Credential {
    /// The managed identity of the VM, scale set, App Service or Container App.
    ManagedIdentity,
    /// AKS workload identity.
    WorkloadIdentity,
    /// The developer's `az login`.
    AzureCli,
    /// The first that works, like DefaultAzureCredential.
    Default,
}

/// The options of [`Instance`] (and `status`'s `--http-listen`) that an environment variable
/// can give (`env = ...`), and the
/// config key each replaces: a value that came from the variable is named by it in messages.
const FROM_ENV: [(&str, &str); 4] = [
    ("identity", "identity"),
    ("priority", "[election].priority"),
    ("advertise", "[election].advertise"),
    ("http_listen", "[http].listen"),
];

/// The groups of flags one subcommand takes, and what they give it.
struct Given<'a> {
    file: &'a ConfigFile,
    storage: &'a StorageFlags,
    /// `run` and `check`.
    instance: Option<&'a Instance>,
    /// `run` and `check` (in [`Instance`]), and `status`.
    http_listen: Option<SocketAddr>,
    /// `run`, `check` and `break`.
    timing: Option<&'a TimingFlags>,
}

impl Given<'_> {
    /// What a subcommand is given: these flags, and `command` to run (`run` only). `matches`
    /// are the subcommand's, which tell a value from a variable from a flag's.
    fn invocation(
        &self,
        format: LogFormat,
        command: Vec<String>,
        matches: &ArgMatches,
    ) -> Invocation {
        let mut overrides = self.overrides(command);
        overrides.from_env = FROM_ENV
            .iter()
            .filter(|(id, _)| matches.try_contains_id(id).unwrap_or(false))
            .filter(|(id, _)| matches.value_source(id) == Some(ValueSource::EnvVariable))
            .map(|(_, key)| *key)
            .collect();
        Invocation {
            format,
            path: self.file.config.clone(),
            overrides,
        }
    }

    /// What a subcommand that runs no command is given.
    fn given(&self, format: LogFormat, matches: &ArgMatches) -> Invocation {
        self.invocation(format, Vec::new(), matches)
    }

    fn overrides(&self, command: Vec<String>) -> Overrides {
        let storage = self.storage;
        let mut overrides = Overrides {
            container: storage.container.clone(),
            blob: storage.blob.clone(),
            account: storage.account.clone(),
            endpoint: storage.endpoint.clone(),
            connection_string: storage.connection_string.clone().map(Secret::new),
            connection_string_file: storage.connection_string_file.clone(),
            access_key_file: storage.access_key_file.clone(),
            sas_token_file: storage.sas_token_file.clone(),
            credential: storage.credential.map(|kind| match kind {
                Credential::ManagedIdentity => EntraKind::ManagedIdentity,
                Credential::WorkloadIdentity => EntraKind::WorkloadIdentity,
                Credential::AzureCli => EntraKind::AzureCli,
                Credential::Default => EntraKind::Default,
            }),
            client_id: storage.client_id.clone(),
            http_listen: self.http_listen,
            command,
            ..Overrides::default()
        };
        if let Some(instance) = self.instance {
            overrides.identity = instance.identity.clone();
            overrides.priority = instance.priority;
            overrides.advertise = instance.advertise.clone();
        }
        if let Some(timing) = self.timing {
            overrides.lease_duration = timing.lease_duration;
            overrides.renew_interval = timing.renew_interval;
            overrides.acquire_interval = timing.acquire_interval;
            overrides.safety_margin = timing.safety_margin;
            overrides.stop_timeout = timing.stop_timeout;
        }
        overrides
    }
}

impl RunFlags {
    fn options(&self) -> RunOptions {
        RunOptions {
            patience: if self.try_once {
                Some(Duration::ZERO)
            } else {
                self.timeout
            },
            on_exit: self.on_exit.map(|on_exit| match on_exit {
                OnExitArg::Release => OnExit::Release,
                OnExitArg::Restart => OnExit::Restart,
                OnExitArg::Exit => OnExit::Exit,
            }),
            conflict_exit_code: self.conflict_exit_code,
            pass_stdin: self.pass_stdin,
        }
    }

    /// The command to run: as given, or with `--shell` one string for `/bin/sh -c`.
    fn command(&self, words: Vec<String>) -> Vec<String> {
        if self.shell {
            vec!["/bin/sh".to_owned(), "-c".to_owned(), words.join(" ")]
        } else {
            words
        }
    }
}

/// Runs the `leasehold` command with this process's arguments, to its exit code: the whole
/// `main` of the binary (`src/main.rs`). Parses the command line (clap), prints help, version,
/// completions and man pages, and runs `run`, `status`, `check` or `break` as the README and
/// `leasehold --help` describe them; a usage error is one line on stderr and exit code 2.
pub fn main() -> ExitCode {
    // `leasehold __guard PGID ...` (internal): started by the daemon for each child, it holds
    // the child's process group to its deadlines whatever becomes of the daemon
    // (crate::guard). Kept out of clap, so that no help page, completion or man page offers
    // it, and run before anything else is set up: it must stay small.
    let mut args = std::env::args();
    if args.nth(1).as_deref() == Some(GUARD) {
        return match crate::guard::run(&args.collect::<Vec<_>>()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(usage) => fail(EXIT_CONFIG, &usage),
        };
    }
    let parsed = Cli::command()
        .try_get_matches()
        .and_then(|matches| Ok((Cli::from_arg_matches(&matches)?, matches)));
    let (cli, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(e) if !e.use_stderr() => {
            // --help and --version.
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => return usage::usage_error(&e),
    };
    let format = cli.log_format;
    let empty = ArgMatches::default();
    let sub = matches.subcommand().map_or(&empty, |(_, m)| m);
    match cli.command {
        Command::Run {
            file,
            instance,
            storage,
            timing,
            run,
            command,
        } => {
            let given = Given {
                file: &file,
                storage: &storage,
                instance: Some(&instance),
                http_listen: instance.http_listen,
                timing: Some(&timing),
            };
            run::run(
                &given.invocation(format, run.command(command), sub),
                &run.options(),
            )
        }
        Command::Status {
            file,
            storage,
            http_listen,
            json,
            watch,
            interval,
        } => {
            let given = Given {
                file: &file,
                storage: &storage,
                instance: None,
                http_listen,
                timing: None,
            };
            operator::status(&given.given(format, sub), json, watch.then_some(interval))
        }
        Command::Check {
            file,
            instance,
            storage,
            timing,
            offline,
        } => {
            let given = Given {
                file: &file,
                storage: &storage,
                instance: Some(&instance),
                http_listen: instance.http_listen,
                timing: Some(&timing),
            };
            operator::check(&given.given(format, sub), offline)
        }
        Command::Break {
            file,
            storage,
            timing,
            period,
            force,
        } => {
            let given = Given {
                file: &file,
                storage: &storage,
                instance: None,
                http_listen: None,
                timing: Some(&timing),
            };
            operator::break_lease(&given.given(format, sub), period, force)
        }
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "leasehold", &mut script);
            pages::print(&script)
        }
        Command::Man { subcommand } => pages::man(Cli::command(), subcommand.as_deref()),
    }
}

/// The longest `--timeout`.
const MAX_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 3600);

/// `status --interval`: 100 ms to 1 h.
pub fn parse_watch_interval(text: &str) -> Result<Duration, String> {
    let every = parse_duration(text)?;
    if every < Duration::from_millis(100) || every > Duration::from_secs(3600) {
        return Err(format!("{text} is out of range: give 100ms to 1h"));
    }
    Ok(every)
}

/// `--period`: 0s to 60s, whole seconds, as Azure takes it.
pub fn parse_break_period(text: &str) -> Result<Duration, String> {
    let period = parse_duration(text)?;
    if period.subsec_nanos() != 0 || period > Duration::from_secs(60) {
        return Err("the break period is 0s to 60s, in whole seconds".to_owned());
    }
    Ok(period)
}

/// A duration flag (`--lease-duration`, ...): `15s`, `1500ms`, `1m`. Its range is the config's
/// rule for the key it replaces, checked with the rest.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text)
        .map_err(|e| format!("{e}; write a duration like 15s, 1500ms or 1m"))
}

/// `--priority` (`LEASEHOLD_PRIORITY`): a 64-bit whole number.
pub fn parse_priority(text: &str) -> Result<i64, String> {
    text.trim().parse().map_err(|_| {
        "must be a whole number, e.g. 5 or -1 (higher leads first; the default is 0)".to_owned()
    })
}

/// `--http-listen` (`LEASEHOLD_HTTP_LISTEN`): an IP address and a port.
pub fn parse_listen(text: &str) -> Result<std::net::SocketAddr, String> {
    text.trim().parse().map_err(|_| {
        "must be an IP address and a port, e.g. 0.0.0.0:9464 or 127.0.0.1:9464".to_owned()
    })
}

/// `--timeout`: 0s (one attempt, as `--try`) to 7 days.
pub fn parse_timeout(text: &str) -> Result<Duration, String> {
    let timeout = parse_duration(text)?;
    if timeout > MAX_TIMEOUT {
        return Err(format!(
            "must be at most {}; without --timeout, run waits as long as it takes",
            humantime::format_duration(MAX_TIMEOUT)
        ));
    }
    Ok(timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// clap's own checks of the definitions (unique names, conflicts that exist...), which it
    /// otherwise makes only when a command is parsed or a page generated.
    #[test]
    fn the_command_line_definitions_hold_together() {
        Cli::command().debug_assert();
    }
}
