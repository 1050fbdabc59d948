//! The `leasehold` command's subcommands, each run to its exit code: what `main.rs` calls once
//! it has parsed the arguments. Not part of the library's API (hidden from its docs): the
//! command line is the contract here, and the README documents it.

use crate::config::{self, Config, Group, Overrides};
use crate::daemon::{self, Candidacy, DaemonError, Exit};
use crate::elector::Error as ElectorError;
use crate::fmt::human;
use crate::logging;
use crate::ops::{self, CheckLine};
use crate::store::{AzureStore, Failure, StoreError};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

pub use crate::config::{OnExit, STORAGE_ENV_VARS, Settings, check_offline};
pub use crate::logging::{FLUSH_LIMIT, LogFormat};
pub use crate::open_files::{MAX_HTTP_CONNECTIONS, RESERVE, TERM_HEADROOM};

/// What each subcommand that reads the config was given on the command line.
pub struct Invocation {
    /// How to log (`--log-format`).
    pub format: LogFormat,
    /// The config file (`--config`); without one, the defaults and the flags.
    pub path: Option<PathBuf>,
    /// The flags that replace the file's keys.
    pub overrides: Overrides,
}

impl Invocation {
    fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
}

/// Exit codes (design section 7). 1 is for `status`, `check` and `break` failures other than
/// refused credentials.
const EXIT_FAILED: u8 = 1;
/// Bad configuration or usage.
pub const EXIT_CONFIG: u8 = 2;
const EXIT_DENIED: u8 = 3;
/// A one-shot run whose term ended before its command did (the lease lost or not renewed in
/// time, the command unhealthy): the command was stopped.
const EXIT_CUT_SHORT: u8 = 4;
/// A one-shot run that could not reach storage, or whose last acquire failed: the command did
/// not run (sysexits' EX_UNAVAILABLE).
const EXIT_UNAVAILABLE: u8 = 69;
/// A one-shot run that was not elected: another instance held the lease (`--try`), or held it
/// for all of `--timeout`; the command did not run. sysexits' EX_TEMPFAIL, "try again later":
/// unlike flock's 1, it does not collide with the commonest failure of commands.
pub const EXIT_NOT_ACQUIRED: u8 = 75;
/// The longest `--timeout`.
const MAX_TIMEOUT: Duration = Duration::from_secs(7 * 24 * 3600);

/// `leasehold run`'s own flags, beside the config's.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// `--try` (`Some(ZERO)`: one attempt) or `--timeout DUR`: campaign at most this long, then
    /// exit with `conflict_exit_code`; a term won runs the command once.
    pub patience: Option<Duration>,
    /// `--on-exit`: replaces `[child].on_exit`.
    pub on_exit: Option<OnExit>,
    /// `--conflict-exit-code`: the exit code of a one-shot run that was not elected.
    pub conflict_exit_code: u8,
    /// `--pass-stdin`: the child reads this process's standard input.
    pub pass_stdin: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            patience: None,
            on_exit: None,
            conflict_exit_code: EXIT_NOT_ACQUIRED,
            pass_stdin: false,
        }
    }
}

impl RunOptions {
    /// A one-shot (one term, the command once, then exit) with `--try` or `--timeout`, and
    /// without a config file unless `--on-exit release` or `restart` asks for a long-running
    /// sidecar; a daemon (term after term) otherwise. Refuses `--on-exit release|restart` with
    /// `--try` or `--timeout`.
    fn candidacy(&self, file: Option<&Path>) -> Result<Candidacy, String> {
        let once = matches!(self.on_exit, None | Some(OnExit::Exit));
        match (self.patience, file) {
            (Some(_), _) if !once => Err(format!(
                "--on-exit {}: --try and --timeout run the command once (as on_exit = \
                 \"exit\"); leave --on-exit out",
                self.on_exit.map_or("", OnExit::as_str)
            )),
            (Some(patience), _) => Ok(Candidacy::OneTerm {
                patience: Some(patience),
            }),
            (None, None) if once => Ok(Candidacy::OneTerm { patience: None }),
            _ => Ok(Candidacy::Standing),
        }
    }
}

/// `leasehold run`: compete for the lease and run the child while leading, until SIGTERM or
/// SIGINT (or, with `on_exit = "exit"`, the child's exit); a one-shot ([`RunOptions`]) runs it
/// once at most.
pub fn run(given: &Invocation, options: &RunOptions) -> ExitCode {
    let path = given.path();
    let env = |name: &str| std::env::var(name).ok();
    let candidacy = match options.candidacy(path) {
        Ok(c) => c,
        Err(e) => return fail(EXIT_CONFIG, &e),
    };
    if options.pass_stdin && std::io::IsTerminal::is_terminal(&std::io::stdin()) {
        return fail(
            EXIT_CONFIG,
            &"--pass-stdin: standard input is a terminal, which the command cannot read: it \
              runs in a process group of its own (so that stop signals reach all it starts), \
              and a group that reads the terminal from the background is stopped (SIGTTIN); \
              pipe the input in instead (producer | leasehold run --pass-stdin ...)",
        );
    }
    let config = match Config::load_or_defaults(path, &given.overrides) {
        Ok(c) => c,
        Err(e) => return fail(EXIT_CONFIG, &e),
    };
    let mut settings = match config.validate(&env) {
        Ok(s) => s,
        Err(e) => return fail(EXIT_CONFIG, &e),
    };
    let one_term = candidacy != Candidacy::Standing;
    settings.child.pass_stdin = options.pass_stdin;
    if one_term {
        settings.child.on_exit = OnExit::Exit;
    } else if let Some(on_exit) = options.on_exit {
        settings.child.on_exit = on_exit;
    }
    // Better one clear line now than a leader that fails to start its child on every election.
    let child = &settings.child;
    let program = config::find_program(
        &config.origins.name("[child].command"),
        &child.command[0],
        child.working_dir.as_deref(),
        std::env::var_os("PATH").as_deref(),
    );
    if let Err(e) = program {
        return fail(EXIT_CONFIG, &e);
    }
    // A one-shot is quiet unless something goes wrong: cron mails whatever a job prints.
    let log = logging::init(given.format, if one_term { "warn" } else { "info" });
    // Before anything opens files or starts a program (see open_files).
    match crate::open_files::raise_limit() {
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
        let store = AzureStore::new(&settings.group.storage)
            .map_err(|e| DaemonError::Setup(e.to_string()))?;
        daemon::run(&settings, Arc::new(store), controls, candidacy).await
    });
    // The child is gone and the lease released: nothing left is worth waiting for (a blocking
    // task stuck on, say, a DNS lookup would hold up an ordinary drop of the runtime).
    runtime.shutdown_background();
    let code = match result {
        Ok(Exit::Clean) => ExitCode::SUCCESS,
        Ok(Exit::Child(code)) => ExitCode::from(code.clamp(0, 255) as u8),
        Ok(Exit::Stopped(signal)) => ExitCode::from(128 + signal as u8),
        Ok(Exit::NotElected(None)) => {
            tracing::info!(
                "not elected: another instance holds the lease; the command did not run"
            );
            ExitCode::from(options.conflict_exit_code)
        }
        Ok(Exit::NotElected(Some(why))) => {
            tracing::error!("{why}; the command did not run");
            ExitCode::from(EXIT_UNAVAILABLE)
        }
        Ok(Exit::CutShort(why)) => {
            tracing::error!("{why}: the command was stopped before it ended");
            ExitCode::from(EXIT_CUT_SHORT)
        }
        Err(e) => {
            tracing::error!("{e}");
            match e {
                DaemonError::Elector(ElectorError::Denied(_)) => ExitCode::from(EXIT_DENIED),
                _ => ExitCode::from(EXIT_CONFIG),
            }
        }
    };
    // Bounded: a stalled log consumer does not keep the daemon from exiting.
    log.finish();
    code
}

/// `leasehold status`: who leads the group now, and the line of members. With `watch`, looks
/// again every so often and shows it again whenever it changed, until Ctrl-C.
pub fn status(given: &Invocation, json: bool, watch: Option<Duration>) -> ExitCode {
    one_shot(given, |group, store| async move {
        let Some(every) = watch else {
            return match look(&store, &group).await {
                Ok(report) => {
                    print!("{}", shown(&report, json));
                    ExitCode::SUCCESS
                }
                Err(e) => storage_failure(&e, &group),
            };
        };
        watch_status(&store, &group, json, every).await
    })
}

/// The group's blob and members, and with `[lease].slots` > 1 every slot (one more listing;
/// a failed one leaves the slots out rather than the whole report).
async fn look(store: &AzureStore, group: &Group) -> Result<ops::LeaseReport, StoreError> {
    let mut report = ops::status(store, &group.storage, group.http_listen).await?;
    if group.slots > 1 {
        report.with_slots(ops::slots(store, group.slots).await.unwrap_or_default());
    }
    Ok(report)
}

fn shown(report: &ops::LeaseReport, json: bool) -> String {
    if json {
        format!("{}\n", serde_json::to_string(report).unwrap_or_default())
    } else {
        report.render()
    }
}

/// `status --watch`: on a terminal the screen is cleared and redrawn, elsewhere each new view
/// follows the last; nothing is written while nothing changed. With `--json`, a stream of
/// events for followers to act on (as client-go's `OnNewLeader`): one object per line and per
/// change, `status --json`'s fields plus `event` (`initial`, `leader_changed`: another leader or
/// epoch, `changed`: anything else, `error`) and `observed_at`.
async fn watch_status(store: &AzureStore, group: &Group, json: bool, every: Duration) -> ExitCode {
    use std::io::{IsTerminal, Write};
    let redraw = !json && std::io::stdout().is_terminal();
    let mut last: Option<String> = None;
    // The leader and epoch of the last view shown: a change of them is a `leader_changed`.
    let mut last_leader: Option<(Option<String>, Option<u64>)> = None;
    loop {
        let looked = tokio::select! {
            r = look(store, group) => r,
            _ = tokio::signal::ctrl_c() => return ExitCode::SUCCESS,
        };
        let observed_at = crate::store::rfc3339(time::OffsetDateTime::now_utc());
        let (digest, text) = match looked {
            Ok(report) if json => {
                let leader = (report.leader.clone(), report.epoch);
                let event = match &last_leader {
                    None => "initial",
                    Some(before) if *before != leader => "leader_changed",
                    Some(_) => "changed",
                };
                let digest = report.digest();
                if last.as_ref() != Some(&digest) {
                    last_leader = Some(leader);
                }
                (digest, watch_event(&report, event, &observed_at))
            }
            Ok(report) => (report.digest(), shown(&report, json)),
            Err(e) if e.failure() == Failure::Denied => return storage_failure(&e, group),
            // Passing trouble: said once, and looked at again.
            Err(e) => {
                let said = ops::storage_error_line(&e, &group.storage);
                let text = if json {
                    let event = serde_json::json!({
                        "event": "error",
                        "observed_at": observed_at,
                        "error": said,
                    });
                    format!("{event}\n")
                } else {
                    format!("cannot read the lease blob: {said}\n")
                };
                (format!("error {e}"), text)
            }
        };
        if last.as_ref() != Some(&digest) {
            let mut out = String::new();
            if redraw {
                out += "\x1b[H\x1b[2J";
            } else if last.is_some() && !json {
                out += "\n";
            }
            if !json {
                out += &format!(
                    "{} (every {}; Ctrl-C ends)\n",
                    crate::store::rfc3339(time::OffsetDateTime::now_utc()),
                    human(every)
                );
            }
            out += &text;
            let mut stdout = std::io::stdout().lock();
            // A closed pipe (`| head`) ends the watch.
            if stdout
                .write_all(out.as_bytes())
                .and_then(|()| stdout.flush())
                .is_err()
            {
                return ExitCode::SUCCESS;
            }
            last = Some(digest);
        }
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = tokio::signal::ctrl_c() => return ExitCode::SUCCESS,
        }
    }
}

/// One line of `status --watch --json`: the report, with `event` and `observed_at`.
fn watch_event(report: &ops::LeaseReport, event: &str, observed_at: &str) -> String {
    let mut line = serde_json::Map::new();
    line.insert("event".into(), event.into());
    line.insert("observed_at".into(), observed_at.into());
    if let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(report) {
        line.extend(fields);
    }
    format!("{}\n", serde_json::Value::Object(line))
}

/// `status --interval`: 100 ms to 1 h.
pub fn parse_watch_interval(text: &str) -> Result<Duration, String> {
    let every = parse_duration(text)?;
    if every < Duration::from_millis(100) || every > Duration::from_secs(3600) {
        return Err(format!("{text} is out of range: give 100ms to 1h"));
    }
    Ok(every)
}

/// `leasehold break`: break the lease, for `period` or the safe default of the config. A
/// period of zero lets another instance lead while the old leader's child may still run, so it
/// needs `force`.
pub fn break_lease(given: &Invocation, period: Option<Duration>, force: bool) -> ExitCode {
    one_shot(given, |group, store| async move {
        let safe = group.timing.safe_break_period();
        if period == Some(Duration::ZERO) && !force {
            return fail(
                EXIT_CONFIG,
                &format!(
                    "--period 0s lets another instance lead at once while the old leader's child \
                     may still run for up to {} (renew_interval + stop_timeout + safety_margin): \
                     two children at once; add --force to do it anyway, or leave --period out \
                     (the default waits that long)",
                    human(safe)
                ),
            );
        }
        let period = period.unwrap_or(safe);
        match ops::break_lease(&store, &group.storage, period).await {
            Ok(outcome) => {
                print!("{}", outcome.render());
                ExitCode::SUCCESS
            }
            Err(e) => storage_failure(&e, &group),
        }
    })
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

/// `leasehold check`: a checklist on stdout, one line per step, with a hint on failure.
pub fn check(given: &Invocation, offline: bool) -> ExitCode {
    let env = |name: &str| std::env::var(name).ok();
    let (mut lines, group) = ops::check_config(given.path(), &given.overrides, &env);
    let group = match group {
        Some(group) if !offline => group,
        _ => return report(&lines, group.is_none()),
    };
    logging::init_quiet(given.format);
    lines.extend(
        match tokio::runtime::Builder::new_current_thread()
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
        },
    );
    report(&lines, false)
}

/// Prints the checklist; exit 2 when the config itself failed, 1 when another step did.
fn report(lines: &[CheckLine], config_failed: bool) -> ExitCode {
    for line in lines {
        print!("{}", line.render());
    }
    if config_failed {
        ExitCode::from(EXIT_CONFIG)
    } else if lines.iter().all(CheckLine::passed) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILED)
    }
}

/// `leasehold __guard PGID` (internal): kills a child's process group when the daemon dies.
pub fn guard(pgid: i32) -> ExitCode {
    crate::child::run_guard(pgid);
    ExitCode::SUCCESS
}

/// `status` and `break`: load the group config and its store, then run one async command on a
/// small runtime.
fn one_shot<F, Fut>(given: &Invocation, command: F) -> ExitCode
where
    F: FnOnce(Group, AzureStore) -> Fut,
    Fut: Future<Output = ExitCode>,
{
    let env = |name: &str| std::env::var(name).ok();
    let config = Config::load_or_defaults(given.path(), &given.overrides);
    let group = match config.and_then(|c| c.validate_group(&env)) {
        Ok(g) => g,
        Err(e) => return fail(EXIT_CONFIG, &e),
    };
    logging::init_quiet(given.format);
    let store = match AzureStore::new(&group.storage) {
        Ok(s) => s,
        Err(e) => return fail(EXIT_CONFIG, &e),
    };
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt.block_on(command(group, store)),
        Err(e) => fail(EXIT_FAILED, &format!("cannot start the runtime: {e}")),
    }
}

/// The exit code of a failed storage request in a one-shot command, and its one line: what
/// failed, where, and what to fix.
fn storage_failure(e: &StoreError, group: &Group) -> ExitCode {
    if e.failure() == Failure::Denied {
        fail(
            EXIT_DENIED,
            &format!("storage refused the credentials ({e}); {}", e.denied_hint()),
        )
    } else {
        fail(EXIT_FAILED, &ops::storage_error_line(e, &group.storage))
    }
}

/// One line on stderr, and the exit code.
pub fn fail(code: u8, error: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("leasehold: error: {error}");
    ExitCode::from(code)
}
