//! `[election]` (design section 10): this instance's place in the line of members, and where its
//! peers can wake it. Optional: the defaults give ordered succession.

use super::ConfigError;
use serde::Deserialize;

/// `[election]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ElectionConfig {
    /// Higher leads first; equal priorities go by seniority (who joined first).
    #[serde(default)]
    pub priority: i64,
    /// `http://host:port` where peers reach this instance's `[http]` listener, for `POST /wake`.
    pub advertise: Option<String>,
}

/// `[election]`, checked: what this instance publishes in its member record.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Election {
    /// Higher leads first.
    pub priority: i64,
    /// The base URL peers send `POST <advertise>/wake` to (no trailing '/').
    pub advertise: Option<String>,
}

impl ElectionConfig {
    /// Checks `advertise`; `warnings` gets a line when it names a loopback address while the
    /// lease lives elsewhere (peers on other hosts could not reach it).
    pub(crate) fn validate(
        &self,
        storage_endpoint: &str,
        warnings: &mut Vec<String>,
    ) -> Result<Election, ConfigError> {
        let advertise = match &self.advertise {
            Some(url) => {
                let checked = check_advertise(url)?;
                if host_is_loopback(&checked) && !endpoint_is_loopback(storage_endpoint) {
                    warnings.push(format!(
                        "[election].advertise = {url:?} names a loopback address, which peers on \
                         other hosts cannot reach: their wake-ups will fail and handovers to this \
                         instance wait for its next poll; advertise an address they can reach"
                    ));
                }
                Some(checked)
            }
            None => None,
        };
        Ok(Election {
            priority: self.priority,
            advertise,
        })
    }
}

/// An `http://` or `https://` URL with a host, no credentials, no query and no fragment;
/// returned without a trailing '/'.
fn check_advertise(url: &str) -> Result<String, ConfigError> {
    let invalid =
        |rule: &str| ConfigError::invalid("[election].advertise", format!("{url:?}"), rule);
    let parsed = reqwest::Url::parse(url).map_err(|e| {
        invalid(&format!(
            "not a URL ({e}); give where peers reach this instance's [http] listener, e.g. \
             \"http://10.0.0.5:9464\""
        ))
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(invalid("must be an http:// or https:// URL"));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(invalid("has no host"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        // Never echo credentials back.
        return Err(ConfigError::invalid(
            "[election].advertise",
            "(a URL with credentials)",
            "must not carry a user name or password: it is published to every member, and a \
             wake-up needs no authority",
        ));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(invalid("must not have a query or a fragment"));
    }
    Ok(parsed.as_str().trim_end_matches('/').to_owned())
}

fn host_is_loopback(url: &str) -> bool {
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return false;
    };
    let host = parsed.host_str().unwrap_or("");
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn endpoint_is_loopback(endpoint: &str) -> bool {
    host_is_loopback(endpoint)
}

#[cfg(all(test, feature = "daemon"))]
mod tests {
    use super::super::testing::{GOOD, load, refused};

    fn with(lines: &str) -> String {
        format!("{GOOD}[election]\n{lines}\n")
    }

    #[test]
    fn defaults_and_values() {
        let s = load(GOOD).unwrap();
        assert_eq!(s.group.election.priority, 0);
        assert_eq!(s.group.election.advertise, None);
        let s = load(&with(
            "priority = -5\nadvertise = \"http://10.0.0.5:9464/\"",
        ))
        .unwrap();
        assert_eq!(s.group.election.priority, -5);
        assert_eq!(
            s.group.election.advertise.as_deref(),
            Some("http://10.0.0.5:9464")
        );
        // Loopback with storage on loopback (Azurite): no warning.
        let s = load(&with("advertise = \"http://127.0.0.1:9464\"")).unwrap();
        assert!(s.group.warnings.is_empty(), "{:?}", s.group.warnings);
    }

    #[test]
    fn bad_advertise_urls_are_refused_in_one_line() {
        let cases: &[(&str, &str)] = &[
            ("advertise = \"10.0.0.5:9464\"", "not a URL"),
            ("advertise = \"ftp://h:1\"", "http:// or https://"),
            ("advertise = \"http://\"", "[election].advertise"),
            ("advertise = \"http://h:1/?x=1\"", "query"),
            (
                "advertise = \"http://me:secret@h:1\"",
                "user name or password",
            ),
            ("priority = \"high\"", "[election].priority"),
            ("preempt = true", "unknown key"),
        ];
        for (lines, needle) in cases {
            let err = refused(&with(lines));
            assert!(err.contains(needle), "{lines}: {err}");
            assert!(!err.contains("secret"), "{err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }
}
