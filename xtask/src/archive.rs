//! One release archive: what goes in it (the binary, the README, the licences, the changelog,
//! the man pages, the shell completions), the `.tar.gz` and its `.sha256`, and the checks of
//! what came out.

use crate::{GLIBC_FLOOR, Result};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use xshell::{Shell, cmd};

/// The repository's files every archive carries, at its top.
const DOCUMENTS: [&str; 4] = ["README.md", "LICENSE-MIT", "LICENSE-APACHE", "CHANGELOG.md"];

/// The subcommands with a man page of their own, beside leasehold(1).
const SUBCOMMANDS: [&str; 6] = ["run", "status", "check", "break", "completions", "man"];

/// Each shell `leasehold completions` knows, and the file its script is packed as (the names
/// each shell looks for in its completion folders).
const COMPLETIONS: [(&str, &str); 5] = [
    ("bash", "leasehold.bash"),
    ("zsh", "_leasehold"),
    ("fish", "leasehold.fish"),
    ("elvish", "leasehold.elv"),
    ("powershell", "_leasehold.ps1"),
];

/// The generated pages: a path inside the archive, and the text.
pub type Pages = Vec<(String, String)>;

/// The man pages and completion scripts, as `binary` (one that runs here) writes them.
pub fn pages(sh: &Shell, binary: &Path) -> Result<Pages> {
    let mut pages = vec![(
        "man/leasehold.1".to_owned(),
        cmd!(sh, "{binary} man").read()?,
    )];
    for sub in SUBCOMMANDS {
        let page = cmd!(sh, "{binary} man {sub}").read()?;
        pages.push((format!("man/leasehold-{sub}.1"), page));
    }
    for (shell, file) in COMPLETIONS {
        let script = cmd!(sh, "{binary} completions {shell}").read()?;
        pages.push((format!("completions/{file}"), script));
    }
    Ok(pages)
}

/// Writes `<out>/<name>.tar.gz` (everything under the folder `<name>/`, in a fixed order with
/// fixed times and owners, so that the same inputs give the same bytes) and its `.sha256` in
/// `sha256sum -c`'s format; returns the archive and its digest.
pub fn pack(
    root: &Path,
    out: &Path,
    name: &str,
    binary: &Path,
    pages: &Pages,
) -> Result<(PathBuf, String)> {
    let tarball = out.join(format!("{name}.tar.gz"));
    let file = std::fs::File::create(&tarball)?;
    let gz = flate2::write::GzEncoder::new(file, flate2::Compression::best());
    let mut tar = tar::Builder::new(gz);
    tar.mode(tar::HeaderMode::Deterministic);
    let mut add = |path: &str, bytes: &[u8], mode: u32| -> Result {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(mode);
        header.set_mtime(0);
        header.set_cksum();
        tar.append_data(&mut header, format!("{name}/{path}"), bytes)?;
        Ok(())
    };
    add("leasehold", &std::fs::read(binary)?, 0o755)?;
    for doc in DOCUMENTS {
        add(doc, &std::fs::read(root.join(doc))?, 0o644)?;
    }
    for (path, text) in pages {
        add(path, text.as_bytes(), 0o644)?;
    }
    tar.into_inner()?.finish()?;
    let sha = hex(&Sha256::digest(std::fs::read(&tarball)?));
    std::fs::write(
        out.join(format!("{name}.tar.gz.sha256")),
        format!("{sha}  {name}.tar.gz\n"),
    )?;
    Ok((tarball, sha))
}

/// Unpacks `tarball` into `target/dist/check/` and checks it: every file there, the checksum,
/// the binary's glibc symbols at most [`GLIBC_FLOOR`] (or none: a static binary) by `objdump
/// -T`, and when it `runs_here`, `--version`. Returns what it found of glibc, for the summary.
pub fn check(
    sh: &Shell,
    tarball: &Path,
    name: &str,
    version: &str,
    runs_here: bool,
) -> Result<String> {
    let out = tarball.parent().expect("target/dist");
    let written = std::fs::read_to_string(out.join(format!("{name}.tar.gz.sha256")))?;
    let sha = hex(&Sha256::digest(std::fs::read(tarball)?));
    if written != format!("{sha}  {name}.tar.gz\n") {
        return Err(format!("{name}.tar.gz.sha256 does not match the archive").into());
    }
    let unpacked = out.join("check");
    let _ = std::fs::remove_dir_all(unpacked.join(name));
    let gz = flate2::read::GzDecoder::new(std::fs::File::open(tarball)?);
    tar::Archive::new(gz).unpack(&unpacked)?;
    let folder = unpacked.join(name);
    let mut expected: Vec<String> = DOCUMENTS.iter().map(|d| d.to_string()).collect();
    expected.push("man/leasehold.1".to_owned());
    expected.extend(SUBCOMMANDS.iter().map(|s| format!("man/leasehold-{s}.1")));
    expected.extend(COMPLETIONS.iter().map(|(_, f)| format!("completions/{f}")));
    for file in &expected {
        if !folder.join(file).is_file() {
            return Err(format!("{name}.tar.gz lacks {file}").into());
        }
    }
    let binary = folder.join("leasehold");
    let symbols = cmd!(sh, "objdump -T {binary}").ignore_status().output()?;
    let glibc = if symbols.status.success() {
        let newest = newest_glibc(&String::from_utf8_lossy(&symbols.stdout))
            .ok_or("objdump -T shows no GLIBC_ symbol versions")?;
        if newest > GLIBC_FLOOR {
            return Err(format!(
                "{name}: the binary needs GLIBC_{}.{}, newer than {}.{}",
                newest.0, newest.1, GLIBC_FLOOR.0, GLIBC_FLOOR.1
            )
            .into());
        }
        format!("newest glibc symbol GLIBC_{}.{}", newest.0, newest.1)
    } else if String::from_utf8_lossy(&symbols.stderr).contains("not a dynamic object") {
        "static (no dynamic section)".to_owned()
    } else {
        return Err(format!(
            "objdump -T {}: {}",
            binary.display(),
            String::from_utf8_lossy(&symbols.stderr).trim()
        )
        .into());
    };
    if runs_here {
        let said = cmd!(sh, "{binary} --version").read()?;
        if said.trim() != format!("leasehold {version}") {
            return Err(format!("{name}: --version says {said:?}").into());
        }
    }
    Ok(glibc)
}

/// The newest `GLIBC_x.y` version that `objdump -T` lists.
fn newest_glibc(symbols: &str) -> Option<(u32, u32)> {
    symbols
        .split(|c: char| c.is_whitespace() || c == '(' || c == ')')
        .filter_map(|word| word.strip_prefix("GLIBC_"))
        .filter_map(|v| {
            let mut parts = v.split('.').map(|p| p.parse::<u32>().ok());
            Some((parts.next()??, parts.next().flatten().unwrap_or(0)))
        })
        .max()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_glibc_version_is_read_from_objdump() {
        let symbols = "0000000000000000      DF *UND*\t0000000000000000  GLIBC_2.2.5 memcpy\n\
                       0000000000000000      DF *UND*\t0000000000000000 (GLIBC_2.17) clock_gettime\n\
                       0000000000000000      DF *UND*\t0000000000000000  GLIBC_2.3.4 __memcpy_chk\n";
        assert_eq!(newest_glibc(symbols), Some((2, 17)));
        assert_eq!(newest_glibc("GLIBC_2.34 pthread_create"), Some((2, 34)));
        assert_eq!(newest_glibc("nothing"), None);
    }
}
