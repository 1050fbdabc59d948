//! The pages generated from the command line's definitions, so that they cannot drift from the
//! binary: `leasehold man` (roff) and `leasehold completions` (a shell's script).

use super::exit::{EXIT_CONFIG, fail};
use std::process::ExitCode;

/// `leasehold man [SUBCOMMAND]`: leasehold(1), or leasehold-SUBCOMMAND(1), of `command`
/// (the command line's definitions).
pub(super) fn man(mut command: clap::Command, subcommand: Option<&str>) -> ExitCode {
    command.build();
    let page = match subcommand {
        None => command,
        Some(name) => {
            let found = command
                .get_subcommands()
                .find(|c| c.get_name() == name && !c.is_hide_set());
            match found {
                Some(sub) => sub.clone(),
                None => {
                    let names: Vec<&str> = command
                        .get_subcommands()
                        .filter(|c| !c.is_hide_set())
                        .map(|c| c.get_name())
                        .collect();
                    return fail(
                        EXIT_CONFIG,
                        &format!(
                            "leasehold man {name}: no such subcommand; one of {}",
                            names.join(", ")
                        ),
                    );
                }
            }
        }
    };
    match render(page, subcommand.is_none()) {
        Ok(roff) => print(&roff),
        Err(e) => fail(1, &format!("cannot render the man page: {e}")),
    }
}

/// A page as clap_mangen renders it, section by section, with the sections a man page has that
/// clap's definitions do not: FILES, ENVIRONMENT, EXIT STATUS. leasehold(1)'s own `after_help`
/// (the exit codes) becomes EXIT STATUS rather than clap_mangen's EXTRA.
fn render(page: clap::Command, root: bool) -> std::io::Result<Vec<u8>> {
    use clap_mangen::roff::{Roff, bold, roman};
    let has_args = page.get_arguments().any(|a| !a.is_hide_set());
    let has_subcommands = page.get_subcommands().any(|c| !c.is_hide_set());
    let extra = !root && page.get_after_help().is_some();
    let man = clap_mangen::Man::new(page);
    let mut out = Vec::new();
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    if has_args {
        man.render_options_section(&mut out)?;
    }
    if has_subcommands {
        man.render_subcommands_section(&mut out)?;
    }
    if extra {
        man.render_extra_section(&mut out)?;
    }
    let mut roff = Roff::new();
    for (title, entries) in [
        ("FILES", FILES.as_slice()),
        ("ENVIRONMENT", ENVIRONMENT.as_slice()),
        ("EXIT STATUS", EXIT_STATUS.as_slice()),
    ] {
        roff.control("SH", [title]);
        for (name, text) in entries {
            roff.control("TP", []);
            roff.text([bold(*name)]);
            roff.text([roman(*text)]);
        }
    }
    roff.to_writer(&mut out)?;
    man.render_version_section(&mut out)?;
    Ok(out)
}

/// The FILES section.
const FILES: [(&str, &str); 3] = [
    (
        "leasehold.toml",
        "The config file, given with -c/--config or LEASEHOLD_CONFIG; there is no default \
         location (the systemd unit uses /etc/leasehold/leasehold.toml). Without one, every \
         setting has its default and the flags give the rest.",
    ),
    (
        "[storage].*_file",
        "Files holding the connection string, account key or SAS token \
         (connection_string_file, access_key_file, sas_token_file, or the flags of those \
         names); leasehold warns when others can read them. Keep them mode 0600.",
    ),
    (
        "[storage].ca_file",
        "PEM certificates trusted beside the built-in roots, for storage behind a private CA.",
    ),
];

/// The ENVIRONMENT section: what leasehold reads, and what it gives the child.
const ENVIRONMENT: [(&str, &str); 8] = [
    ("LEASEHOLD_CONFIG", "The config file, as -c/--config."),
    (
        "LEASEHOLD_IDENTITY, LEASEHOLD_PRIORITY, LEASEHOLD_ADVERTISE, LEASEHOLD_HTTP_LISTEN",
        "This instance's own settings, replacing the file's identity, [election].priority, \
         [election].advertise and [http].listen (a flag replaces the variable): one file for \
         every instance.",
    ),
    (
        "AZURE_STORAGE_CONNECTION_STRING, AZURE_STORAGE_KEY, AZURE_STORAGE_SAS_TOKEN",
        "The storage credential, when the config and the flags give none (exactly one source \
         may give it). AZURE_STORAGE_ACCOUNT names the account for a key or a SAS token. None \
         of them reaches the child.",
    ),
    (
        "AZURE_CLIENT_ID, AZURE_TENANT_ID, AZURE_FEDERATED_TOKEN_FILE, AZURE_AUTHORITY_HOST",
        "Microsoft Entra ID (--credential): a user-assigned managed identity, AKS workload \
         identity, another authority.",
    ),
    (
        "RUST_LOG",
        "Which log lines to write (default info for the daemon, warn for one-shot runs and \
         the other commands); the storage and HTTP crates stay at warn whatever it says.",
    ),
    ("NO_COLOR", "No colours in the log, even on a terminal."),
    (
        "LEASEHOLD_EPOCH, LEASEHOLD_IDENTITY, LEASEHOLD_CONTAINER, LEASEHOLD_BLOB, \
         LEASEHOLD_SLOT",
        "Set for the child: its fencing token (pass it along with every write it makes), who \
         leads, the lease blob, and with slots the slot held.",
    ),
    (
        "NOTIFY_SOCKET, WATCHDOG_USEC",
        "systemd's Type=notify: leasehold says when it has joined the group, and pings the \
         watchdog while its loop is alive.",
    ),
];

/// The EXIT STATUS section (docs/configuration.md, "Exit codes").
const EXIT_STATUS: [(&str, &str); 9] = [
    (
        "0",
        "A clean shutdown (SIGTERM or SIGINT); status, check or break succeeded.",
    ),
    (
        "1",
        "status, check or break failed (storage unreachable, a missing blob, a check that \
         failed).",
    ),
    (
        "2",
        "Bad configuration or usage: one line on stderr says what to fix.",
    ),
    ("3", "Storage refused the credentials or their permissions."),
    (
        "4",
        "A one-shot run whose leadership ended before its command did: the command was \
         stopped.",
    ),
    (
        "69",
        "A one-shot run that could not reach storage: the command did not run.",
    ),
    (
        "75",
        "A one-shot run that was not elected (--try, --timeout): another instance held the \
         lease and the command did not run; --conflict-exit-code changes it.",
    ),
    (
        "COMMAND's code",
        "A one-shot run, or on_exit = \"exit\": the code of the command that ended.",
    ),
    (
        "128+N",
        "Killed by signal N (the command in a one-shot run, or leasehold itself).",
    ),
];

/// Writes a generated page to stdout. A reader that stopped early (`| head`) is no error.
pub(super) fn print(page: &[u8]) -> ExitCode {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(page).and_then(|()| stdout.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => fail(1, &format!("cannot write to stdout: {e}")),
    }
}
