//! `[kubernetes]`: the label a daemon keeps on its own pod while it leads, with real daemons on a
//! real Azurite. Compiled only with the `kubernetes` feature (`cargo test --features kubernetes
//! --test it kubernetes`), which is then in the `leasehold` binary that cargo builds for these
//! tests; a plain `cargo test` leaves the feature's dependencies out of its build (the default
//! build refusing the section is checked by `packaging::kubernetes_wraps_...`).
//! The Kubernetes API is the test kit's stand-in (`testkit/src/kubernetes.rs`): no
//! kube-apiserver can be installed here, so the stand-in checks each request as the API server
//! does (bearer token, PATCH on the pod's path, a JSON merge patch of the labels and nothing
//! else, keys and values by the API server's rules, the pod's existence) and answers as it
//! does.

use leasehold_testkit::kubernetes::KubeApi;
use leasehold_testkit::*;
use nix::sys::signal::Signal;

const KEY: &str = "leasehold.dev/leader";

/// A config for `identity` with `[kubernetes]`, and the daemon, pointed at `api` through its
/// kubeconfig, as pod `pod`.
fn labelled(
    group: &Group,
    api: &KubeApi,
    identity: &str,
    pod: &str,
    env: &[(&str, &str)],
) -> Daemon {
    let config = group.config(
        identity,
        "",
        &format!("\n[kubernetes]\nleader_label = \"{KEY}\"\n"),
    );
    Daemon::launch(&config, identity)
        .env("KUBECONFIG", api.kubeconfig().to_str().unwrap())
        .env("POD_NAME", pod)
        .envs(env)
        .spawn()
}

/// The label of the leader's pod alone says `"true"`: a stale `"true"` left on a pod is set
/// back at start-up, the label follows a graceful handover (the old leader's goes to `"false"`
/// before the new leader's child starts), and every request is one the API server takes.
#[test]
fn the_leaders_pod_alone_is_labelled_and_the_label_follows_a_handover() {
    // Both pods carry a stale "true" (their containers crashed while leading, say).
    let api = KubeApi::start("shop", &["pod-a", "pod-b"], &[(KEY, "true")]);
    let group = Group::shared();
    let a = labelled(&group, &api, "a", "pod-a", &[]);
    let a_started = group.wait_first_start(secs(30)).expect("a leads").t;
    let label = |pod: &str| api.label(pod, KEY);
    // b finds its namespace in POD_NAMESPACE rather than in the kubeconfig.
    let b = labelled(&group, &api, "b", "pod-b", &[("POD_NAMESPACE", "shop")]);
    b.assert_follows(secs(15));
    assert!(
        wait_until(secs(5), || label("pod-b").as_deref() == Some("false")),
        "the follower's stale label is set back: {:?}",
        api.changes()
    );
    assert_eq!(label("pod-a").as_deref(), Some("true"));

    let mut a = a;
    a.signal(Signal::SIGTERM);
    let b_started = group.wait_start_of("b", secs(15)).expect("b leads").t;
    assert_eq!(a.wait_exit(secs(15)).and_then(|s| s.code()), Some(0));
    assert!(
        wait_until(secs(5), || label("pod-b").as_deref() == Some("true")),
        "{:?}",
        api.changes()
    );
    assert_eq!(label("pod-a").as_deref(), Some("false"));

    let changes = api.changes();
    eprintln!("label changes: {changes:#?}");
    let first = |pod: &str, value: &str| {
        changes
            .iter()
            .find(|c| c.pod == pod && c.value == value)
            .unwrap_or_else(|| panic!("{pod} never went {value}: {changes:?}"))
            .at
    };
    // a's stale "true" is first set to "false" as it starts following, then "true" once it
    // leads: both changes happened.
    let a_false = changes
        .iter()
        .rfind(|c| c.pod == "pod-a" && c.value == "false")
        .expect("pod-a back to false")
        .at;
    assert!(
        a_false <= b_started,
        "the old leader's label is off before b's child starts"
    );
    eprintln!(
        "pod-a \"false\" {:?} before b's child started; pod-b \"true\" {:?} after",
        b_started - a_false,
        first("pod-b", "true").saturating_sub(b_started)
    );
    let a_true = changes
        .iter()
        .find(|c| c.pod == "pod-a" && c.value == "true")
        .expect("pod-a true")
        .at;
    eprintln!(
        "pod-a \"true\" {:?} after its child started (bound 1 s)",
        a_true.saturating_sub(a_started)
    );
    assert!(a_true.saturating_sub(a_started) <= secs(1));
    assert!(first("pod-b", "true").saturating_sub(b_started) <= secs(1));
    assert!(
        api.departures().is_empty(),
        "requests the API server would not take, or leasehold must not send: {:#?}",
        api.departures()
    );
    let requests = api.requests();
    assert!(requests.len() >= 4, "{requests:?}");
    for r in &requests {
        assert_eq!(r.method, "PATCH", "{r:?}");
        assert_eq!(
            r.content_type.as_deref(),
            Some("application/merge-patch+json"),
            "{r:?}"
        );
    }
    group.history().assert_safe();
    drop(b);
}

/// An API that refuses the patch (RBAC without `patch` on pods) is retried with backoff and
/// logged with the fix; the lease and the child are never touched by it. A daemon that cannot
/// reach any API at start-up is refused in one line (exit 2).
#[test]
fn a_refused_label_is_retried_and_never_touches_the_lease() {
    let api = KubeApi::start("shop", &["pod-a"], &[]);
    api.forbid(true);
    let group = Group::shared();
    let a = labelled(&group, &api, "a", "pod-a", &[]);
    group
        .wait_first_start(secs(30))
        .expect("a leads, label or not");
    assert!(
        a.wait_log("cannot set the pod label", secs(10)),
        "{}",
        a.log()
    );
    assert!(
        a.log().contains("rbac.yaml"),
        "the fix is named: {}",
        a.log()
    );
    let refused_at = mono_now();
    api.forbid(false);
    assert!(
        wait_until(secs(40), || api.label("pod-a", KEY).as_deref()
            == Some("true")),
        "retried until it took: {:?}",
        api.requests().len()
    );
    eprintln!(
        "label set {:?} after the API allowed it (backoff at most 30 s)",
        mono_now().saturating_sub(refused_at)
    );
    let h = group.history();
    assert_eq!(h.starts().len(), 1, "one term throughout");
    assert!(h.of_kind("stop").is_empty(), "the child was never stopped");
    drop(a);

    // No API at all: a start-up error.
    let config = group.config(
        "lost",
        "",
        &format!("\n[kubernetes]\nleader_label = \"{KEY}\"\n"),
    );
    let mut command = leasehold_command(&["run", "-c", config.to_str().unwrap()]);
    command
        .env("KUBECONFIG", "/no/such/kubeconfig")
        .env("POD_NAME", "pod-x")
        .env_remove("KUBERNETES_SERVICE_HOST");
    let (out, ended) = output_within(command, secs(20));
    assert!(ended);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("[kubernetes]: cannot reach the Kubernetes API"),
        "{stderr}"
    );
}
