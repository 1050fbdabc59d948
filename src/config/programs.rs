//! Finding a program as `exec` would: the child's command, the Azure CLI for Entra ID.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// The first executable file named `program` in the folders of `path` (a PATH value).
pub(crate) fn find_in_path(program: impl AsRef<Path>, path: &OsStr) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|dir| dir.join(program.as_ref()))
        .find(|p| is_executable(p))
}

pub(crate) fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(feature = "daemon")]
/// Finds a program as `exec` would: a path as given (relative to `working_dir`), a bare name in
/// `path` (a PATH value). `shown` is how errors name the command (`[child].command`).
pub(crate) fn find_program(
    shown: &str,
    program: &str,
    working_dir: Option<&Path>,
    path: Option<&OsStr>,
) -> Result<PathBuf, String> {
    let program = Path::new(program);
    let bare = program.components().count() <= 1;
    let found = if bare {
        path.and_then(|path| find_in_path(program, path))
    } else {
        let full = match working_dir {
            Some(dir) if program.is_relative() => dir.join(program),
            _ => program.to_owned(),
        };
        is_executable(&full).then_some(full)
    };
    found.ok_or_else(|| {
        if bare {
            format!(
                "{shown}: program {program:?} is not an executable file in PATH; install it, \
                 fix the name, or give its full path"
            )
        } else {
            let from = match working_dir {
                Some(dir) => format!("{}", dir.display()),
                None => "the current folder".to_owned(),
            };
            format!(
                "{shown}: program {program:?} is not an executable file; fix the path (a \
                 relative one starts from {from}) or make it executable"
            )
        }
    })
}
