//! `[kubernetes]`: the label a daemon keeps on its own pod, `"true"` while it leads and
//! `"false"` otherwise, so that a Service selecting it sends traffic to the leader alone (the
//! convention of Patroni and Stolon), while readiness stays "this daemon is healthy" and
//! rollouts complete. Keeping the label is the `kubernetes` feature's ([`crate::kubernetes`]);
//! the rules of the section are checked in every build, so that a build without the feature
//! refuses the section in one line instead of ignoring it.

use super::ConfigError;
use serde::Deserialize;

/// `[kubernetes]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubernetesConfig {
    /// The label key: a Kubernetes qualified name (`leasehold.dev/leader`).
    pub leader_label: String,
    /// The pod to label (default: `POD_NAME`, else the hostname, which is the pod's name
    /// unless the pod sets another).
    pub pod: Option<String>,
    /// Its namespace (default: `POD_NAMESPACE`, else the client's: in a pod, its service
    /// account's namespace).
    pub namespace: Option<String>,
}

/// The label to keep, and on which pod: `[kubernetes]` checked, with the pod found.
#[cfg_attr(not(feature = "daemon"), allow(dead_code))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodLabel {
    /// The label key.
    pub key: String,
    /// The pod's name.
    pub pod: String,
    /// Its namespace, or the client's default.
    pub namespace: Option<String>,
}

#[cfg_attr(not(feature = "daemon"), allow(dead_code))]
impl KubernetesConfig {
    /// Checks the section; the pod and namespace left out come from `POD_NAME` (else
    /// `hostname`) and `POD_NAMESPACE`, read through `env`.
    pub(crate) fn validate(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
        hostname: impl FnOnce() -> String,
    ) -> Result<PodLabel, ConfigError> {
        if let Some(rule) = qualified_name_problem(&self.leader_label) {
            return Err(ConfigError::invalid(
                "[kubernetes].leader_label",
                format!("{:?}", self.leader_label),
                format!("{rule}; e.g. \"leasehold.dev/leader\""),
            ));
        }
        let (pod, key) = match (&self.pod, env("POD_NAME")) {
            (Some(pod), _) => (pod.clone(), "[kubernetes].pod"),
            (None, Some(pod)) => (pod, "POD_NAME"),
            (None, None) => (hostname(), "[kubernetes].pod (the hostname)"),
        };
        if let Some(rule) = subdomain_problem(&pod) {
            return Err(ConfigError::invalid(
                key,
                format!("{pod:?}"),
                format!("{rule}: a pod's name"),
            ));
        }
        let namespace = match (&self.namespace, env("POD_NAMESPACE")) {
            (Some(ns), _) => Some((ns.clone(), "[kubernetes].namespace")),
            (None, Some(ns)) => Some((ns, "POD_NAMESPACE")),
            (None, None) => None,
        };
        if let Some((ns, key)) = &namespace
            && let Some(rule) = label_problem(ns, 63)
        {
            return Err(ConfigError::invalid(
                key,
                format!("{ns:?}"),
                format!("{rule}: a namespace's name"),
            ));
        }
        Ok(PodLabel {
            key: self.leader_label.clone(),
            pod,
            namespace: namespace.map(|(ns, _)| ns),
        })
    }
}

/// A label key as the API server checks it: an optional DNS subdomain prefix and `/`, then a
/// name of at most 63 characters, alphanumeric at both ends, `-`, `_` and `.` inside.
fn qualified_name_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix
        && let Some(problem) = subdomain_problem(prefix)
    {
        return Some(format!("its prefix {problem}"));
    }
    let ok = (1..=63).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    (!ok).then(|| {
        "must be a label key: an optional DNS prefix and '/', then 1-63 letters, digits, '-', \
         '_' or '.', starting and ending with a letter or digit"
            .to_owned()
    })
}

/// A DNS subdomain (RFC 1123): at most 253 characters, lowercase labels joined by dots.
fn subdomain_problem(name: &str) -> Option<String> {
    if name.is_empty() || name.len() > 253 {
        return Some("must be 1-253 characters".to_owned());
    }
    name.split('.')
        .find_map(|label| label_problem(label, 63))
        .map(|_| {
            "must be lowercase letters, digits, '-' and '.', each part starting and ending \
             with a letter or digit"
                .to_owned()
        })
}

/// A DNS label (RFC 1123): 1 to `max` lowercase letters, digits and '-', alphanumeric at both
/// ends.
fn label_problem(label: &str, max: usize) -> Option<String> {
    let ok = (1..=max).contains(&label.len())
        && label.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && label.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && label
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    (!ok).then(|| {
        format!(
            "must be 1-{max} lowercase letters, digits or '-', starting and ending with a letter \
             or digit"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(label: &str, pod: Option<&str>, ns: Option<&str>) -> KubernetesConfig {
        KubernetesConfig {
            leader_label: label.to_owned(),
            pod: pod.map(str::to_owned),
            namespace: ns.map(str::to_owned),
        }
    }

    #[test]
    fn the_pod_comes_from_the_section_pod_name_or_the_hostname() {
        let env = |name: &str| match name {
            "POD_NAME" => Some("my-app-5d8f7c9b4-x2x9k".to_owned()),
            "POD_NAMESPACE" => Some("shop".to_owned()),
            _ => None,
        };
        let none = |_: &str| None;
        let host = || "host-1".to_owned();
        let l = section("leasehold.dev/leader", None, None)
            .validate(&env, host)
            .unwrap();
        assert_eq!(l.pod, "my-app-5d8f7c9b4-x2x9k");
        assert_eq!(l.namespace.as_deref(), Some("shop"));
        let l = section("leader", Some("p"), Some("n"))
            .validate(&env, host)
            .unwrap();
        assert_eq!((l.pod.as_str(), l.namespace.as_deref()), ("p", Some("n")));
        let l = section("leader", None, None).validate(&none, host).unwrap();
        assert_eq!((l.pod.as_str(), l.namespace), ("host-1", None));
    }

    #[test]
    fn keys_and_names_are_checked_as_the_api_server_checks_them() {
        let none = |_: &str| None;
        let host = || "h".to_owned();
        for good in ["leader", "leasehold.dev/leader", "a.b-c/x_y.z", "L1"] {
            assert!(qualified_name_problem(good).is_none(), "{good}");
        }
        for bad in [
            "",
            "-x",
            "x-",
            "a/b/c",
            "Upper.Case/x",
            "/x",
            &"x".repeat(64),
        ] {
            assert!(qualified_name_problem(bad).is_some(), "{bad}");
            let err = section(bad, None, None)
                .validate(&none, host)
                .unwrap_err()
                .to_string();
            assert!(err.contains("[kubernetes].leader_label"), "{err}");
        }
        let env = |name: &str| (name == "POD_NAME").then(|| "Not_A_Pod".to_owned());
        let err = section("leader", None, None)
            .validate(&env, host)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("POD_NAME = \"Not_A_Pod\""), "{err}");
    }
}
