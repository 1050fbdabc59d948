//! clap's usage errors as one line: what is wrong, clap's own tips, and whose help to see; a
//! value from an environment variable named by the variable.

use super::exit::{EXIT_CONFIG, fail};
use std::process::ExitCode;

/// clap's usage errors, folded into one line: what is wrong, clap's own tips ("a similar
/// argument exists: '--timeout'", "to pass '--x' as a value, use '-- --x'"), and where the help
/// is. The usage paragraph is left out: the help it points to says more.
pub(super) fn usage_error(e: &clap::Error) -> ExitCode {
    let line = env_value_error(e).unwrap_or_else(|| one_line_usage_error(&e.render().to_string()));
    fail(EXIT_CONFIG, &line)
}

/// The flags an environment variable can give, and the variable.
const ENV_FLAGS: [(&str, &str); 4] = [
    ("--identity", "LEASEHOLD_IDENTITY"),
    ("--priority", "LEASEHOLD_PRIORITY"),
    ("--advertise", "LEASEHOLD_ADVERTISE"),
    ("--http-listen", "LEASEHOLD_HTTP_LISTEN"),
];

/// A value clap could not parse that came from an environment variable, not from the flag
/// clap names: the line names the variable, which is what the user has to fix.
fn env_value_error(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return None;
    };
    let flag = arg.split_whitespace().next()?;
    let (_, variable) = ENV_FLAGS.iter().find(|(f, _)| *f == flag)?;
    let typed = std::env::args()
        .skip(1)
        .take_while(|a| a != "--")
        .any(|a| a == flag || a.starts_with(&format!("{flag}=")));
    if typed {
        return None;
    }
    let value = std::env::var(variable).ok()?;
    let rendered = e.render().to_string();
    let (_, reason) = rendered.lines().next()?.split_once("': ")?;
    Some(format!("{variable}={value:?}: {}", reason.trim()))
}

fn one_line_usage_error(rendered: &str) -> String {
    let one_line = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut paragraphs = rendered.split("\n\n");
    let first = one_line(paragraphs.next().unwrap_or(rendered));
    let first = first.strip_prefix("error: ").unwrap_or(&first).to_owned();
    let tips: Vec<String> = paragraphs
        .flat_map(str::lines)
        .map(str::trim)
        .filter_map(|line| line.strip_prefix("tip: "))
        .map(one_line)
        .collect();
    // "Usage: leasehold run [OPTIONS] ..." names the subcommand whose help to see.
    let command: Vec<&str> = rendered
        .lines()
        .find_map(|l| l.trim().strip_prefix("Usage: "))
        .map(|usage| {
            usage
                .split_whitespace()
                .take_while(|w| w.chars().all(|c| c.is_ascii_lowercase()))
                .collect()
        })
        .filter(|words: &Vec<&str>| !words.is_empty())
        .unwrap_or_else(|| vec!["leasehold"]);
    let mut line = first;
    for tip in tips {
        line += &format!("; {tip}");
    }
    format!("{line} (see {} --help)", command.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::args::Cli;
    use clap::Parser;

    /// The line a mistyped flag gets: the error, clap's suggestion, and the subcommand's help.
    #[test]
    fn usage_errors_keep_clap_tips_on_one_line() {
        let parsed = Cli::try_parse_from(["leasehold", "run", "--blob", "b", "--timout", "1s"]);
        let Err(e) = parsed else {
            panic!("--timout is not a flag")
        };
        let line = one_line_usage_error(&e.render().to_string());
        assert_eq!(
            line,
            "unexpected argument '--timout' found; a similar argument exists: '--timeout'; to \
             pass '--timout' as a value, use '-- --timout' (see leasehold run --help)"
        );
    }
}
