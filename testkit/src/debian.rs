//! Tools from Debian's packages that some tests and the benchmark run (etcd, promtool,
//! systemd-analyze, kubectl): found as they are, or installed with apt-get when missing and this
//! process runs as root (as CI does); otherwise a one-line refusal saying how to install them.
//! Never a silent skip: a test that needs a tool fails without it.

use std::fs;
use std::process::{Command, Stdio};

/// The first line `program ARGS` prints (stdout, else stderr), if it runs and succeeds.
pub fn version_of(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let text = if out.stdout.is_empty() {
        out.stderr
    } else {
        out.stdout
    };
    String::from_utf8_lossy(&text)
        .lines()
        .next()
        .map(|l| l.trim().to_owned())
}

/// Makes sure what `installed` looks for is there (it returns a version line when it is):
/// as it is, or after `apt-get update && apt-get install -y PACKAGES` when this process is root.
/// Returns the version line, or the one line that says why not and what to do.
pub fn ensure_installed(
    packages: &[&str],
    installed: impl Fn() -> Option<String>,
) -> Result<String, String> {
    if let Some(version) = installed() {
        return Ok(version);
    }
    let hint = format!(
        "install them with `sudo apt-get update && sudo apt-get install -y \
         --no-install-recommends {}`",
        packages.join(" ")
    );
    // /proc/self belongs to the effective user.
    let root = fs::metadata("/proc/self").is_ok_and(|m| {
        use std::os::unix::fs::MetadataExt;
        m.uid() == 0
    });
    if !root {
        return Err(format!(
            "{} not installed, and only root can install them; {hint}",
            packages.join(" and ")
        ));
    }
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null())
            .output()
    };
    eprintln!("installing {} with apt-get (once)...", packages.join(" "));
    let mut install = vec!["install", "-y", "-q", "--no-install-recommends"];
    install.extend(packages);
    for args in [&["update", "-q"][..], &install[..]] {
        match apt(args) {
            Ok(o) if o.status.success() => {}
            Ok(o) => {
                let stderr = String::from_utf8_lossy(&o.stderr);
                let last = stderr.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
                return Err(format!(
                    "`apt-get {}` failed ({}: {last}); {hint}",
                    args.join(" "),
                    o.status
                ));
            }
            Err(e) => return Err(format!("cannot run apt-get ({e}); {hint}")),
        }
    }
    installed().ok_or_else(|| {
        format!(
            "apt-get installed {} but it does not run; {hint}",
            packages.join(" ")
        )
    })
}

/// `promtool` (Debian's `prometheus` package), for the alerting rules: its version line, or
/// why it is not there.
pub fn promtool() -> Result<String, String> {
    ensure_installed(&["prometheus"], || version_of("promtool", &["--version"]))
}
