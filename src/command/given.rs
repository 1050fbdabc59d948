//! What the command line gives a subcommand: the config file, the flags that replace its keys,
//! the log format, and `run`'s own options.

use crate::config::{OnExit, Overrides};
use crate::logging::LogFormat;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What each subcommand that reads the config was given on the command line.
pub(super) struct Invocation {
    /// How to log (`--log-format`).
    pub(super) format: LogFormat,
    /// The config file (`--config`); without one, the defaults and the flags.
    pub(super) path: Option<PathBuf>,
    /// The flags that replace the file's keys.
    pub(super) overrides: Overrides,
}

impl Invocation {
    pub(super) fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
}

/// `leasehold run`'s own flags, beside the config's.
#[derive(Debug, Clone)]
pub(super) struct RunOptions {
    /// `--try` (`Some(ZERO)`: one attempt) or `--timeout DUR`: campaign at most this long, then
    /// exit with `conflict_exit_code`; a term won runs the command once.
    pub(super) patience: Option<Duration>,
    /// `--on-exit`: replaces `[child].on_exit`.
    pub(super) on_exit: Option<OnExit>,
    /// `--conflict-exit-code`: the exit code of a one-shot run that was not elected.
    pub(super) conflict_exit_code: u8,
    /// `--pass-stdin`: the child reads this process's standard input.
    pub(super) pass_stdin: bool,
}
