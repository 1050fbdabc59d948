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
    let mut roff = Vec::new();
    match clap_mangen::Man::new(page).render(&mut roff) {
        Ok(()) => print(&roff),
        Err(e) => fail(1, &format!("cannot render the man page: {e}")),
    }
}

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
