//! The repository's own commands, the rust-analyzer way (`cargo xtask`, an alias in
//! `.cargo/config.toml`):
//!
//! - `cargo xtask dist [--target TRIPLE]...`: the release archives,
//!   `target/dist/leasehold-<version>-<target>.tar.gz` and its `.sha256`, each holding the
//!   binary, the README, the licences, the changelog, the man pages and the shell completions;
//!   then checks each one (see [`dist`]). The default target is `x86_64-unknown-linux-gnu`;
//!   the release workflow (`.github/workflows/release.yml`) passes the four it publishes.
//! - `cargo xtask lint-workflows`: actionlint's checks on `.github/workflows/`.
//!
//! Both run their tools from a Python venv of their own (`target/xtask-venv`, the pins of
//! `xtask/requirements.txt`), which they make the first time: `ziglang` and `cargo-zigbuild`
//! link against glibc 2.17 with the Rust toolchain already installed, and `jactionlint` is
//! actionlint.

mod archive;
mod tools;

use std::error::Error;
use std::path::{Path, PathBuf};
use xshell::{Shell, cmd};

type Result<T = ()> = std::result::Result<T, Box<dyn Error>>;

/// The target the archive is built for when none is named: the one `.ci/run` checks.
const DEFAULT_TARGET: &str = "x86_64-unknown-linux-gnu";

/// The oldest glibc the gnu archives run on: CentOS/RHEL 7 (2014) and everything since. The
/// binary is linked against this version's symbols (cargo-zigbuild's `<target>.2.17`).
const GLIBC_FLOOR: (u32, u32) = (2, 17);

/// The features of the published binary: the archive's and the container image's are one.
const FEATURES: &str = "kubernetes";

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(args: &[String]) -> Result {
    let sh = Shell::new()?;
    sh.change_dir(root());
    match args.first().map(String::as_str) {
        Some("dist") => {
            let mut targets = Vec::new();
            let mut rest = args[1..].iter();
            while let Some(arg) = rest.next() {
                match (arg.as_str(), rest.next()) {
                    ("--target", Some(target)) => targets.push(target.clone()),
                    _ => return Err(format!("dist: unexpected {arg:?}; {USAGE}").into()),
                }
            }
            if targets.is_empty() {
                targets.push(DEFAULT_TARGET.to_owned());
            }
            dist(&sh, &targets)
        }
        Some("lint-workflows") if args.len() == 1 => {
            let venv = tools::venv(&sh)?;
            let lint = venv.join("bin/jactionlint");
            // `correctness`: actionlint's own checks (the fork's policy rules left out).
            cmd!(sh, "{lint} --profile correctness --no-color").run()?;
            Ok(())
        }
        _ => Err(USAGE.into()),
    }
}

const USAGE: &str = "usage: cargo xtask dist [--target TRIPLE]... | cargo xtask lint-workflows";

/// The repository: the folder above this crate's.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask/ is a folder of the repository")
        .to_owned()
}

/// Builds, packs and checks an archive per target. The man pages and completions come from a
/// binary that runs here (they are the same for every target); each archive's binary is
/// checked: no glibc symbol newer than [`GLIBC_FLOOR`] (or no dynamic section at all), and,
/// when it runs here, `--version` says this version.
fn dist(sh: &Shell, targets: &[String]) -> Result {
    let version = version(sh)?;
    let venv = tools::venv(sh)?;
    let path = format!(
        "{}:{}",
        venv.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let _path = sh.push_env("PATH", path);
    let host = host_arch();
    // A target whose binary runs here, built first: it writes the pages.
    let mut order: Vec<String> = targets.to_vec();
    if !order.iter().any(|t| t.starts_with(host)) {
        order.insert(0, format!("{host}-unknown-linux-gnu"));
    }
    order.sort_by_key(|t| !t.starts_with(host));
    let out = root().join("target/dist");
    sh.create_dir(&out)?;
    let mut pages = None;
    for target in &order {
        let binary = build(sh, target)?;
        if pages.is_none() {
            pages = Some(archive::pages(sh, &binary)?);
        }
        if !targets.contains(target) {
            continue;
        }
        let name = format!("leasehold-{version}-{target}");
        let pages = pages.as_ref().expect("pages come from the first binary");
        let (tarball, sha) = archive::pack(&root(), &out, &name, &binary, pages)?;
        let glibc = archive::check(sh, &tarball, &name, &version, target.starts_with(host))?;
        let size = std::fs::metadata(&tarball)?.len();
        println!(
            "xtask: {} ({:.1} MiB, sha256 {}), {glibc}",
            tarball.display(),
            size as f64 / (1024.0 * 1024.0),
            &sha[..16],
        );
    }
    Ok(())
}

/// `cargo zigbuild` of the published binary for `target` (gnu targets against glibc 2.17);
/// returns where it is.
fn build(sh: &Shell, target: &str) -> Result<PathBuf> {
    let zig_target = if target.ends_with("-gnu") {
        format!("{target}.{}.{}", GLIBC_FLOOR.0, GLIBC_FLOOR.1)
    } else {
        target.to_owned()
    };
    cmd!(
        sh,
        "cargo zigbuild --release --locked --package leasehold --bin leasehold --features {FEATURES} --target {zig_target}"
    )
    .run()?;
    Ok(root().join("target").join(target).join("release/leasehold"))
}

/// The leasehold package's version, as cargo reads it.
fn version(sh: &Shell) -> Result<String> {
    let id = cmd!(sh, "cargo pkgid --package leasehold").read()?;
    let (_, version) = id
        .rsplit_once(['@', '#'])
        .ok_or_else(|| format!("cannot read the version in {id:?}"))?;
    Ok(version.to_owned())
}

/// The first word of this machine's target triples.
fn host_arch() -> &'static str {
    std::env::consts::ARCH
}
