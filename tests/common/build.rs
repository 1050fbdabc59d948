//! Building from inside a test or an example. Shared with `examples/` through `#[path]`.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

pub fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A `cargo` command for a nested build. `cargo run` and `cargo test` set variables such as
/// `CARGO_MANIFEST_DIR` for the program they run; some build scripts (ring's) track them, so a
/// nested cargo that inherits them rebuilds half the dependency tree, and so does the next outer
/// one. They are removed here.
pub fn cargo_command() -> Command {
    let mut command = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        let set_for_target = [
            "CARGO_PKG_",
            "CARGO_MANIFEST_",
            "CARGO_CRATE_",
            "CARGO_BIN_",
            "CARGO_TARGET_TMPDIR",
            "CARGO_PRIMARY_PACKAGE",
        ]
        .iter()
        .any(|prefix| name.starts_with(prefix))
            || name == "OUT_DIR";
        if set_for_target {
            command.env_remove(name.as_ref());
        }
    }
    command.current_dir(manifest_dir());
    command
}
