//! A string that must never be shown: account keys, SAS tokens, connection strings.
//!
//! `Debug` prints `Secret(***)` and there is no `Display`, so a secret cannot reach a log line,
//! an error message or `status` output by accident; [`Secret::expose`] marks the few places that
//! hand it to the storage client. The value is kept by the `secrecy` crate, which also wipes it
//! from memory when it is dropped. What stays ours: the name of the type in messages, equality
//! (configs are compared in tests), and reading one from TOML (`secrecy` deserializes only
//! sized values, and a string is not).

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Deserializer};

/// A secret: its `Debug` shows `Secret(***)`, and it has no `Display`.
#[derive(Clone)]
pub struct Secret(SecretString);

impl Secret {
    /// Wraps `value`.
    pub fn new(value: String) -> Self {
        Self(SecretString::from(value))
    }

    /// The value itself, for the storage client only.
    pub fn expose(&self) -> &str {
        self.0.expose_secret()
    }
}

impl PartialEq for Secret {
    fn eq(&self, other: &Self) -> bool {
        self.expose() == other.expose()
    }
}

impl Eq for Secret {}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Secret::new)
    }
}

/// Removes query strings from URLs in `text`: transport errors of the HTTP stack quote the
/// request URL, and with a SAS credential that URL carries the token.
pub fn redact_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('?') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| c.is_whitespace() || c == '"' || c == ')' || c == '\'')
            .unwrap_or(tail.len());
        out.push_str("?<redacted>");
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// [`redact_urls`], and also hides anything shaped like a JWT (`eyJ...`, the form of Entra ID
/// tokens and of Kubernetes service-account tokens), wherever an error message might quote one.
pub fn redact(text: &str) -> String {
    redact_urls(text)
        .split(' ')
        .map(|word| match word.find("eyJ") {
            Some(i) if word[i..].contains('.') => format!("{}<redacted>", &word[..i]),
            _ => word.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_value() {
        assert_eq!(
            format!("{:?}", Secret::new("hunter2".into())),
            "Secret(***)"
        );
    }

    #[test]
    fn urls_lose_their_query() {
        let s = r#"error sending request for url (http://h/c/b?comp=lease&sig=abc): refused"#;
        assert_eq!(
            redact_urls(s),
            "error sending request for url (http://h/c/b?<redacted>): refused"
        );
        assert_eq!(redact_urls("no url"), "no url");
    }

    #[test]
    fn jwts_are_hidden() {
        assert_eq!(
            redact("bad token eyJhbGciOiJub25lIn0.eyJhdWQiOiJ4In0.c2ln here"),
            "bad token <redacted> here"
        );
        assert_eq!(redact("keyJam is fine"), "keyJam is fine");
    }
}
