//! `[election]` (docs/succession.md): this instance's place in the line of members, and where its
//! peers can wake it. Optional: the defaults give ordered succession.

use super::ConfigError;
use crate::fmt::human;
use serde::Deserialize;
use std::time::Duration;

/// `[election]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ElectionConfig {
    /// Higher leads first; equal priorities go by seniority (who joined first).
    #[serde(default)]
    pub priority: i64,
    /// `http://host:port` where peers reach this instance's `[http]` listener, for `POST /wake`;
    /// "auto" (the default with `[http].listen`: the daemon picks the URL of its listener) or
    /// "off".
    pub advertise: Option<String>,
    /// A duration ("30s", the default) or "off" (docs/preferred.md).
    pub preempt_after: Option<String>,
}

/// `[election].preempt_after` when not given.
pub const DEFAULT_PREEMPT_AFTER: Duration = Duration::from_secs(30);

/// The shortest `preempt_after`: a member must outlast at least a couple of the leader's
/// listings and a second of the service's clock resolution (creation times are whole seconds).
pub const MIN_PREEMPT_AFTER: Duration = Duration::from_secs(1);

/// The longest `preempt_after`: longer than this is "off" in practice, and the leader's listing
/// cadence is capped by the rare listing of every member anyway.
pub const MAX_PREEMPT_AFTER: Duration = Duration::from_secs(3600);

/// `[election]`, checked: what this instance publishes in its member record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Election {
    /// Higher leads first.
    pub priority: i64,
    /// The base URL peers send `POST <advertise>/wake` to (no trailing '/').
    pub advertise: Option<String>,
    /// While leading, hand over to a live member of strictly higher priority that has been a
    /// member for this long (`None`: "off", priority only orders succession).
    pub preempt_after: Option<Duration>,
}

impl Default for Election {
    fn default() -> Self {
        Self {
            priority: 0,
            advertise: None,
            preempt_after: Some(DEFAULT_PREEMPT_AFTER),
        }
    }
}

impl ElectionConfig {
    /// Checks `advertise`; `warnings` gets a line when it names a loopback address while the
    /// lease lives elsewhere (peers on other hosts could not reach it). The second value: the
    /// URL is to be picked by the daemon once its listener is bound (`advertise = "auto"`, the
    /// default when `[http].listen` is set).
    pub(crate) fn validate(
        &self,
        storage_endpoint: &str,
        http_listen: Option<std::net::SocketAddr>,
        warnings: &mut Vec<String>,
    ) -> Result<(Election, bool), ConfigError> {
        let word = self.advertise.as_deref().map(str::trim);
        let auto = match word {
            None => http_listen.is_some(),
            Some(w) if w.eq_ignore_ascii_case("auto") => {
                if http_listen.is_none() {
                    return Err(ConfigError::invalid(
                        "[election].advertise",
                        "\"auto\"",
                        "needs [http].listen: the wake-up is served by the HTTP endpoint (set \
                         [http].listen, or advertise = \"off\")",
                    ));
                }
                true
            }
            _ => false,
        };
        let advertise = match &self.advertise {
            _ if auto => None,
            Some(off) if off.trim().eq_ignore_ascii_case("off") => None,
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
        let election = Election {
            priority: self.priority,
            advertise,
            preempt_after: check_preempt_after(self.preempt_after.as_deref())?,
        };
        Ok((election, auto))
    }
}

/// The URL `advertise = "auto"` picks for a listener bound to `listen`: its own address, or,
/// when that is a wildcard (`0.0.0.0`, `[::]`), `toward_storage`: the local address this host
/// uses to reach storage (the address peers in the same network reach it at, a pod's IP in
/// Kubernetes).
#[cfg(feature = "daemon")]
pub fn auto_advertise(
    listen: std::net::SocketAddr,
    toward_storage: impl FnOnce() -> std::io::Result<std::net::IpAddr>,
) -> std::io::Result<String> {
    let ip = match listen.ip() {
        ip if ip.is_unspecified() => toward_storage()?,
        ip => ip,
    };
    Ok(format!(
        "http://{}",
        std::net::SocketAddr::new(ip, listen.port())
    ))
}

/// The local address of a route to `endpoint` (the storage's URL): a UDP socket connected
/// there (which sends nothing) says which address the host would speak from.
#[cfg(feature = "daemon")]
pub fn local_address_toward(endpoint: &str) -> std::io::Result<std::net::IpAddr> {
    use std::net::{ToSocketAddrs, UdpSocket};
    let url = reqwest::Url::parse(endpoint).map_err(std::io::Error::other)?;
    let host = url
        .host_str()
        .ok_or_else(|| std::io::Error::other("the storage endpoint has no host"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = url.port_or_known_default().unwrap_or(443);
    let target = (host, port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other(format!("{host} has no address")))?;
    let socket = match target {
        std::net::SocketAddr::V4(_) => UdpSocket::bind(("0.0.0.0", 0))?,
        std::net::SocketAddr::V6(_) => UdpSocket::bind(("::", 0))?,
    };
    socket.connect(target)?;
    Ok(socket.local_addr()?.ip())
}

/// "off", or a duration between [`MIN_PREEMPT_AFTER`] and [`MAX_PREEMPT_AFTER`].
fn check_preempt_after(value: Option<&str>) -> Result<Option<Duration>, ConfigError> {
    let Some(value) = value else {
        return Ok(Some(DEFAULT_PREEMPT_AFTER));
    };
    if value.trim().eq_ignore_ascii_case("off") {
        return Ok(None);
    }
    let rule = || {
        format!(
            "must be \"off\" or a duration between {} and {} (e.g. \"30s\")",
            human(MIN_PREEMPT_AFTER),
            human(MAX_PREEMPT_AFTER)
        )
    };
    let invalid = || ConfigError::invalid("[election].preempt_after", format!("{value:?}"), rule());
    let d = humantime::parse_duration(value.trim()).map_err(|_| invalid())?;
    if !(MIN_PREEMPT_AFTER..=MAX_PREEMPT_AFTER).contains(&d) {
        return Err(invalid());
    }
    Ok(Some(d))
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
        assert_eq!(
            s.group.election.preempt_after,
            Some(std::time::Duration::from_secs(30))
        );
        let s = load(&with("preempt_after = \"off\"")).unwrap();
        assert_eq!(s.group.election.preempt_after, None);
        let s = load(&with("preempt_after = \"1m 30s\"")).unwrap();
        assert_eq!(
            s.group.election.preempt_after,
            Some(std::time::Duration::from_secs(90))
        );
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

    /// `advertise = "auto"` is the default with `[http].listen`, off without; "auto" without a
    /// listener is refused; "off" turns it off.
    #[test]
    fn advertise_is_auto_with_a_listener_unless_set() {
        let listen = "[http]\nlisten = \"0.0.0.0:9464\"\n";
        let cases = [
            (String::from(GOOD), false, None),
            (format!("{GOOD}{listen}"), true, None),
            (
                format!("{}{listen}", with("advertise = \"AUTO\"")),
                true,
                None,
            ),
            (
                format!("{}{listen}", with("advertise = \"off\"")),
                false,
                None,
            ),
            (
                format!("{}{listen}", with("advertise = \"http://10.0.0.5:9464\"")),
                false,
                Some("http://10.0.0.5:9464"),
            ),
        ];
        for (text, auto, url) in cases {
            let s = load(&text).unwrap();
            assert_eq!(s.group.advertise_auto, auto, "{text}");
            assert_eq!(s.group.election.advertise.as_deref(), url, "{text}");
        }
        let e = refused(&with("advertise = \"auto\""));
        assert!(e.contains("needs [http].listen"), "{e}");
    }

    /// The URL picked: the listener's own address, or the address toward storage for a
    /// wildcard; on loopback (Azurite's endpoint), 127.0.0.1.
    #[test]
    fn auto_picks_the_listeners_address_or_the_one_toward_storage() {
        use super::{auto_advertise, local_address_toward};
        let never = || -> std::io::Result<std::net::IpAddr> { panic!("not asked") };
        assert_eq!(
            auto_advertise("10.1.2.3:9464".parse().unwrap(), never).unwrap(),
            "http://10.1.2.3:9464"
        );
        assert_eq!(
            auto_advertise("[::1]:9464".parse().unwrap(), never).unwrap(),
            "http://[::1]:9464"
        );
        let toward = || local_address_toward("http://127.0.0.1:10000/devstoreaccount1");
        assert_eq!(
            auto_advertise("0.0.0.0:9464".parse().unwrap(), toward).unwrap(),
            "http://127.0.0.1:9464"
        );
        let failed = || Err(std::io::Error::other("no route"));
        assert!(auto_advertise("[::]:9464".parse().unwrap(), failed).is_err());
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
            ("preempt_after = \"500ms\"", "between 1s and 1h"),
            ("preempt_after = \"2h\"", "[election].preempt_after"),
            ("preempt_after = \"never\"", "\"off\" or a duration"),
            ("preempt_after = 30", "[election].preempt_after"),
        ];
        for (lines, needle) in cases {
            let err = refused(&with(lines));
            assert!(err.contains(needle), "{lines}: {err}");
            assert!(!err.contains("secret"), "{err}");
            assert!(!err.contains('\n'), "{err}");
        }
    }
}
