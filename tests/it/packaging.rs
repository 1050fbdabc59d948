//! What can be checked here of the files that cannot run here (no Docker engine, no cluster, no
//! systemd as PID 1): the Compose file, the Kubernetes manifests and the systemd unit parse and
//! say what the README promises, their health checks and stop timeouts fit the configs they
//! use, and every config shipped in the repository passes leasehold's own start-up checks
//! (`leasehold check --offline`: everything `run` checks before it touches storage). What the
//! shipped files must give the daemon's own numbers (the unit's open-file limit and watchdog,
//! the Kubernetes config's credential) is checked beside those numbers, by the crate's unit
//! tests.

use leasehold_testkit::identity::TokenEndpoint;
use leasehold_testkit::{EMULATOR_KEY, leasehold_bin, leasehold_command, workspace_root};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use yaml_rust2::{Yaml, YamlLoader};

/// Runs `leasehold check --offline` on a copy of the shipped file `path`, with `replace`
/// applied (paths of secret files and programs that only exist where the file is deployed)
/// and `env` set. A shipped config must pass without a single warning.
fn check_shipped(path: &Path, replace: &[(&str, &str)], env: &[(&str, &str)]) -> Checked {
    let mut text = std::fs::read_to_string(path).unwrap();
    for (from, to) in replace {
        text = text.replace(from, to);
    }
    check_text(path, &text, env)
}

fn check_text(path: &Path, text: &str, env: &[(&str, &str)]) -> Checked {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join(path.file_name().unwrap());
    std::fs::write(&copy, text).unwrap();
    let out = leasehold_command(&["check", "--offline", "-c", copy.to_str().unwrap()])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}: {said}{}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !said.lines().any(|l| l.starts_with("warn")),
        "{}: {said}",
        path.display()
    );
    // `ok    config       PATH: IDENTITY (OWN, ...) in group C/B; lease L, renew R, ...`.
    let line = said
        .lines()
        .find_map(|l| l.strip_prefix("ok    config       "))
        .unwrap_or_else(|| panic!("{}: no config line in {said}", path.display()));
    let line = line
        .strip_prefix(&format!("{}: ", copy.display()))
        .unwrap_or_else(|| panic!("{line}"));
    Checked(line.to_owned())
}

/// The config line of `check --offline`: this instance's settings and the timings, as `run`
/// would take them.
struct Checked(String);

impl Checked {
    fn identity(&self) -> &str {
        self.0.split_once(" (").expect("identity (...)").0
    }

    /// This instance's own settings: `priority N`, `advertise URL|auto`, `http ADDR`.
    fn own(&self) -> Vec<&str> {
        let (_, rest) = self.0.split_once(" (").expect("(...)");
        let (own, _) = rest.split_once(") in group ").expect("(...) in group");
        own.split(", ").collect()
    }

    fn http_listen(&self) -> Option<SocketAddr> {
        self.own()
            .iter()
            .find_map(|o| o.strip_prefix("http "))
            .map(|a| a.parse().expect("an address"))
    }

    /// `[election].advertise = "auto"`: the daemon advertises its listener's URL.
    fn advertise_auto(&self) -> bool {
        self.own().contains(&"advertise auto")
    }

    /// A wake-up URL written in the config.
    fn advertise(&self) -> Option<&str> {
        self.own()
            .into_iter()
            .find_map(|o| o.strip_prefix("advertise "))
            .filter(|a| *a != "auto")
    }

    /// A timing of the line: `lease`, `renew`, `stop timeout`, `margin`.
    fn timing(&self, name: &str) -> Duration {
        let (_, timings) = self.0.split_once("; ").expect("; timings");
        let value = timings
            .split(", ")
            .find_map(|t| t.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} in {timings}"));
        humantime::parse_duration(value).unwrap()
    }

    fn stop_timeout(&self) -> Duration {
        self.timing("stop timeout")
    }
}

/// A key file standing in for a deployed secret.
fn stand_in_key() -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), EMULATOR_KEY.replace("Eby8", "Xby8")).unwrap();
    file
}

fn strings(node: &Yaml) -> Vec<&str> {
    node.as_vec()
        .unwrap_or_else(|| panic!("a list: {node:?}"))
        .iter()
        .map(|y| y.as_str().unwrap_or_else(|| panic!("a string: {y:?}")))
        .collect()
}

#[test]
fn shipped_configs_are_valid() {
    let dir = workspace_root().join("config");
    let key_file = stand_in_key();
    let key = key_file.path().to_str().unwrap();
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        // Secret files and programs named by the examples do not exist here; stand in a
        // real-looking key, and a program.
        let replace = [
            ("/run/secrets/storage-key", key),
            ("/usr/local/bin/my-service", "/bin/true"),
        ];
        let one = check_shipped(&path, &replace, &[]);
        // Copied as it is to every VM (or container), each instance is a member of its own:
        // no identity written in the file, which every copy would share.
        let other = check_shipped(&path, &replace, &[]);
        assert_ne!(
            one.identity(),
            other.identity(),
            "{}: two instances of the same file get the same identity",
            path.display()
        );
        checked += 1;
    }
    assert!(
        checked >= 3,
        "config/ holds the Azurite, Azure and Compose examples"
    );
}

#[test]
fn compose_runs_azurite_and_three_healthy_replicas_with_a_valid_config() {
    let root = workspace_root();
    let text = std::fs::read_to_string(root.join("docker-compose.yml")).unwrap();
    let doc = &YamlLoader::load_from_str(&text).expect("docker-compose.yml parses")[0];
    let services = &doc["services"];

    let image = services["azurite"]["image"]
        .as_str()
        .expect("azurite image");
    assert!(image.ends_with(":3.35.0"), "Azurite is pinned: {image}");
    assert!(
        strings(&services["azurite"]["command"]).contains(&"--disableTelemetry"),
        "Azurite must not call home"
    );

    let shared = &doc["x-leasehold"];
    let volume = shared["volumes"][0].as_str().expect("config volume");
    let (host, container) = volume.split_once(':').unwrap();
    let container = container.trim_end_matches(":ro");
    let config = root.join(host.trim_start_matches("./"));
    let settings = check_shipped(&config, &[], &[]);
    // The config's own comment says where each replica's identity comes from, as this file
    // gives it (LEASEHOLD_IDENTITY below, not a flag).
    let comment: String = std::fs::read_to_string(&config)
        .unwrap()
        .lines()
        .take_while(|l| l.starts_with('#'))
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        comment.contains("LEASEHOLD_IDENTITY") && !comment.contains("--identity"),
        "{host}'s comment says how a replica gets its identity: {comment}"
    );
    let listen = settings
        .http_listen()
        .expect("[http].listen for the health checks");
    assert!(
        listen.ip().is_unspecified(),
        "published ports reach {listen} only on all interfaces"
    );

    let mut host_ports = Vec::new();
    for n in 1..=3 {
        let name = format!("leasehold-{n}");
        let service = &services[name.as_str()];
        assert!(!service.is_badvalue(), "service {name} exists");
        assert_eq!(&service["<<"], shared, "{name} uses the shared settings");
        let command = strings(&shared["command"]);
        assert_eq!(command, ["run", "-c", container], "{name}");
        // What differs per replica comes from variables, checked as the replica runs them.
        let env = &service["environment"];
        assert_eq!(
            env["LEASEHOLD_IDENTITY"].as_str(),
            Some(name.as_str()),
            "{name} has its own identity"
        );
        // Woken at the address it reaches Azurite from, on the Compose network: picked by
        // the daemon (advertise = "auto", the default with [http].listen), not written here.
        assert!(
            env["LEASEHOLD_ADVERTISE"].is_badvalue(),
            "{name} leaves advertise to \"auto\""
        );
        let replica = check_shipped(&config, &[], &[("LEASEHOLD_IDENTITY", name.as_str())]);
        assert_eq!(replica.identity(), name);
        assert!(replica.advertise_auto(), "{name}: advertise = \"auto\"");
        assert_eq!(replica.advertise(), None);
        let port = strings(&service["ports"])[0];
        assert!(
            port.ends_with(&format!(":{}", listen.port())),
            "{name} publishes the HTTP port: {port}"
        );
        host_ports.push(port.to_owned());
    }
    host_ports.sort();
    host_ports.dedup();
    assert_eq!(host_ports.len(), 3, "one host port each");
    let grace = humantime::parse_duration(shared["stop_grace_period"].as_str().unwrap()).unwrap();
    assert!(
        grace > settings.stop_timeout() + Duration::from_secs(5),
        "stop_grace_period {grace:?} leaves leasehold time to stop its child, then release"
    );

    // The health check, run as Docker would run it (bash is all the image has), against a
    // server on loopback answering 200 and then 503.
    let check = strings(&shared["healthcheck"]["test"]);
    assert_eq!(&check[..3], ["CMD", "bash", "-c"], "{check:?}");
    let script = check[3];
    let target = format!("/dev/tcp/127.0.0.1/{}", listen.port());
    assert!(script.contains(&target), "checks [http].listen: {script}");
    let server = TokenEndpoint::start(200, "ok");
    let script = script.replace(&target, &format!("/dev/tcp/127.0.0.1/{}", server.port));
    let run = || {
        std::process::Command::new("bash")
            .args(["-c", &script])
            .status()
            .expect("bash")
    };
    assert!(run().success(), "healthy on 200");
    assert!(
        server.seen()[0].line.starts_with("GET /healthz "),
        "{:?}",
        server.seen()
    );
    server.answer(503, "not ok");
    assert!(!run().success(), "unhealthy on 503");
}

#[test]
fn the_image_runs_leasehold_as_an_unprivileged_user() {
    let text = std::fs::read_to_string(workspace_root().join("Dockerfile")).unwrap();
    let user = text
        .lines()
        .find(|l| l.starts_with("USER "))
        .expect("a USER line");
    assert!(!user.contains("root") && !user.ends_with(" 0"), "{user}");
    let entry = text
        .lines()
        .find(|l| l.starts_with("ENTRYPOINT"))
        .expect("ENTRYPOINT");
    assert!(
        entry.contains("tini") && entry.contains("leasehold"),
        "{entry}"
    );
    assert!(
        text.contains("cargo build --release --locked"),
        "a reproducible build"
    );
    assert!(
        text.contains("FROM debian:bookworm-slim"),
        "the runtime image the health checks (bash) and the Kubernetes copy (glibc) rely on"
    );
}

/// Every document of every manifest in deploy/kubernetes/.
fn kubernetes_documents() -> Vec<(PathBuf, Yaml)> {
    let dir = workspace_root().join("deploy/kubernetes");
    let mut docs = Vec::new();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    paths.sort();
    for path in paths {
        let text = std::fs::read_to_string(&path).unwrap();
        let parsed =
            YamlLoader::load_from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        docs.extend(parsed.into_iter().map(|d| (path.clone(), d)));
    }
    docs
}

fn of_kind<'a>(docs: &'a [(PathBuf, Yaml)], kind: &str) -> &'a Yaml {
    let found: Vec<&Yaml> = docs
        .iter()
        .map(|(_, d)| d)
        .filter(|d| d["kind"].as_str() == Some(kind))
        .collect();
    assert_eq!(found.len(), 1, "one {kind}");
    found[0]
}

/// The one container of the pod's spec that runs the app, and the init container.
fn containers(pod: &Yaml) -> (&Yaml, &Yaml) {
    let containers = pod["spec"]["containers"].as_vec().unwrap();
    assert_eq!(
        containers.len(),
        1,
        "leasehold wraps the app in its container"
    );
    (&containers[0], &pod["spec"]["initContainers"][0])
}

/// A container's environment variable, as written (`value`), or `None`.
fn env_value<'a>(container: &'a Yaml, name: &str) -> Option<&'a Yaml> {
    container["env"]
        .as_vec()?
        .iter()
        .find(|e| e["name"].as_str() == Some(name))
}

#[test]
fn kubernetes_wraps_the_app_in_three_replicas_with_a_valid_config() {
    let docs = kubernetes_documents();
    let kustomization = of_kind(&docs, "Kustomization");
    let listed = strings(&kustomization["resources"]);
    for (path, doc) in &docs {
        let file = path.file_name().unwrap().to_str().unwrap();
        assert!(
            file == "kustomization.yaml" || listed.contains(&file),
            "{file} is applied by kubectl apply -k"
        );
        assert!(doc["apiVersion"].as_str().is_some(), "{file}: apiVersion");
    }

    let deployment = of_kind(&docs, "Deployment");
    let spec = &deployment["spec"];
    assert_eq!(spec["replicas"].as_i64(), Some(3));
    // Readiness is health, not leadership: a rollout waits for each new pod to be Ready, and
    // every pod becomes Ready, so it completes.
    let rolling = &spec["strategy"]["rollingUpdate"];
    assert_eq!(rolling["maxUnavailable"].as_i64(), Some(0), "{rolling:?}");
    assert_eq!(rolling["maxSurge"].as_i64(), Some(1), "{rolling:?}");
    let pod = &spec["template"];
    let labels = &pod["metadata"]["labels"];
    for (key, value) in spec["selector"]["matchLabels"].as_hash().unwrap() {
        assert_eq!(
            &labels[key.as_str().unwrap()],
            value,
            "the selector matches"
        );
    }
    assert_eq!(
        labels["azure.workload.identity/use"].as_str(),
        Some("true"),
        "the pod asks for workload identity"
    );

    let account = of_kind(&docs, "ServiceAccount");
    let account_name = account["metadata"]["name"].as_str().unwrap();
    assert_eq!(
        pod["spec"]["serviceAccountName"].as_str(),
        Some(account_name)
    );
    let client_id = account["metadata"]["annotations"]["azure.workload.identity/client-id"]
        .as_str()
        .expect("the service account names the identity");

    let (app, installed) = containers(pod);
    let command = strings(&app["command"]);
    let args = strings(&app["args"]);
    // tini is PID 1 and runs leasehold; the init container copies both from leasehold's image.
    assert!(command[0].ends_with("/tini-static"), "{command:?}");
    assert_eq!(command[1], "--", "{command:?}");
    assert!(command[2].ends_with("/leasehold"), "{command:?}");
    let copied = strings(&installed["command"]);
    for program in [command[0], command[2]] {
        let name = Path::new(program).file_name().unwrap().to_str().unwrap();
        assert!(
            copied.iter().any(|c| c.ends_with(&format!("/{name}"))),
            "the init container installs {name}: {copied:?}"
        );
    }
    assert!(
        std::fs::read_to_string(workspace_root().join("Dockerfile"))
            .unwrap()
            .contains("tini"),
        "leasehold's image has the tini the init container copies"
    );
    // Pod Security "restricted": no privilege escalation, no capabilities, and here a
    // read-only root filesystem and resources on every container.
    for (name, c) in [("app", app), ("init", installed)] {
        let sc = &c["securityContext"];
        assert_eq!(
            sc["allowPrivilegeEscalation"].as_bool(),
            Some(false),
            "{name}"
        );
        assert_eq!(strings(&sc["capabilities"]["drop"]), ["ALL"], "{name}");
        assert_eq!(sc["readOnlyRootFilesystem"].as_bool(), Some(true), "{name}");
        let resources = &c["resources"];
        assert!(resources["requests"]["cpu"].as_str().is_some(), "{name}");
        assert!(resources["requests"]["memory"].as_str().is_some(), "{name}");
        assert!(resources["limits"]["memory"].as_str().is_some(), "{name}");
        assert!(
            resources["limits"]["cpu"].is_badvalue(),
            "{name}: no CPU limit (throttling delays the kill timers)"
        );
    }
    // The app's image runs as the user it declares.
    assert!(
        pod["spec"]["securityContext"]["runAsUser"].is_badvalue(),
        "no pod-level runAsUser forced on the app's image"
    );
    assert!(app["securityContext"]["runAsUser"].is_badvalue());
    assert_eq!(args[..2], ["run", "-c"]);
    let dashes = args
        .iter()
        .position(|a| *a == "--")
        .expect("run ... -- app");
    let child: Vec<String> = args[dashes + 1..].iter().map(|s| s.to_string()).collect();
    assert!(!child.is_empty(), "the app's command follows --");

    // The images: set by kustomize, rendered by kubectl's own kustomize.
    let images = kustomization["images"].as_vec().expect("an images: block");
    for c in [app, installed] {
        let image = c["image"].as_str().unwrap();
        assert!(
            images.iter().any(|i| i["name"].as_str() == Some(image)),
            "kustomization.yaml sets {image}"
        );
    }
    if let Err(why) = leasehold_testkit::debian::ensure_installed(&["kubernetes-client"], || {
        leasehold_testkit::debian::version_of("kubectl", &["version", "--client"])
    }) {
        panic!("kubectl renders the kustomization: {why}");
    }
    let rendered = std::process::Command::new("kubectl")
        .arg("kustomize")
        .arg(workspace_root().join("deploy/kubernetes"))
        .output()
        .unwrap();
    assert!(
        rendered.status.success(),
        "kubectl kustomize: {}",
        String::from_utf8_lossy(&rendered.stderr)
    );
    let rendered = String::from_utf8_lossy(&rendered.stdout);
    for i in images {
        let full = format!(
            "image: {}:{}",
            i["newName"].as_str().unwrap(),
            i["newTag"].as_str().unwrap()
        );
        assert!(rendered.contains(&full), "{full} in\n{rendered}");
    }
    let rendered_docs = YamlLoader::load_from_str(&rendered).expect("the rendering parses");
    assert_eq!(
        rendered_docs.len(),
        docs.len() - 1,
        "every resource rendered"
    );

    // The config the pod mounts: -c names a key of the ConfigMap behind a volume mount.
    let config_path = Path::new(args[2]);
    let mount = app["volumeMounts"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|m| config_path.starts_with(m["mountPath"].as_str().unwrap()))
        .expect("the config is mounted");
    let volume = pod["spec"]["volumes"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .expect("the mounted volume");
    let config_map = of_kind(&docs, "ConfigMap");
    assert_eq!(
        volume["configMap"]["name"].as_str(),
        config_map["metadata"]["name"].as_str()
    );
    let key = config_path.file_name().unwrap().to_str().unwrap();
    let toml = config_map["data"][key]
        .as_str()
        .expect("the ConfigMap holds the file -c names");

    // What differs per pod comes from the downward API.
    let field = |name: &str| env_value(app, name).map(|e| &e["valueFrom"]["fieldRef"]["fieldPath"]);
    assert_eq!(
        field("POD_NAME").and_then(Yaml::as_str),
        Some("metadata.name")
    );
    assert_eq!(
        field("POD_NAMESPACE").and_then(Yaml::as_str),
        Some("metadata.namespace")
    );
    let identity = env_value(app, "LEASEHOLD_IDENTITY").expect("LEASEHOLD_IDENTITY");
    assert_eq!(identity["value"].as_str(), Some("$(POD_NAME)"));
    // Woken at the pod's IP, which the daemon picks (advertise = "auto", the default with
    // [http].listen on a wildcard: the address it reaches storage from).
    assert!(env_value(app, "LEASEHOLD_ADVERTISE").is_none());

    // The pod label: [kubernetes] in the config names it, the pod starts with "false", the
    // Service selects "true".
    let parsed: toml::Table = toml.parse().expect("the config is TOML");
    let label_key = parsed["kubernetes"]["leader_label"]
        .as_str()
        .expect("[kubernetes].leader_label");
    assert_eq!(labels[label_key].as_str(), Some("false"), "{label_key}");
    let service = of_kind(&docs, "Service");
    let selector = &service["spec"]["selector"];
    assert_eq!(selector[label_key].as_str(), Some("true"), "{selector:?}");
    for (k, v) in spec["selector"]["matchLabels"].as_hash().unwrap() {
        assert_eq!(
            &selector[k.as_str().unwrap()],
            v,
            "the Service selects the replicas"
        );
    }

    // RBAC: the pods' service account may get and patch pods in its namespace.
    let role = docs
        .iter()
        .map(|(_, d)| d)
        .find(|d| d["kind"].as_str() == Some("Role"))
        .expect("a Role");
    let binding = docs
        .iter()
        .map(|(_, d)| d)
        .find(|d| d["kind"].as_str() == Some("RoleBinding"))
        .expect("a RoleBinding");
    let rule = role["rules"]
        .as_vec()
        .unwrap()
        .iter()
        .find(|r| strings(&r["resources"]).contains(&"pods"))
        .expect("a rule on pods");
    assert_eq!(strings(&rule["apiGroups"]), [""]);
    for verb in ["get", "patch"] {
        assert!(strings(&rule["verbs"]).contains(&verb), "{verb}");
    }
    assert_eq!(binding["roleRef"]["kind"].as_str(), Some("Role"));
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
    assert!(
        binding["subjects"].as_vec().unwrap().iter().any(|s| {
            s["kind"].as_str() == Some("ServiceAccount") && s["name"].as_str() == Some(account_name)
        }),
        "bound to the pods' service account"
    );
    assert_eq!(
        pod["spec"]["automountServiceAccountToken"].as_bool(),
        Some(true)
    );

    // A PodDisruptionBudget over the replicas: drains take one at a time.
    let budget = of_kind(&docs, "PodDisruptionBudget");
    assert_eq!(budget["spec"]["maxUnavailable"].as_i64(), Some(1));
    assert_eq!(
        budget["spec"]["selector"]["matchLabels"],
        spec["selector"]["matchLabels"]
    );

    // Validated as the pod would run it: the variables the Deployment sets (with the downward
    // API's values) and what the workload identity webhook puts in the environment (that the
    // credential is workload identity alone: the unit test
    // config::credentials::tests::the_shipped_kubernetes_config_uses_workload_identity). The
    // section [kubernetes] is left out here (a leasehold built without the kubernetes feature
    // refuses it) and checked below with it; the command comes from the args (here a program
    // that exists, so that `check` finds it).
    let pod_name = "my-app-5d8f7c9b4-x2x9k";
    let without_label = toml.split("\n[kubernetes]").next().unwrap().replacen(
        "[child]\n",
        "[child]\ncommand = [\"/bin/true\"]\n",
        1,
    );
    assert!(without_label.contains("/bin/true"), "a [child] section");
    let token = tempfile::NamedTempFile::new().unwrap();
    let token_file = token.path().to_str().unwrap();
    let webhook = [
        ("AZURE_TENANT_ID", "72f988bf-86f1-41af-91ab-2d7cd011db47"),
        ("AZURE_CLIENT_ID", client_id),
        ("AZURE_FEDERATED_TOKEN_FILE", token_file),
        ("AZURE_AUTHORITY_HOST", "https://login.microsoftonline.com/"),
    ];
    let pod_env: Vec<(&str, &str)> = [("LEASEHOLD_IDENTITY", pod_name)]
        .into_iter()
        .chain(webhook)
        .collect();
    let settings = check_text(Path::new(key), &without_label, &pod_env);
    assert_eq!(settings.identity(), pod_name);
    assert!(settings.advertise_auto());
    assert_eq!(settings.advertise(), None);
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join(key);
    std::fs::write(&whole, toml).unwrap();
    // The whole config as the pod's `leasehold check` reads it: a build with the kubernetes
    // feature (the image's; `cargo test --features kubernetes`) finds the pod to label, and the
    // default build refuses the section rather than ignore it.
    let mut check = leasehold_testkit::leasehold_command(&[
        "check",
        "--offline",
        "-c",
        whole.to_str().unwrap(),
    ]);
    check
        .env("LEASEHOLD_IDENTITY", pod_name)
        .env("POD_NAME", pod_name)
        .env("POD_NAMESPACE", "shop")
        .envs(webhook);
    let out = check.output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    if cfg!(feature = "kubernetes") {
        assert_eq!(out.status.code(), Some(0), "check --offline: {said}");
        assert!(
            said.contains(&format!("pod label {label_key} on {pod_name}")),
            "the kubernetes build takes [kubernetes]: {said}"
        );
    } else {
        assert_eq!(out.status.code(), Some(2), "check --offline: {said}");
        assert!(
            said.contains("[kubernetes]") && said.contains("built without the kubernetes feature"),
            "the default build refuses [kubernetes]: {said}"
        );
    }

    // Probes on leasehold's port: readiness and liveness are both the daemon's health.
    let listen = settings.http_listen().expect("[http].listen");
    assert!(
        listen.ip().is_unspecified(),
        "the kubelet probes the pod IP"
    );
    if cfg!(feature = "kubernetes") {
        assert!(
            said.contains("advertise auto"),
            "peers wake it at the URL it picks on [http].listen: {said}"
        );
    }
    let port_named = |name: &str| {
        app["ports"]
            .as_vec()
            .unwrap()
            .iter()
            .find(|p| p["name"].as_str() == Some(name))
            .and_then(|p| p["containerPort"].as_i64())
    };
    for probe in ["readinessProbe", "livenessProbe"] {
        let get = &app[probe]["httpGet"];
        assert_eq!(get["path"].as_str(), Some("/healthz"), "{probe}");
        let port = get["port"]
            .as_i64()
            .or_else(|| port_named(get["port"].as_str().unwrap()));
        assert_eq!(port, Some(i64::from(listen.port())), "{probe} port");
    }

    // The kubelet's SIGKILL must come after leasehold has stopped the app and handed over.
    let grace = pod["spec"]["terminationGracePeriodSeconds"]
        .as_i64()
        .expect("terminationGracePeriodSeconds");
    let grace = Duration::from_secs(grace as u64);
    assert!(
        grace > settings.stop_timeout() + Duration::from_secs(5),
        "terminationGracePeriodSeconds {grace:?} vs stop_timeout {:?}",
        settings.stop_timeout()
    );
}

/// `Key=Value` lines of a unit file's `[section]`, in order.
fn unit_section<'a>(text: &'a str, section: &str) -> Vec<(&'a str, &'a str)> {
    let header = format!("[{section}]");
    text.lines()
        .skip_while(|l| l.trim() != header)
        .skip(1)
        .take_while(|l| !l.starts_with('['))
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .collect()
}

#[test]
fn systemd_stops_the_child_before_the_lease_and_the_unit_verifies() {
    let dir = workspace_root().join("deploy/systemd");
    let unit = std::fs::read_to_string(dir.join("leasehold.service")).unwrap();
    let service = unit_section(&unit, "Service");
    let get = |key: &str| {
        let values: Vec<&str> = service
            .iter()
            .filter(|(k, _)| *k == key)
            .map(|(_, v)| *v)
            .collect();
        assert_eq!(values.len(), 1, "one {key}=");
        values[0]
    };
    assert_eq!(
        get("KillMode"),
        "mixed",
        "SIGTERM to leasehold only; it stops the child"
    );
    assert_eq!(get("KillSignal"), "SIGTERM");
    // sd_notify: ready once in the group, pinged while the loop lives (tests/run.rs hears both
    // on a real socket); only leasehold may notify.
    assert_eq!(get("Type"), "notify");
    assert_eq!(get("NotifyAccess"), "main");
    let watchdog = humantime::parse_duration(get("WatchdogSec")).expect("WatchdogSec");
    let exec: Vec<&str> = get("ExecStart").split_whitespace().collect();
    assert_eq!(&exec[1..3], ["run", "-c"], "{exec:?}");

    // The config the unit runs, with the key where LoadCredential puts it.
    let (name, _) = get("LoadCredential").split_once(':').unwrap();
    let credential = format!("/run/credentials/leasehold.service/{name}");
    let key_file = stand_in_key();
    let settings = check_shipped(
        &dir.join("leasehold.toml"),
        &[
            (credential.as_str(), key_file.path().to_str().unwrap()),
            ("/usr/local/bin/my-service", "/bin/true"),
        ],
        &[],
    );
    assert!(
        std::fs::read_to_string(dir.join("leasehold.toml"))
            .unwrap()
            .contains(&credential),
        "the config reads the unit's credential"
    );
    // Open files (LimitNOFILE holds the HTTP cap, the reserve and the headroom) and the
    // watchdog (WatchdogSec above the stall limit of this config): the unit tests of
    // open_files and telemetry, beside those numbers.
    assert!(get("LimitNOFILE").contains(':'), "LimitNOFILE=SOFT:HARD");
    assert!(watchdog > Duration::ZERO);

    let timeout = humantime::parse_duration(get("TimeoutStopSec"))
        .or_else(|_| get("TimeoutStopSec").parse().map(Duration::from_secs))
        .expect("TimeoutStopSec");
    assert!(
        timeout > settings.stop_timeout() + Duration::from_secs(5),
        "TimeoutStopSec {timeout:?} vs stop_timeout {:?}",
        settings.stop_timeout()
    );

    // systemd's own check: every directive known and well-formed. CI installs it (.ci/run);
    // on a machine without it this fails rather than pass having checked less.
    let verify = std::process::Command::new("systemd-analyze")
        .arg("--version")
        .output();
    assert!(
        verify.is_ok_and(|v| v.status.success()),
        "systemd-analyze is needed to verify the unit: install Debian's systemd package \
         (apt-get install --no-install-recommends systemd), as .ci/run does"
    );
    let copy = tempfile::tempdir().unwrap();
    let path = copy.path().join("leasehold.service");
    std::fs::write(
        &path,
        unit.replace(exec[0], leasehold_bin().to_str().unwrap()),
    )
    .unwrap();
    let out = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.trim().is_empty(),
        "systemd-analyze verify: {stderr}"
    );
}

/// The unit's install commands, as its comment gives them, work on a fresh host: run here with
/// every absolute destination under an empty folder (no /etc/leasehold, no
/// /etc/systemd/system), each leaves its file with its mode. (Without `install -D`, the first
/// failed: "cannot create regular file '/etc/leasehold/leasehold.toml'".)
#[test]
fn the_systemd_install_commands_work_on_a_fresh_host() {
    use std::os::unix::fs::PermissionsExt;
    let unit =
        std::fs::read_to_string(workspace_root().join("deploy/systemd/leasehold.service")).unwrap();
    let commands: Vec<&str> = unit
        .lines()
        .filter_map(|l| l.strip_prefix("#   install "))
        .map(|l| l.split("   #").next().unwrap().trim())
        .collect();
    assert_eq!(commands.len(), 3, "the config, the key and the unit");
    let host = tempfile::tempdir().unwrap();
    let root = host.path().to_str().unwrap();
    let mut installed = Vec::new();
    for command in commands {
        let words: Vec<String> = command
            .split(' ')
            .map(|w| match w.strip_prefix('/') {
                Some(rest) if !w.starts_with("/dev/") => format!("{root}/{rest}"),
                _ => w.to_owned(),
            })
            .collect();
        let mode = words[words.iter().position(|w| w == "-m").unwrap() + 1].clone();
        let line = format!("install {}", words.join(" "));
        let out = std::process::Command::new("bash")
            .args(["-c", &line])
            .env("KEY", "c3RhbmQtaW4=")
            .current_dir(workspace_root())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{command}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let dest = words.iter().rev().find(|w| w.starts_with(root)).unwrap();
        let meta = std::fs::metadata(dest).unwrap_or_else(|e| panic!("{dest}: {e}"));
        assert!(meta.is_file(), "{command}: a file at {dest}");
        assert_eq!(
            format!("{:04o}", meta.permissions().mode() & 0o7777),
            mode,
            "{command}"
        );
        installed.push(dest.strip_prefix(root).unwrap().to_owned());
    }
    assert_eq!(
        installed,
        [
            "/etc/leasehold/leasehold.toml",
            "/etc/leasehold/storage-key",
            "/etc/systemd/system/leasehold.service"
        ]
    );
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .unwrap();
    assert!(
        exec.starts_with("/usr/local/bin/leasehold run -c /etc/leasehold/leasehold.toml"),
        "the unit runs what was installed: {exec}"
    );
}
