//! Where the programs under test are, and building them from inside a test or an example.
//!
//! The kit does not link the leasehold library: it runs the binary, found where cargo puts it
//! (`target/<profile>/leasehold`, which `cargo test` builds before any integration test runs),
//! or wherever `LEASEHOLD_BIN` says. The witness child is the leasehold package's example
//! `witness` (a thin `main` over [`crate::witness`]), so that `cargo test`, which builds the
//! examples, builds it too.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

/// The repository: the folder above this crate's own.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the test kit lives in a folder of the repository")
        .to_owned()
}

/// `target/<profile>` of the running program: tests run from `target/<profile>/deps`, examples
/// from `target/<profile>/examples`.
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("a program cargo built runs from target/<profile>/<kind>/")
        .to_owned()
}

/// Whether the running program was built with `--release`.
pub fn release_profile() -> bool {
    profile_dir().ends_with("release")
}

/// A `cargo` command for a nested build, run in the repository. `cargo run` and `cargo test` set
/// variables such as `CARGO_MANIFEST_DIR` for the program they run; some build scripts (ring's)
/// track them, so a nested cargo that inherits them rebuilds half the dependency tree, and so
/// does the next outer one. They are removed here.
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
    command.current_dir(workspace_root());
    command
}

/// Builds the `leasehold` binary in `release` or debug profile (unless `LEASEHOLD_BIN` names
/// one), quietly, and returns the daemon to run: what the demo, the chaos command and the
/// benchmark start with.
pub fn build_leasehold(release: bool) -> PathBuf {
    if let Some(bin) = std::env::var_os("LEASEHOLD_BIN") {
        return PathBuf::from(bin);
    }
    let mut build = cargo_command();
    build.args(["build", "--quiet", "--bin", "leasehold"]);
    if release {
        build.arg("--release");
    }
    let status = build.status().expect("run cargo");
    assert!(status.success(), "cargo build --bin leasehold failed");
    profile_dir()
        .parent()
        .expect("target dir")
        .join(if release { "release" } else { "debug" })
        .join("leasehold")
}

/// Set by [`use_leasehold_bin`].
static CHOSEN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Makes `path` the daemon every later [`leasehold_bin`] names (the benchmark measures the
/// release binary whatever profile it was built with itself).
pub fn use_leasehold_bin(path: PathBuf) {
    CHOSEN
        .set(path)
        .expect("the daemon under test is chosen once");
}

/// The daemon under test: the one chosen with [`use_leasehold_bin`], else `LEASEHOLD_BIN`, else
/// `target/<profile>/leasehold`.
pub fn leasehold_bin() -> PathBuf {
    if let Some(chosen) = CHOSEN.get() {
        return chosen.clone();
    }
    std::env::var_os("LEASEHOLD_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| profile_dir().join("leasehold"))
}

/// The witness child ([`crate::witness`]), built in this program's profile.
pub fn witness_bin() -> PathBuf {
    example_bin("witness")
}

/// `target/<profile>/examples/<name>`. `cargo test` builds the examples with the tests; when
/// only one test target was built (`cargo test --test run`), or this runs from an example, and
/// the example is missing or older than its source or the kit's, it is built here.
pub fn example_bin(name: &str) -> PathBuf {
    let profile_dir = profile_dir();
    let bin = profile_dir.join("examples").join(name);
    let root = workspace_root();
    let sources = [
        root.join("examples").join(format!("{name}.rs")),
        root.join("examples").join(name),
        root.join("testkit/src"),
    ];
    let built = modified(&bin);
    let stale = || sources.iter().filter_map(|s| newest(s)).max() > modified(&bin);
    if built.is_some() && !stale() {
        return bin;
    }
    let lock = fs::File::create(profile_dir.join("example-build.lock")).expect("build lock");
    lock.lock().expect("lock");
    if modified(&bin).is_none() || stale() {
        let mut build = cargo_command();
        build.args(["build", "--quiet", "--example", name]);
        if release_profile() {
            build.arg("--release");
        }
        let status = build.status().expect("cargo build --example");
        assert!(status.success(), "cannot build example {name}");
    }
    bin
}

fn modified(path: &Path) -> Option<SystemTime> {
    fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// The latest modification of `path`, or of any file below it.
fn newest(path: &Path) -> Option<SystemTime> {
    let own = modified(path);
    let Ok(entries) = fs::read_dir(path) else {
        return own;
    };
    entries
        .flatten()
        .filter_map(|e| newest(&e.path()))
        .chain(own)
        .max()
}
