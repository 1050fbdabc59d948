//! The command's exit codes (docs/configuration.md, "Exit codes") and its one line on stderr.

use std::process::ExitCode;

/// Exit codes (docs/configuration.md, "Exit codes"). 1 is for `status`, `check` and `break`
/// failures other than refused credentials.
pub(super) const EXIT_FAILED: u8 = 1;
/// Bad configuration or usage.
pub(super) const EXIT_CONFIG: u8 = 2;
pub(super) const EXIT_DENIED: u8 = 3;
/// A one-shot run whose term ended before its command did (the lease lost or not renewed in
/// time, the command unhealthy): the command was stopped.
pub(super) const EXIT_CUT_SHORT: u8 = 4;
/// A one-shot run that could not reach storage, or whose last acquire failed: the command did
/// not run (sysexits' EX_UNAVAILABLE).
pub(super) const EXIT_UNAVAILABLE: u8 = 69;
/// A one-shot run that was not elected: another instance held the lease (`--try`), or held it
/// for all of `--timeout`; the command did not run. sysexits' EX_TEMPFAIL, "try again later":
/// unlike flock's 1, it does not collide with the commonest failure of commands.
pub(super) const EXIT_NOT_ACQUIRED: u8 = 75;
/// One line on stderr, and the exit code.
pub(super) fn fail(code: u8, error: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("leasehold: error: {error}");
    ExitCode::from(code)
}
