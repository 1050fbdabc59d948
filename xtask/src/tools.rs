//! The Python venv the commands run their tools from (`target/xtask-venv`): made with
//! `python3 -m venv` and the pins of `xtask/requirements.txt` installed by pip, once, and again
//! when that file changes.

use crate::{Result, root};
use std::path::PathBuf;
use xshell::{Shell, cmd};

/// The venv, made or refreshed as needed.
pub fn venv(sh: &Shell) -> Result<PathBuf> {
    let root = root();
    let venv = root.join("target/xtask-venv");
    let wanted = std::fs::read_to_string(root.join("xtask/requirements.txt"))?;
    let stamp = venv.join("installed-requirements.txt");
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str()) {
        return Ok(venv);
    }
    if !venv.join("bin/pip").exists() {
        cmd!(sh, "python3 -m venv {venv}").run().map_err(|e| {
            format!(
                "{e}; python3 with its venv module is needed (Debian: apt-get install \
                 python3-venv)"
            )
        })?;
    }
    let pip = venv.join("bin/pip");
    let requirements = root.join("xtask/requirements.txt");
    cmd!(
        sh,
        "{pip} install --quiet --disable-pip-version-check -r {requirements}"
    )
    .run()?;
    std::fs::write(&stamp, wanted)?;
    Ok(venv)
}
