//! Where the storage credential comes from: each source, the rules, the errors, and what the
//! child is not given.

use super::super::testing::{GOOD, check_offline, load, no_env, refused, validate_with};
use super::*;
use crate::config::{Config, Overrides};
use crate::store::target::EMULATOR_KEY;

#[test]
fn blob_endpoint_connection_strings_work() {
    let text = GOOD.replace(
        "UseDevelopmentStorage=true",
        &format!(
            "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={EMULATOR_KEY};BlobEndpoint=http://127.0.0.1:12345/devstoreaccount1;"
        ),
    );
    let s = load(&text).unwrap();
    assert_eq!(
        s.group.storage.endpoint,
        "http://127.0.0.1:12345/devstoreaccount1"
    );
    assert_eq!(s.group.storage.account, "devstoreaccount1");
}

#[test]
fn real_account_connection_string_builds_the_public_endpoint() {
    let text = GOOD.replace(
        "UseDevelopmentStorage=true",
        &format!("DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={EMULATOR_KEY};EndpointSuffix=core.windows.net"),
    );
    let s = load(&text).unwrap();
    assert_eq!(
        s.group.storage.endpoint,
        "https://acct.blob.core.windows.net"
    );
}

#[test]
fn exactly_one_credential_source() {
    let env =
        |k: &str| (k == ENV_CONNECTION_STRING).then(|| "UseDevelopmentStorage=true".to_owned());
    let cfg = Config::parse(Path::new("t.toml"), GOOD).unwrap();
    let err = cfg.validate(&env).unwrap_err().to_string();
    assert!(err.contains("[storage].connection_string"), "{err}");
    assert!(err.contains(ENV_CONNECTION_STRING), "{err}");

    let none = GOOD.replace("connection_string = \"UseDevelopmentStorage=true\"\n", "");
    let err = refused(&none);
    assert!(err.contains("no storage credential"), "{err}");
}

#[test]
fn secrets_never_appear_in_errors() {
    let secret = "AccountName=a;AccountKey=c2VjcmV0c2VjcmV0c2VjcmV0;Bogus=hunter2";
    let text = GOOD.replace("UseDevelopmentStorage=true", secret);
    let err = refused(&text);
    assert!(
        !err.contains("hunter2") && !err.contains("c2VjcmV0"),
        "{err}"
    );
    let dbg = format!("{:?}", Config::parse(Path::new("t.toml"), &text).unwrap());
    assert!(!dbg.contains("c2VjcmV0"), "{dbg}");
}

#[test]
fn insecure_http_is_refused_off_loopback() {
    let text = GOOD.replace(
        "UseDevelopmentStorage=true",
        &format!("AccountName=a;AccountKey={EMULATOR_KEY};BlobEndpoint=http://azurite:10000/a"),
    );
    assert!(refused(&text).contains("allow_insecure_http"));
    let allowed = text.replace(
        "blob = \"svc\"",
        "blob = \"svc\"\nallow_insecure_http = true",
    );
    assert!(load(&allowed).is_ok());
}

/// A config with `[storage]` body `storage` and the witness-free child.
fn entra(storage: &str) -> String {
    format!("[storage]\n{storage}\nblob = \"svc\"\n[child]\ncommand = [\"true\"]\n")
}

fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k: &str| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
}

#[test]
fn managed_identity_targets_imds_or_the_app_service_endpoint() {
    let text = entra(
        "credential = \"managed-identity\"\naccount = \"acct\"\nclient_id = \"11111111-2222-3333-4444-555555555555\"",
    );
    let s = validate_with(&text, &no_env).unwrap();
    assert_eq!(
        s.group.storage.endpoint,
        "https://acct.blob.core.windows.net"
    );
    let Credential::Entra { kind, sources } = &s.group.storage.credential else {
        panic!("{:?}", s.group.storage.credential)
    };
    assert_eq!(*kind, EntraKind::ManagedIdentity);
    assert_eq!(
        sources,
        &[TokenSource::ManagedIdentity {
            endpoint: IdentityEndpoint::Imds(
                "http://169.254.169.254/metadata/identity/oauth2/token".into()
            ),
            client_id: Some("11111111-2222-3333-4444-555555555555".into()),
        }]
    );
    let app = env_of(&[
        (ENV_IDENTITY_ENDPOINT, "http://127.0.0.1:41000/msi/token"),
        (ENV_IDENTITY_HEADER, "h"),
    ]);
    let s = validate_with(&text, &app).unwrap();
    let Credential::Entra { sources, .. } = &s.group.storage.credential else {
        panic!()
    };
    assert!(matches!(
        &sources[0],
        TokenSource::ManagedIdentity { endpoint: IdentityEndpoint::AppService { url, .. }, .. }
            if url == "http://127.0.0.1:41000/msi/token"
    ));
}

#[test]
fn entra_id_needs_an_https_endpoint_and_an_account() {
    let http = entra(
        "credential = \"managed-identity\"\nendpoint = \"http://127.0.0.1:10000/devstoreaccount1\"",
    );
    let err = validate_with(&http, &no_env).unwrap_err().to_string();
    assert!(
        err.contains("[storage].endpoint") && err.contains("https"),
        "{err}"
    );
    let none = entra("credential = \"managed-identity\"");
    let err = validate_with(&none, &no_env).unwrap_err().to_string();
    assert!(err.contains("[storage].account"), "{err}");
    let bogus = entra("credential = \"magic\"\naccount = \"a\"");
    let err = validate_with(&bogus, &no_env).unwrap_err().to_string();
    assert!(
        err.contains("[storage].credential") && err.contains("managed-identity"),
        "{err}"
    );
}

#[test]
fn workload_identity_names_what_the_webhook_did_not_set() {
    let text = entra("credential = \"workload-identity\"\naccount = \"acct\"");
    let err = validate_with(&text, &env_of(&[(ENV_TENANT_ID, "t")]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(ENV_CLIENT_ID) && err.contains(ENV_FEDERATED_TOKEN_FILE),
        "{err}"
    );
    assert!(!err.contains(ENV_TENANT_ID), "{err}");
    assert!(err.contains("azure.workload.identity/use"), "{err}");

    let token = tempfile::NamedTempFile::new().unwrap();
    let file = token.path().to_str().unwrap();
    let env = env_of(&[
        (ENV_TENANT_ID, "t"),
        (ENV_CLIENT_ID, "from-env"),
        (ENV_FEDERATED_TOKEN_FILE, file),
    ]);
    let s = validate_with(&text, &env).unwrap();
    let Credential::Entra { sources, .. } = &s.group.storage.credential else {
        panic!()
    };
    assert_eq!(
        sources,
        &[TokenSource::WorkloadIdentity {
            tenant_id: "t".into(),
            client_id: "from-env".into(),
            token_file: token.path().to_owned(),
            authority_host: DEFAULT_AUTHORITY_HOST.into(),
        }]
    );
    let gone = env_of(&[
        (ENV_TENANT_ID, "t"),
        (ENV_CLIENT_ID, "c"),
        (ENV_FEDERATED_TOKEN_FILE, "/no/such/token"),
    ]);
    let err = validate_with(&text, &gone).unwrap_err().to_string();
    assert!(err.contains("/no/such/token"), "{err}");
}

#[test]
fn azure_cli_needs_az_and_default_chains_what_is_there() {
    let dir = tempfile::tempdir().unwrap();
    let cli = entra("credential = \"azure-cli\"\naccount = \"acct\"");
    let err = validate_with(&cli, &env_of(&[("PATH", dir.path().to_str().unwrap())]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("no az in PATH"), "{err}");
    let az = dir.path().join("az");
    std::fs::write(&az, "#!/bin/sh\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&az, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.path().to_str().unwrap();
    assert!(validate_with(&cli, &env_of(&[("PATH", path)])).is_ok());

    let default = entra("credential = \"default\"\naccount = \"acct\"");
    let env = env_of(&[
        ("PATH", path),
        (ENV_TENANT_ID, "t"),
        (ENV_CLIENT_ID, "c"),
        (ENV_CLIENT_SECRET, "s3cret"),
    ]);
    let s = validate_with(&default, &env).unwrap();
    let Credential::Entra { sources, .. } = &s.group.storage.credential else {
        panic!()
    };
    let names: Vec<&str> = sources.iter().map(TokenSource::name).collect();
    assert_eq!(names, ["client secret", "managed identity", "Azure CLI"]);
    assert!(
        s.child.remove_env.iter().any(|v| v == ENV_CLIENT_SECRET),
        "the consumed client secret does not reach the child"
    );
    assert!(!format!("{s:?}").contains("s3cret"));
}

#[test]
fn two_sources_are_both_named_and_client_id_needs_an_identity() {
    let text = entra("credential = \"managed-identity\"\naccount = \"acct\"");
    let err = validate_with(&text, &env_of(&[(ENV_ACCOUNT_KEY, EMULATOR_KEY)]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("[storage].credential = \"managed-identity\"")
            && err.contains(ENV_ACCOUNT_KEY),
        "{err}"
    );
    assert!(!err.contains(EMULATOR_KEY), "{err}");
    let stray = GOOD.replace("blob = \"svc\"", "blob = \"svc\"\nclient_id = \"x\"");
    let err = refused(&stray);
    assert!(err.contains("[storage].client_id"), "{err}");
}

#[test]
fn ca_file_must_hold_a_certificate() {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), "not a certificate").unwrap();
    let text = GOOD.replace(
        "blob = \"svc\"",
        &format!("blob = \"svc\"\nca_file = {:?}", file.path()),
    );
    let err = refused(&text);
    assert!(
        err.contains("[storage].ca_file") && err.contains("PEM"),
        "{err}"
    );
    let missing = GOOD.replace("blob = \"svc\"", "blob = \"svc\"\nca_file = \"/no/ca.pem\"");
    let err = refused(&missing);
    assert!(err.contains("/no/ca.pem"), "{err}");
}

#[test]
fn secrets_readable_by_others_are_warned_about() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    std::fs::write(&key, "c2VjcmV0c2VjcmV0c2VjcmV0").unwrap();
    let text = entra(&format!("account = \"a\"\naccess_key_file = {key:?}"));
    for (mode, warned) in [(0o644, true), (0o640, true), (0o600, false), (0o400, false)] {
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(mode)).unwrap();
        let s = validate_with(&text, &no_env).unwrap();
        assert_eq!(
            !s.group.warnings.is_empty(),
            warned,
            "mode {mode:o}: {:?}",
            s.group.warnings
        );
    }

    // The config file itself, when it holds a real connection string.
    let config = dir.path().join("leasehold.toml");
    let real = GOOD.replace(
        "UseDevelopmentStorage=true",
        "AccountName=a;AccountKey=c2VjcmV0c2VjcmV0c2VjcmV0",
    );
    std::fs::write(&config, &real).unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
    let s = check_offline(Some(&config), &Overrides::default(), &no_env).unwrap();
    assert!(
        s.group
            .warnings
            .iter()
            .any(|w| w.contains("leasehold.toml")),
        "{:?}",
        s.group.warnings
    );
    assert!(
        !s.group.warnings.iter().any(|w| w.contains("c2VjcmV0")),
        "{:?}",
        s.group.warnings
    );
    // Azurite's published key is no secret.
    std::fs::write(&config, GOOD).unwrap();
    let s = check_offline(Some(&config), &Overrides::default(), &no_env).unwrap();
    assert!(s.group.warnings.is_empty(), "{:?}", s.group.warnings);
}

#[test]
fn the_child_loses_every_storage_variable_unless_it_inherits_them() {
    let s = load(GOOD).unwrap();
    for var in STORAGE_ENV_VARS {
        assert!(s.child.remove_env.iter().any(|v| v == var), "{var}");
    }
    let inherit = GOOD.replace(
        "command = [\"true\"]",
        "command = [\"true\"]\ninherit_storage_credentials = true",
    );
    let kept = load(&inherit).unwrap().child.remove_env;
    assert!(
        !STORAGE_ENV_VARS
            .iter()
            .any(|var| kept.iter().any(|v| v == var)),
        "{kept:?}"
    );
    // leasehold's own settings are never the child's.
    assert!(
        kept.iter().any(|v| v == "LEASEHOLD_HTTP_LISTEN"),
        "{kept:?}"
    );
}

#[test]
fn a_sas_in_the_endpoint_is_refused_without_being_shown() {
    let text = entra(&format!(
        "endpoint = \"https://acct.blob.core.windows.net/?sv=2022-11-02&sig=c2VjcmV0\"\naccess_key_file = {:?}",
        "/dev/null"
    ));
    let key = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(key.path(), EMULATOR_KEY).unwrap();
    let text = text.replace("/dev/null", key.path().to_str().unwrap());
    let err = validate_with(&text, &no_env).unwrap_err().to_string();
    assert!(err.contains("query string"), "{err}");
    assert!(!err.contains("c2VjcmV0"), "{err}");
    let cs = GOOD.replace(
        "UseDevelopmentStorage=true",
        &format!("AccountName=a;AccountKey={EMULATOR_KEY};BlobEndpoint=https://a.blob.core.windows.net/?sig=c2VjcmV0"),
    );
    let err = refused(&cs);
    assert!(
        err.contains("query string") && !err.contains("c2VjcmV0"),
        "{err}"
    );
}

/// The flags of the `*_file` keys take the keys' path: the same checks, the same
/// credential, and errors that name the flag.
#[test]
fn credential_flags_are_the_keys_by_another_name() {
    let env = |vars: &[(&str, &str)]| env_of(vars);
    let key = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(key.path(), EMULATOR_KEY).unwrap();
    let run = |o: Overrides, vars: &[(&str, &str)]| {
        let o = Overrides {
            blob: Some("b".into()),
            command: vec!["true".into()],
            ..o
        };
        Config::without_file(&o).validate(&env(vars))
    };
    let by_flag = Overrides {
        access_key_file: Some(key.path().to_owned()),
        account: Some("acct".into()),
        ..Overrides::default()
    };
    let s = run(by_flag.clone(), &[]).unwrap();
    assert!(matches!(
        s.group.storage.credential,
        Credential::AccessKey(_)
    ));
    assert_eq!(
        s.group.storage.endpoint,
        "https://acct.blob.core.windows.net"
    );
    let text = format!(
        "[storage]\naccount = \"acct\"\naccess_key_file = {:?}\nblob = \"b\"\n[child]\ncommand = [\"true\"]\n",
        key.path()
    );
    assert_eq!(
        format!("{:?}", load(&text).unwrap().group.storage),
        format!("{:?}", s.group.storage),
        "the flag and the key give the same target"
    );

    let twice = run(
        by_flag,
        &[(ENV_CONNECTION_STRING, "UseDevelopmentStorage=true")],
    );
    let err = twice.unwrap_err().to_string();
    assert!(
        err.contains("--access-key-file, and AZURE_STORAGE_CONNECTION_STRING from the environment"),
        "{err}"
    );
    let no_account = Overrides {
        sas_token_file: Some(key.path().to_owned()),
        ..Overrides::default()
    };
    let err = run(no_account, &[]).unwrap_err().to_string();
    assert!(
        err.starts_with("--account is missing: --sas-token-file needs"),
        "{err}"
    );
    let entra = Overrides {
        credential: Some(EntraKind::WorkloadIdentity),
        account: Some("acct".into()),
        ..Overrides::default()
    };
    let err = run(entra, &[]).unwrap_err().to_string();
    assert!(
        err.starts_with("--credential workload-identity needs AZURE_TENANT_ID"),
        "{err}"
    );
    let err = run(Overrides::default(), &[]).unwrap_err().to_string();
    assert!(err.contains("or pass --connection-string-file"), "{err}");
}

/// The Kubernetes manifests' config (the ConfigMap of deploy/kubernetes/configmap.yaml) takes
/// its credential from AKS workload identity alone, with the variables its webhook sets
/// (tests/it/packaging.rs checks the rest of the manifests through `leasehold check`).
#[test]
fn the_shipped_kubernetes_config_uses_workload_identity() {
    let manifest = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/kubernetes/configmap.yaml"
    ))
    .unwrap();
    let doc = &yaml_rust2::YamlLoader::load_from_str(&manifest).unwrap()[0];
    let toml = doc["data"]["leasehold.toml"]
        .as_str()
        .expect("leasehold.toml");
    let token = tempfile::NamedTempFile::new().unwrap();
    let token_file = token.path().to_str().unwrap().to_owned();
    let webhook = |name: &str| match name {
        "AZURE_TENANT_ID" => Some("72f988bf-86f1-41af-91ab-2d7cd011db47".to_owned()),
        "AZURE_CLIENT_ID" => Some("00000000-0000-0000-0000-000000000000".to_owned()),
        "AZURE_FEDERATED_TOKEN_FILE" => Some(token_file.clone()),
        "AZURE_AUTHORITY_HOST" => Some("https://login.microsoftonline.com/".to_owned()),
        _ => None,
    };
    let group = Config::parse(Path::new("leasehold.toml"), toml)
        .unwrap()
        .validate_group(&webhook)
        .unwrap();
    assert!(
        matches!(&group.storage.credential, Credential::Entra { sources, .. }
            if matches!(sources[..], [TokenSource::WorkloadIdentity { .. }])),
        "{:?}",
        group.storage.credential
    );
}
