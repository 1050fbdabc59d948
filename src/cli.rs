//! The `leasehold` command's subcommands, each run to its exit code: what `main.rs` calls once
//! it has parsed the arguments. Not part of the library's API (hidden from its docs): the
//! command line is the contract here, and the README documents it.

use crate::config::{self, Config, ConfigError, Group, Overrides};
use crate::daemon::{self, DaemonError, Exit};
use crate::elector::Error as ElectorError;
use crate::logging;
use crate::ops::{self, CheckLine};
use crate::store::{AzureStore, Failure, StoreError};
use std::future::Future;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

pub use crate::config::{STORAGE_ENV_VARS, Settings, check_offline};
pub use crate::logging::{FLUSH_LIMIT, LogFormat};
pub use crate::open_files::{MAX_HTTP_CONNECTIONS, RESERVE, TERM_HEADROOM};

/// Exit codes (design section 7). 1 is for `status`, `check` and `break` failures other than
/// refused credentials.
const EXIT_FAILED: u8 = 1;
/// Bad configuration or usage.
pub const EXIT_CONFIG: u8 = 2;
const EXIT_DENIED: u8 = 3;

/// `leasehold run`: compete for the lease and run the child while leading, until SIGTERM or
/// SIGINT (or, with `on_exit = "exit"`, the child's exit).
pub fn run(format: LogFormat, path: &Path, overrides: &Overrides) -> ExitCode {
    let env = |name: &str| std::env::var(name).ok();
    let settings = match config::check_offline(path, overrides, &env) {
        Ok(s) => s,
        Err(e) => return fail(EXIT_CONFIG, &e),
    };
    // Better one clear line now than a leader that fails to start its child on every election.
    let child = &settings.child;
    let program = config::find_program(
        &child.command[0],
        child.working_dir.as_deref(),
        std::env::var_os("PATH").as_deref(),
    );
    if let Err(e) = program {
        return fail(EXIT_CONFIG, &e);
    }
    let log = logging::init(format);
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
                DaemonError::Elector(ElectorError::Denied(_)) => ExitCode::from(EXIT_DENIED),
                _ => ExitCode::from(EXIT_CONFIG),
            }
        }
    };
    // Bounded: a stalled log consumer does not keep the daemon from exiting.
    log.finish();
    code
}

/// `leasehold status`: who leads the group now.
pub fn status(format: LogFormat, path: &Path, overrides: &Overrides, json: bool) -> ExitCode {
    one_shot(format, path, overrides, |group, store| async move {
        let mut status = ops::status(&store, &group.storage, group.http_listen).await;
        if let (Ok(report), true) = (&mut status, group.slots > 1) {
            report.slots = ops::slots(&store, group.slots).await.unwrap_or_default();
        }
        match status {
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
    })
}

/// `leasehold break`: break the lease, for `period` or the safe default of the config.
pub fn break_lease(
    format: LogFormat,
    path: &Path,
    overrides: &Overrides,
    period: Option<Duration>,
) -> ExitCode {
    one_shot(format, path, overrides, |group, store| async move {
        let period = period.unwrap_or(group.timing.safe_break_period());
        match ops::break_lease(&store, &group.storage, period).await {
            Ok(outcome) => {
                print!("{}", outcome.render());
                ExitCode::SUCCESS
            }
            Err(e) => storage_failure(&e),
        }
    })
}

/// `--period`: 0s to 60s, whole seconds, as Azure takes it.
pub fn parse_break_period(text: &str) -> Result<Duration, String> {
    let period = humantime::parse_duration(text).map_err(|e| e.to_string())?;
    if period.subsec_nanos() != 0 || period > Duration::from_secs(60) {
        return Err("the break period is 0s to 60s, in whole seconds".to_owned());
    }
    Ok(period)
}

/// `leasehold check`: a checklist on stdout, one line per step, with a hint on failure.
pub fn check(format: LogFormat, path: &Path, overrides: &Overrides, offline: bool) -> ExitCode {
    let env = |name: &str| std::env::var(name).ok();
    let (mut lines, group) = ops::check_config(path, overrides, &env);
    let group = match group {
        Some(group) if !offline => group,
        _ => return report(&lines, group.is_none()),
    };
    logging::init_quiet(format);
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
fn one_shot<F, Fut>(format: LogFormat, path: &Path, overrides: &Overrides, command: F) -> ExitCode
where
    F: FnOnce(Group, AzureStore) -> Fut,
    Fut: Future<Output = ExitCode>,
{
    let env = |name: &str| std::env::var(name).ok();
    let group = match Config::load(path, overrides)
        .and_then(|c| c.validate_group(&env).map_err(|e| e.in_file(path)))
    {
        Ok(g) => g,
        Err(e) => return fail(EXIT_CONFIG, &e),
    };
    logging::init_quiet(format);
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

/// One line on stderr, and the exit code.
pub fn fail(code: u8, error: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("leasehold: error: {error}");
    ExitCode::from(code)
}

/// A config that `check` could not load, as `run` would refuse it.
pub(crate) fn config_line(e: &ConfigError) -> CheckLine {
    CheckLine::fail("config", e.to_string(), "fix the config file")
}
