//! `leasehold run` to its exit code: the settings checked, the logging, the open-file limit
//! and the runtime set up, then the daemon or the one-shot (`crate::daemon`).

use super::exit::{EXIT_CONFIG, EXIT_CUT_SHORT, EXIT_DENIED, EXIT_UNAVAILABLE, fail};
use super::given::{Invocation, RunOptions};
use crate::config::{self, Config, OnExit};
use crate::daemon::{self, Candidacy, DaemonError, Exit};
use crate::elector::Error as ElectorError;
use crate::logging;
use crate::store::AzureStore;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

/// `leasehold run`: compete for the lease and run the child while leading, until SIGTERM or
/// SIGINT (or, with `on_exit = "exit"`, the child's exit); a one-shot ([`RunOptions`]) runs it
/// once at most.
pub(super) fn run(given: &Invocation, options: &RunOptions) -> ExitCode {
    let path = given.path();
    let env = |name: &str| std::env::var(name).ok();
    let candidacy = match candidacy(options, path) {
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
        &config.origins.named_in_file("[child].command"),
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
        // With replicas, the first's client is the group's store, the others' its replicas.
        let mut stores = AzureStore::for_replicas(&settings.group.replicas)
            .map_err(|(n, e)| DaemonError::Setup(format!("[storage.replica {n}]: {e}")))?
            .into_iter()
            .map(Arc::new);
        let store = match stores.next() {
            Some(first) => first,
            None => Arc::new(
                AzureStore::new(&settings.group.storage)
                    .map_err(|e| DaemonError::Setup(e.to_string()))?,
            ),
        };
        let replicas = stores.collect();
        daemon::run(&settings, store, replicas, controls, candidacy).await
    });
    // The child is gone and the lease released: nothing left is worth waiting for (a blocking
    // task stuck on, say, a DNS lookup would hold up an ordinary drop of the runtime).
    runtime.shutdown_background();
    // The log's last lines first (bounded: a stalled log consumer does not keep the daemon from
    // exiting), then the run's own error line, in the one format of every command.
    if let Ok(Exit::NotElected(None)) = result {
        tracing::info!("not elected: another instance holds the lease; the command did not run");
    }
    log.finish();
    match result {
        Ok(Exit::Clean) => ExitCode::SUCCESS,
        Ok(Exit::Child(code)) => ExitCode::from(code.clamp(0, 255) as u8),
        Ok(Exit::Stopped(signal)) => ExitCode::from(128 + signal as u8),
        Ok(Exit::NotElected(None)) => ExitCode::from(options.conflict_exit_code),
        Ok(Exit::NotElected(Some(why))) => {
            fail(EXIT_UNAVAILABLE, &format!("{why}; the command did not run"))
        }
        Ok(Exit::CutShort(why)) => fail(
            EXIT_CUT_SHORT,
            &format!("{why}: the command was stopped before it ended"),
        ),
        Err(DaemonError::Listen { addr, source }) => fail(
            EXIT_CONFIG,
            &format!(
                "cannot listen on {} = {addr}: {source}; {}",
                config.origins.named_in_file("[http].listen"),
                listen_hint(&source)
            ),
        ),
        Err(e @ DaemonError::Elector(ElectorError::Denied(_))) => fail(EXIT_DENIED, &e),
        Err(e) => fail(EXIT_CONFIG, &e),
    }
}

/// What to do about an address that cannot be bound.
fn listen_hint(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::AddrInUse => {
            "another program (or another leasehold) listens there: pick another port, or stop it"
        }
        std::io::ErrorKind::AddrNotAvailable => {
            "that address is not one of this host's: use 0.0.0.0 (every interface) or one of \
             its own addresses"
        }
        std::io::ErrorKind::PermissionDenied => {
            "ports below 1024 need privileges: pick a port above 1023"
        }
        _ => "check the address and port",
    }
}

/// A one-shot (one term, the command once, then exit) with `--try` or `--timeout`, and
/// without a config file unless `--on-exit release` or `restart` asks for a long-running
/// sidecar; a daemon (term after term) otherwise. Refuses `--on-exit release|restart` with
/// `--try` or `--timeout`.
fn candidacy(options: &RunOptions, file: Option<&Path>) -> Result<Candidacy, String> {
    let once = matches!(options.on_exit, None | Some(OnExit::Exit));
    match (options.patience, file) {
        (Some(_), _) if !once => Err(format!(
            "--on-exit {}: --try and --timeout run the command once (as on_exit = \
             \"exit\"); leave --on-exit out",
            options.on_exit.map_or("", OnExit::as_str)
        )),
        (Some(patience), _) => Ok(Candidacy::OneTerm {
            patience: Some(patience),
        }),
        (None, None) if once => Ok(Candidacy::OneTerm { patience: None }),
        _ => Ok(Candidacy::Standing),
    }
}
