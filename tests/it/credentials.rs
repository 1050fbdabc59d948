//! Every way of giving leasehold a storage credential, against a real Azurite and the real
//! binary: each one elects a leader, none leaks into the logs (at trace level) or into the
//! child's environment, and each kind of refusal ends with the documented exit code and a line
//! that says what to fix.
//!
//! Azurite runs with an account of its own (`AZURITE_ACCOUNTS`) whose key is random, so that
//! looking for the key in the logs means something. The Entra ID paths run against Azurite over
//! https (a certificate from a CA made by the test, trusted through `ca_file`) with
//! `--oauth basic`, and get their tokens from a fake `az` or from a stand-in token endpoint
//! (the test kit's `identity`): what is real is leasehold's whole path from the config to a
//! bearer token that storage checks.

use leasehold_testkit::identity::{FakeAz, FakeToken, Seen, TestCa, TokenEndpoint};
use leasehold_testkit::process::assert_no_secret;
use leasehold_testkit::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const CONTAINER: &str = "tests";

/// Azurite with an account nobody else knows the key of.
fn private_azurite() -> Azurite {
    let key = azure_core::base64::encode((0..64).map(|_| fastrand::u8(..)).collect::<Vec<u8>>());
    Azurite::start_with(AzuriteOptions {
        account: Some(("leaseholdcreds".to_owned(), key)),
        ..AzuriteOptions::default()
    })
}

/// Azurite over https with OAuth, its certificate signed by `ca`.
fn oauth_azurite(ca: &TestCa) -> Azurite {
    Azurite::start_with(AzuriteOptions {
        tls: Some((ca.cert_file.clone(), ca.key_file.clone())),
        oauth: true,
        ..AzuriteOptions::default()
    })
}

/// A folder for certificates and tokens, a private CA made in it, and Azurite over https with
/// OAuth and a certificate from that CA.
fn entra_id_setup() -> (tempfile::TempDir, TestCa, Azurite) {
    let certs = tempfile::tempdir().unwrap();
    let ca = TestCa::create(certs.path());
    let azurite = oauth_azurite(&ca);
    (certs, ca, azurite)
}

/// The `sig` value of a SAS token, as it appears in the token (URL-encoded).
fn signature(sas: &str) -> String {
    sas.split('&')
        .find_map(|p| p.strip_prefix("sig="))
        .expect("sig=")
        .to_owned()
}

fn write_secret(dir: &Path, name: &str, value: &str, mode: u32) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, value).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

/// A config for `identity` in `group`: the given `[storage]` lines (credential, endpoint), the
/// test container and the group's blob, the witness as the child plus `child` lines.
fn config(group: &Group, identity: &str, storage: &str, child: &str) -> PathBuf {
    let text = format!(
        "identity = {identity:?}\n\n[storage]\n{storage}\ncontainer = \"{CONTAINER}\"\nblob = {:?}\n\n[child]\ncommand = {}\nstop_timeout = \"2s\"\n{child}\n",
        group.blob,
        group.witness(&[])
    );
    write_secret(group.dir(), &format!("{identity}.toml"), &text, 0o600)
}

/// A daemon for `identity` of `group`, with the config [`config`] writes for `storage`.
fn launch(group: &Group, identity: &str, storage: &str) -> Launch {
    Daemon::launch(&config(group, identity, storage, ""), identity)
}

/// Waits for the group's child to start and returns what it recorded of its environment.
fn led(group: &Group, daemon: &Daemon) -> String {
    group
        .wait_first_start(secs(20))
        .unwrap_or_else(|| panic!("{} never led:\n{}", daemon.identity, daemon.log()))
        .detail
}

/// Once the daemon of `group` leads, the first request `endpoint` received, which must begin
/// with `line`.
fn first_request((group, daemon): (&Group, &Daemon), endpoint: &TokenEndpoint, line: &str) -> Seen {
    led(group, daemon);
    let asked = endpoint.seen()[0].clone();
    assert!(asked.line.starts_with(line), "{asked:?}");
    asked
}

/// The daemon ends by itself with `code`; returns its log.
fn refused(daemon: &mut Daemon, code: i32) -> String {
    let status = daemon
        .wait_exit(secs(20))
        .unwrap_or_else(|| panic!("{} did not exit:\n{}", daemon.identity, daemon.log()));
    let log = daemon.log();
    assert_eq!(status.code(), Some(code), "{}: {log}", daemon.identity);
    log
}

const TRACE: (&str, &str) = ("RUST_LOG", "trace");

/// The tenant the stand-in tokens are issued in.
const TENANT: &str = "72f988bf-86f1-41af-91ab-2d7cd011db47";

/// The application the workload identity stands for.
const WORKLOAD_CLIENT: &str = "0a1b2c3d-0000-4000-8000-00000000a991";

/// What Entra ID's clients read from the environment: the authority (a stand-in token
/// endpoint), the tenant and the application.
fn entra_id(launch: Launch, authority: &str, client_id: &str) -> Launch {
    launch
        .env("AZURE_AUTHORITY_HOST", authority)
        .env("AZURE_TENANT_ID", TENANT)
        .env("AZURE_CLIENT_ID", client_id)
}

/// One daemon of the first test: its name, `[storage]` lines, environment and `[child]` lines.
struct Case<'a> {
    name: &'a str,
    storage: String,
    env: &'a [(&'a str, &'a str)],
    child: &'a str,
}

#[test]
fn every_key_and_sas_source_elects_a_leader_and_leaks_nothing() {
    let azurite = private_azurite();
    azurite.create_container(CONTAINER);
    let (account, key) = azurite.account();
    let (account, key) = (account.to_owned(), key.to_owned());
    let endpoint = azurite.endpoint();
    let connection_string = azurite.connection_string();
    let sas = azurite.container_sas(CONTAINER, "racw");
    let sig = signature(&sas);

    let secrets = tempfile::tempdir().unwrap();
    let cs_file = write_secret(secrets.path(), "cs", &connection_string, 0o600);
    // Readable by the group: a warning, and still no secret in the log.
    let key_file = write_secret(secrets.path(), "key", &key, 0o640);
    let sas_file = write_secret(secrets.path(), "sas", &format!("?{sas}\n"), 0o600);

    let with_endpoint = |line: String| format!("endpoint = {endpoint:?}\n{line}");
    let key_env = [
        ("AZURE_STORAGE_KEY", key.as_str()),
        ("AZURE_STORAGE_ACCOUNT", &account),
    ];
    let cs_env = [(
        "AZURE_STORAGE_CONNECTION_STRING",
        connection_string.as_str(),
    )];
    let sas_env = [
        ("AZURE_STORAGE_SAS_TOKEN", sas.as_str()),
        ("AZURE_STORAGE_ACCOUNT", &account),
    ];
    let case = |name, storage, env, child| Case {
        name,
        storage,
        env,
        child,
    };
    let cs_line = format!("connection_string_file = {cs_file:?}");
    let key_line = with_endpoint(format!("access_key_file = {key_file:?}"));
    let sas_line = with_endpoint(format!("sas_token_file = {sas_file:?}"));
    let bare = with_endpoint(String::new());
    let cases = [
        case("cs-file", cs_line, &[], ""),
        case("cs-env", String::new(), &cs_env, ""),
        case("key-file", key_line, &[], ""),
        case("key-env", bare.clone(), &key_env, ""),
        case("sas-file", sas_line, &[], ""),
        case("sas-env", bare.clone(), &sas_env, ""),
        // The opt-in: proves the witness would see the variables if they were passed on.
        case(
            "inherits",
            bare,
            &key_env,
            "inherit_storage_credentials = true",
        ),
    ];

    let groups: Vec<Group> = cases.iter().map(|_| Group::new(&azurite)).collect();
    let mut daemons: Vec<Daemon> = cases
        .iter()
        .zip(&groups)
        .map(|(case, group)| {
            let mut env = case.env.to_vec();
            env.push(TRACE);
            let config = config(group, case.name, &case.storage, case.child);
            Daemon::spawn(&config, case.name, &[], &env)
        })
        .collect();

    for (case, (group, daemon)) in cases.iter().zip(groups.iter().zip(&daemons)) {
        let (name, env) = (case.name, led(group, daemon));
        if name == "inherits" {
            let mut seen: Vec<&str> = env
                .trim_start_matches("env_credentials=")
                .split(',')
                .collect();
            seen.sort();
            assert_eq!(
                seen,
                ["AZURE_STORAGE_ACCOUNT", "AZURE_STORAGE_KEY"],
                "inherit_storage_credentials passes them on"
            );
        } else {
            assert_eq!(
                env, "env_credentials=",
                "{name}: no AZURE_STORAGE_* variable reaches the child"
            );
        }
    }
    for daemon in &mut daemons {
        daemon.stop(secs(15));
    }
    for daemon in &daemons {
        let log = daemon.log();
        let name = daemon.identity.as_str();
        assert!(
            log.contains("lease operation succeeded"),
            "{name}: trace lines are logged: {log}"
        );
        assert_no_secret(name, &log, &[&key, &connection_string, &sas, &sig]);
        let warned = log.contains("can be read by its group");
        assert_eq!(
            warned,
            name == "key-file",
            "{name}: a warning only for the group-readable key file: {log}"
        );
    }
}

#[test]
fn refusals_exit_2_or_3_with_a_line_that_says_what_to_fix() {
    let azurite = private_azurite();
    azurite.create_container(CONTAINER);
    let endpoint = azurite.endpoint();
    let account = azurite.account().0.to_owned();
    let group = Group::new(&azurite);
    let wrong_key =
        azure_core::base64::encode((0..64).map(|_| fastrand::u8(..)).collect::<Vec<u8>>());
    let read_only = azurite.container_sas(CONTAINER, "r");
    let forged = {
        let good = azurite.container_sas(CONTAINER, "racw");
        let sig = signature(&good);
        good.replace(&sig, &format!("{}AAAA", &sig[..sig.len() - 4]))
    };
    let key_file = write_secret(group.dir(), "wrong-key", &wrong_key, 0o600);
    let with_endpoint = |line: &str| format!("endpoint = {endpoint:?}\n{line}");

    // Exit 3: storage refuses. All at once, each on the same blob (none gets anywhere).
    let mut wrong = launch(
        &group,
        "wrong-key",
        &with_endpoint(&format!("access_key_file = {key_file:?}")),
    )
    .envs(&[TRACE])
    .spawn();
    let mut no_write = launch(&group, "read-only-sas", &with_endpoint(""))
        .envs(&[TRACE, ("AZURE_STORAGE_SAS_TOKEN", &read_only)])
        .spawn();
    let mut forger = launch(&group, "forged-sas", &with_endpoint(""))
        .envs(&[TRACE, ("AZURE_STORAGE_SAS_TOKEN", &forged)])
        .spawn();
    let log = refused(&mut wrong, 3);
    assert!(log.contains("refused the credentials"), "{log}");
    assert!(log.contains("403"), "the status is logged: {log}");
    assert_no_secret("wrong-key", &log, &[&wrong_key]);
    let log = refused(&mut no_write, 3);
    assert!(
        log.contains("AuthorizationPermissionMismatch") && log.contains("sp=rw"),
        "a SAS without write (lease) permission gets a hint: {log}"
    );
    assert_no_secret("read-only-sas", &log, &[&read_only, &signature(&read_only)]);
    let log = refused(&mut forger, 3);
    // Azure says AuthenticationFailed, Azurite AuthorizationFailure; both are 403.
    assert!(log.contains("storage answered 403"), "{log}");
    assert_no_secret("forged-sas", &log, &[&forged, &signature(&forged)]);

    // Exit 2: refused before storage is asked, one line on stderr.
    let two = [
        (
            "key file and SAS variable",
            with_endpoint(&format!("access_key_file = {key_file:?}")),
            vec![("AZURE_STORAGE_SAS_TOKEN", read_only.as_str())],
            vec!["[storage].access_key_file", "AZURE_STORAGE_SAS_TOKEN"],
        ),
        // What an `az` user meets: the connection string exported in the shell, a key in the
        // file. Both named, and how to keep either.
        (
            "key file and an exported connection string",
            with_endpoint(&format!("access_key_file = {key_file:?}")),
            vec![(
                "AZURE_STORAGE_CONNECTION_STRING",
                "UseDevelopmentStorage=true",
            )],
            vec![
                "[storage].access_key_file, and AZURE_STORAGE_CONNECTION_STRING from the environment",
                "`env -u AZURE_STORAGE_CONNECTION_STRING leasehold ...`",
                "to use the variable, remove [storage].access_key_file",
            ],
        ),
        (
            "Entra ID and a connection string",
            "credential = \"azure-cli\"\naccount = \"acct\"".to_owned(),
            vec![(
                "AZURE_STORAGE_CONNECTION_STRING",
                "UseDevelopmentStorage=true",
            )],
            vec![
                "[storage].credential = \"azure-cli\"",
                "AZURE_STORAGE_CONNECTION_STRING",
            ],
        ),
        (
            "plain http off loopback",
            format!(
                "endpoint = \"http://storage.example:10000/{account}\"\naccess_key_file = {key_file:?}"
            ),
            vec![],
            vec!["[storage].endpoint", "allow_insecure_http"],
        ),
        (
            "workload identity outside AKS",
            "credential = \"workload-identity\"\naccount = \"acct\"".to_owned(),
            vec![],
            vec!["AZURE_FEDERATED_TOKEN_FILE", "azure.workload.identity/use"],
        ),
        (
            "Entra ID over http",
            "credential = \"managed-identity\"\nendpoint = \"http://127.0.0.1:10000/acct\""
                .to_owned(),
            vec![],
            vec!["[storage].endpoint", "https"],
        ),
    ];
    for (name, storage, env, needles) in two {
        let mut daemon = Daemon::launch(&config(&group, "bad", &storage, ""), name)
            .envs(&env)
            .spawn();
        let log = refused(&mut daemon, 2);
        assert_eq!(log.trim_end().lines().count(), 1, "{name}: one line: {log}");
        for needle in needles {
            assert!(log.contains(needle), "{name}: names {needle:?}: {log}");
        }
        assert_no_secret(name, &log, &[&wrong_key, &read_only]);
    }
}

#[test]
fn entra_id_through_the_azure_cli_over_https_with_a_private_ca() {
    let (certs, ca, azurite) = entra_id_setup();
    let endpoint = azurite.endpoint();
    let token = FakeToken::new("https://storage.azure.com");
    let az = FakeAz::install(certs.path(), &token.az_json());
    let path = az.path();
    let storage = format!(
        "credential = \"azure-cli\"\nendpoint = {endpoint:?}\nca_file = {:?}",
        ca.ca_file
    );

    let group = Group::new(&azurite);
    let mut daemon = launch(&group, "cli", &storage)
        .envs(&[TRACE, ("PATH", &path)])
        .spawn();
    assert_eq!(led(&group, &daemon), "env_credentials=");
    let calls = az.calls();
    assert!(
        calls.iter().any(|c| c
            == "account get-access-token --output json --scope https://storage.azure.com/.default"),
        "the token came from az: {calls:?}"
    );
    daemon.stop(secs(15));
    let log = daemon.log();
    assert!(log.contains("Entra ID (azure-cli)"), "{log}");
    assert_no_secret("cli", &log, &[&token.jwt, &token.signature]);

    // `default` falls through an absent managed identity (nothing listens where IMDS would be)
    // to the Azure CLI, and says which one it uses.
    let nowhere = format!("http://127.0.0.1:{}", free_port());
    let group = Group::new(&azurite);
    let mut daemon = launch(&group, "default", &storage.replace("azure-cli", "default"))
        .envs(&[
            TRACE,
            ("PATH", &path),
            ("AZURE_POD_IDENTITY_AUTHORITY_HOST", &nowhere),
        ])
        .spawn();
    led(&group, &daemon);
    daemon.stop(secs(15));
    let log = daemon.log();
    assert!(
        log.contains("using the Entra ID token of the Azure CLI"),
        "{log}"
    );
    assert_no_secret("default", &log, &[&token.jwt, &token.signature]);

    // A token for another audience: storage refuses it, exit 3.
    let other = FakeToken::new("https://management.azure.com");
    let wrong_az = FakeAz::install(&certs.path().join("wrong"), &other.az_json());
    std::fs::create_dir_all(certs.path().join("wrong")).unwrap();
    let mut daemon = launch(&group, "audience", &storage)
        .envs(&[TRACE, ("PATH", &wrong_az.path())])
        .spawn();
    let log = refused(&mut daemon, 3);
    assert!(log.contains("AuthenticationFailed"), "{log}");
    assert!(log.contains("https://storage.azure.com"), "the hint: {log}");
    assert_no_secret("audience", &log, &[&other.jwt, &other.signature]);

    // A CLI that is not logged in: exit 3 with what az said.
    let logged_out = FakeAz::install(&certs.path().join("out"), "");
    let mut daemon = launch(&group, "logged-out", &storage)
        .envs(&[("PATH", &logged_out.path())])
        .spawn();
    let log = refused(&mut daemon, 3);
    assert!(
        log.contains("no Entra ID token") && log.contains("az login"),
        "{log}"
    );

    // Without the CA, the endpoint's certificate is not trusted: storage counts as unreachable
    // (retried, no exit), and the warning points at ca_file.
    let daemon = launch(
        &group,
        "no-ca",
        &format!("credential = \"azure-cli\"\nendpoint = {endpoint:?}"),
    )
    .envs(&[("PATH", &path)])
    .spawn();
    assert!(
        daemon.wait_log("[storage].ca_file", secs(15)),
        "{}",
        daemon.log()
    );
}

#[test]
fn managed_workload_and_client_secret_identities_with_stand_in_token_endpoints() {
    let (certs, ca, azurite) = entra_id_setup();
    let endpoint = azurite.endpoint();
    let storage = |credential: &str, extra: &str| {
        format!(
            "credential = \"{credential}\"\nendpoint = {endpoint:?}\nca_file = {:?}\n{extra}",
            ca.ca_file
        )
    };

    // Managed identity, user-assigned, from IMDS (its host moved to loopback the way the Azure
    // SDKs allow); and from an App Service-style endpoint with its secret header.
    let imds_token = FakeToken::new("https://storage.azure.com");
    let imds = TokenEndpoint::start(200, &imds_token.managed_identity_json());
    let imds_group = Group::new(&azurite);
    let mut imds_daemon = launch(
        &imds_group,
        "imds",
        &storage(
            "managed-identity",
            "client_id = \"5e1d3b4c-0000-4000-8000-00000000c11d\"",
        ),
    )
    .envs(&[TRACE, ("AZURE_POD_IDENTITY_AUTHORITY_HOST", &imds.url())])
    .spawn();
    let app_token = FakeToken::new("https://storage.azure.com");
    let app = TokenEndpoint::start(200, &app_token.managed_identity_json());
    let app_header = format!("header-{}", fastrand::u64(..));
    let app_group = Group::new(&azurite);
    let mut app_daemon = launch(&app_group, "app-service", &storage("managed-identity", ""))
        .envs(&[
            TRACE,
            ("IDENTITY_ENDPOINT", &format!("{}/msi/token", app.url())),
            ("IDENTITY_HEADER", &app_header),
        ])
        .spawn();

    // Workload identity: the service-account token is exchanged at the "Entra" endpoint. The
    // token it hands out lives 301 s, so every renew after the first second refreshes it in
    // the background; a rotated service-account token must be the one sent next.
    let wi_token = FakeToken::new("https://storage.azure.com");
    let entra = TokenEndpoint::start(
        200,
        &wi_token
            .oauth_json()
            .replace("\"expires_in\":3599", "\"expires_in\":301"),
    );
    let sa_file = certs.path().join("sa-token");
    let first_sa = format!("sa-token-one-{}", fastrand::u64(..));
    std::fs::write(&sa_file, &first_sa).unwrap();
    let wi_group = Group::new(&azurite);
    let workload = |name: &str| {
        let launch = launch(&wi_group, name, &storage("workload-identity", ""));
        entra_id(launch, &entra.url(), WORKLOAD_CLIENT)
            .env("AZURE_FEDERATED_TOKEN_FILE", sa_file.to_str().unwrap())
    };
    let mut wi_daemon = workload("workload").env(TRACE.0, TRACE.1).spawn();

    // `default` with a client secret in the environment: the first source of its chain.
    let cs_token = FakeToken::new("https://storage.azure.com");
    let login = TokenEndpoint::start(200, &cs_token.oauth_json());
    let client_secret = format!("Zq{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..));
    let cs_group = Group::new(&azurite);
    let secret_launch = launch(&cs_group, "client-secret", &storage("default", ""));
    let mut cs_daemon = entra_id(
        secret_launch,
        &login.url(),
        "0a1b2c3d-0000-4000-8000-0000000c5ec7",
    )
    .env(TRACE.0, TRACE.1)
    .env("AZURE_CLIENT_SECRET", &client_secret)
    .spawn();

    let asked = first_request(
        (&imds_group, &imds_daemon),
        &imds,
        "GET /metadata/identity/oauth2/token?api-version=2018-02-01&resource=https%3A%2F%2Fstorage.azure.com&client_id=5e1d3b4c-0000-4000-8000-00000000c11d ",
    );
    assert_eq!(asked.header("metadata"), Some("true"));

    let asked = first_request(
        (&app_group, &app_daemon),
        &app,
        "GET /msi/token?api-version=2019-08-01&resource=",
    );
    assert_eq!(asked.header("x-identity-header"), Some(app_header.as_str()));

    let token_path = format!("/{TENANT}/oauth2/v2.0/token ");
    let asked = first_request(
        (&wi_group, &wi_daemon),
        &entra,
        &format!("POST {token_path}"),
    );
    assert!(
        asked.body.contains(&format!("client_assertion={first_sa}"))
            && asked.body.contains(&format!("client_id={WORKLOAD_CLIENT}"))
            && asked
                .body
                .contains("scope=https%3A%2F%2Fstorage.azure.com%2F.default"),
        "{asked:?}"
    );
    let rotated = format!("sa-token-two-{}", fastrand::u64(..));
    std::fs::write(&sa_file, &rotated).unwrap();
    assert!(
        wait_until(secs(15), || entra
            .seen()
            .iter()
            .any(|s| s.body.contains(&format!("client_assertion={rotated}")))),
        "the rotated service-account token was sent: {:?}",
        entra.seen()
    );

    let asked = first_request((&cs_group, &cs_daemon), &login, "POST ");
    assert!(asked.line.contains(&token_path), "{asked:?}");
    assert!(
        asked.body.contains("grant_type=client_credentials")
            && asked
                .body
                .contains(&format!("client_secret={client_secret}")),
        "{asked:?}"
    );
    assert!(
        cs_daemon.wait_log("using the Entra ID token of the client secret", secs(5)),
        "{}",
        cs_daemon.log()
    );

    for daemon in [
        &mut imds_daemon,
        &mut app_daemon,
        &mut wi_daemon,
        &mut cs_daemon,
    ] {
        daemon.stop(secs(15));
    }
    for (daemon, secrets) in [
        (
            &imds_daemon,
            vec![imds_token.jwt.as_str(), &imds_token.signature],
        ),
        (
            &app_daemon,
            vec![app_token.jwt.as_str(), &app_token.signature, &app_header],
        ),
        (
            &wi_daemon,
            vec![
                wi_token.jwt.as_str(),
                &wi_token.signature,
                &first_sa,
                &rotated,
            ],
        ),
        (
            &cs_daemon,
            vec![cs_token.jwt.as_str(), &cs_token.signature, &client_secret],
        ),
    ] {
        assert_no_secret(&daemon.identity, &daemon.log(), &secrets);
    }

    // Refusals by the token endpoints: exit 3 with their reason.
    imds.answer(
        400,
        r#"{"error":"invalid_request","error_description":"Identity not found"}"#,
    );
    let mut daemon = launch(&imds_group, "no-identity", &storage("managed-identity", ""))
        .envs(&[("AZURE_POD_IDENTITY_AUTHORITY_HOST", &imds.url())])
        .spawn();
    let log = refused(&mut daemon, 3);
    assert!(log.contains("Identity not found"), "{log}");
    entra.answer(
        401,
        r#"{"error":"invalid_client","error_description":"AADSTS700016: Application not found"}"#,
    );
    let mut daemon = workload("no-app").spawn();
    let log = refused(&mut daemon, 3);
    assert!(log.contains("401"), "{log}");
}
