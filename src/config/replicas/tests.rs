//! `[[storage.replica]]`: the tables parsed into one target per account, and each rule of the
//! set refused with its one line.

use super::super::testing::{load, no_env};
use super::*;
use crate::config::{Group, Overrides};
use crate::store::target::{Credential, EMULATOR_KEY, EntraKind};
use std::path::Path;

/// A connection string for Azurite's well-known account on `port`.
fn cs(port: u16) -> String {
    format!(
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={EMULATOR_KEY};\
         BlobEndpoint=http://127.0.0.1:{port}/devstoreaccount1"
    )
}

/// `n` replica tables, one Azurite account each, on ports 10001, 10002...
fn replicas(n: u16) -> String {
    (1..=n)
        .map(|i| {
            format!(
                "[[storage.replica]]\nconnection_string = {:?}\n",
                cs(10000 + i)
            )
        })
        .collect()
}

/// A config: `storage` is `[storage]`'s body after its blob, `tables` the replica tables, `rest`
/// the sections after them.
fn config(storage: &str, tables: &str, rest: &str) -> String {
    format!(
        "identity = \"worker-1\"\n[storage]\nblob = \"svc\"\n{storage}\n{tables}\
         [child]\ncommand = [\"true\"]\n{rest}"
    )
}

fn group_with(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Group, ConfigError> {
    Config::parse(Path::new("t.toml"), text)?.validate_group(env)
}

fn group(text: &str) -> Result<Group, ConfigError> {
    group_with(text, &no_env)
}

/// The one line `check` refuses `text` with.
fn refused(text: &str) -> String {
    let line = group(text).expect_err("refused").to_string();
    assert_eq!(line.lines().count(), 1, "{line}");
    line
}

fn key_file(dir: &Path, name: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, EMULATOR_KEY).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// Every credential path of `[storage]` works in a replica's table, each replica its own
/// account; the container, the blob and `create_if_missing` are `[storage]`'s.
#[test]
fn each_replica_is_an_account_with_a_credential_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "key");
    let sas = dir.path().join("sas");
    std::fs::write(&sas, "?sv=2024-01-01&sp=rwd&sig=c2lnbmF0dXJl").unwrap();
    std::fs::set_permissions(&sas, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let cs_file = dir.path().join("cs");
    std::fs::write(&cs_file, cs(10003)).unwrap();
    let tables = format!(
        "[[storage.replica]]\nconnection_string = {:?}\n\
         [[storage.replica]]\naccount = \"east\"\naccess_key_file = {key:?}\n\
         [[storage.replica]]\nconnection_string_file = {cs_file:?}\n\
         [[storage.replica]]\nendpoint = \"https://west.blob.core.windows.net\"\nsas_token_file = {sas:?}\n\
         [[storage.replica]]\naccount = \"north\"\ncredential = \"managed-identity\"\nclient_id = \"c1\"\n",
        cs(10001)
    );
    let text = config(
        "container = \"locks\"\ncreate_if_missing = false",
        &tables,
        "",
    );
    let g = group(&text).unwrap();
    let shown: Vec<(&str, &str, String)> = g
        .replicas
        .iter()
        .map(|t| (t.account(), t.endpoint(), t.credential().describe()))
        .collect();
    assert_eq!(
        shown,
        [
            (
                "devstoreaccount1",
                "http://127.0.0.1:10001/devstoreaccount1",
                "account key".to_owned()
            ),
            (
                "east",
                "https://east.blob.core.windows.net",
                "account key".to_owned()
            ),
            (
                "devstoreaccount1",
                "http://127.0.0.1:10003/devstoreaccount1",
                "account key".to_owned()
            ),
            (
                "west",
                "https://west.blob.core.windows.net",
                "SAS token".to_owned()
            ),
            (
                "north",
                "https://north.blob.core.windows.net",
                "Entra ID (managed-identity)".to_owned()
            ),
        ]
    );
    assert!(matches!(
        &g.replicas[4].credential,
        Credential::Entra {
            kind: EntraKind::ManagedIdentity,
            ..
        }
    ));
    for t in &g.replicas {
        assert_eq!((t.container(), t.blob()), ("locks", "svc"));
        assert!(!t.creates_if_missing());
    }
    assert_eq!(g.storage.endpoint(), g.replicas[0].endpoint());
    assert!(g.warnings.is_empty(), "{:?}", g.warnings);
}

/// One `[storage]` and no replicas: what it always was, with no replica.
#[test]
fn one_storage_account_has_no_replicas() {
    let text = config("connection_string = \"UseDevelopmentStorage=true\"", "", "");
    let settings = load(&text).unwrap();
    assert!(settings.group.replicas.is_empty());
    assert_eq!(settings.group.storage.account(), "devstoreaccount1");
}

/// `run` (and the library) takes a group of replicas as `check`, `status` and `break` do.
#[test]
fn run_takes_replicas() {
    let text = config("", &replicas(3), "");
    let settings = load(&text).expect("taken");
    assert_eq!(settings.group.replicas.len(), 3);
    assert_eq!(
        settings.group.storage.endpoint,
        settings.group.replicas[0].endpoint
    );
}

/// The set's fingerprint names each account by its endpoint, letter case aside, in the order of
/// the tables: another order is another set.
#[test]
fn the_replica_set_is_the_endpoints_in_order() {
    let g = group(&config("", &replicas(3), "")).unwrap();
    let set = crate::config::replica_set(&g.replicas).expect("a set of three");
    assert_eq!((set.len(), set.majority()), (3, 2));
    let mut shouted = g.replicas.clone();
    for t in &mut shouted {
        t.endpoint = t.endpoint.to_ascii_uppercase();
    }
    let same = crate::config::replica_set(&shouted).unwrap();
    assert_eq!(same.fingerprint(), set.fingerprint());
    let mut turned = g.replicas.clone();
    turned.swap(0, 2);
    let other = crate::config::replica_set(&turned).unwrap();
    assert_ne!(other.fingerprint(), set.fingerprint());
    assert!(crate::config::replica_set(&[]).is_none());
}

#[test]
fn three_or_five_replicas() {
    assert_eq!(
        group(&config("", &replicas(5), "")).unwrap().replicas.len(),
        5
    );
    let lines = [
        (
            1,
            "t.toml: [[storage.replica]] = 1 table: must be 3 or 5: one account is no quorum: \
             configure it in [storage] itself, without [[storage.replica]], or add two more",
        ),
        (
            2,
            "t.toml: [[storage.replica]] = 2 tables: must be 3 or 5: a majority of 2 is 2, so 2 \
             accounts survive no account down, no more than 1 does; use 3 (one may be down) or 5 \
             (two may)",
        ),
        (
            4,
            "t.toml: [[storage.replica]] = 4 tables: must be 3 or 5: a majority of 4 is 3, so 4 \
             accounts survive one account down, no more than 3 do; use 3 (one may be down) or 5 \
             (two may)",
        ),
        (
            6,
            "t.toml: [[storage.replica]] = 6 tables: must be 3 or 5: a majority of 6 is 4, so 6 \
             accounts survive 2 accounts down, no more than 5 do; use 3 (one may be down) or 5 \
             (two may)",
        ),
        (
            7,
            "t.toml: [[storage.replica]] = 7 tables: must be 3 or 5: 7 accounts would survive 3 \
             down, but every lease operation goes to each of them; 5 survive two regions down: \
             use 3 or 5",
        ),
    ];
    for (n, line) in lines {
        assert_eq!(refused(&config("", &replicas(n), "")), line, "{n}");
    }
}

#[test]
fn slots_with_replicas_are_refused() {
    let text = config("", &replicas(3), "[lease]\nslots = 2\n");
    assert_eq!(
        refused(&text),
        "t.toml: [lease].slots = 2: slots with replicas are not supported: remove slots (one \
         leader, on a majority of the [[storage.replica]] accounts), or the replicas (slots on \
         one [storage] account)"
    );
    let one = config("", &replicas(3), "[lease]\nslots = 1\n");
    assert!(group(&one).is_ok());
}

/// One account listed twice would count twice: the same endpoint and account, however the
/// replicas name them (a connection string, an account and a key; letter case aside).
#[test]
fn an_account_listed_twice_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "key");
    let tables = format!(
        "{}[[storage.replica]]\nendpoint = \"http://127.0.0.1:10001/DevStoreAccount1/\"\n\
         account = \"devstoreaccount1\"\naccess_key_file = {key:?}\n",
        replicas(2)
    );
    assert_eq!(
        refused(&config("", &tables, "")),
        "t.toml: [storage.replica 3] = account \"devstoreaccount1\" at \
         \"http://127.0.0.1:10001/DevStoreAccount1\": the same account as [storage.replica 1]: \
         each replica must be an account of its own (one listed twice would count twice \
         towards the majority); name another account, or remove this table"
    );
    // Another account at the same endpoint, or the same account name at another endpoint (an
    // Azurite of its own), is another account.
    let tables = format!(
        "{}[[storage.replica]]\nendpoint = \"http://127.0.0.1:10001/other\"\n\
         account = \"other\"\naccess_key_file = {key:?}\n",
        replicas(2)
    );
    assert!(group(&config("", &tables, "")).is_ok());
}

/// With replicas, `[storage]` keeps what they share: an account or credential of its own,
/// from the file, a flag or a standard variable, could be any replica's.
#[test]
fn storage_names_no_account_beside_replicas() {
    let text = config(
        "account = \"a\"\nconnection_string = \"UseDevelopmentStorage=true\"",
        &replicas(3),
        "",
    );
    assert_eq!(
        refused(&text),
        "t.toml: [storage].connection_string, [storage].account beside [[storage.replica]]: with \
         replicas each account and its credential go in its own [[storage.replica]] table, and \
         [storage] keeps only what they share (container, blob, create_if_missing); move them \
         into the replica tables, or remove the replicas to use one account"
    );
    for key in ["ca_file = \"/ca.pem\"", "allow_insecure_http = true"] {
        let line = refused(&config(key, &replicas(3), ""));
        let name = key.split(' ').next().unwrap();
        assert!(
            line.starts_with(&format!(
                "t.toml: [storage].{name} beside [[storage.replica]]: "
            )) && line.contains("move it into"),
            "{line}"
        );
    }

    let path = std::env::temp_dir().join(format!("replicas-{}.toml", std::process::id()));
    std::fs::write(&path, config("", &replicas(3), "")).unwrap();
    let by_flag = Overrides {
        account: Some("a".into()),
        ..Overrides::default()
    };
    let loaded = Config::load(&path, &by_flag).unwrap();
    let line = loaded.validate_group(&no_env).unwrap_err().to_string();
    std::fs::remove_file(&path).unwrap();
    assert!(
        line.starts_with(&format!(
            "{}: --account beside [[storage.replica]]: ",
            path.display()
        )),
        "{line}"
    );

    let env = |name: &str| (name == "AZURE_STORAGE_KEY").then(|| EMULATOR_KEY.to_owned());
    let line = group_with(&config("", &replicas(3), ""), &env)
        .unwrap_err()
        .to_string();
    assert_eq!(
        line,
        "t.toml: AZURE_STORAGE_KEY from the environment beside [[storage.replica]]: with \
         replicas each account and its credential come from its own table, never from a \
         variable; start leasehold without it (`env -u AZURE_STORAGE_KEY leasehold ...`, or \
         unset it where leasehold is started), or remove the replicas"
    );
}

/// A replica's own rules are `[storage]`'s, and its lines name its table.
#[test]
fn a_replicas_errors_name_its_table() {
    let cases = [
        (
            "",
            "t.toml: no storage credential is configured in [storage.replica 2]; set its \
             connection_string, connection_string_file, access_key_file, sas_token_file or \
             credential (Entra ID): each replica names its own",
        ),
        (
            "acount = \"a\"",
            "t.toml:8:1: [storage.replica 2].acount: unknown key, expected one of `connection_string`",
        ),
        (
            "credential = \"managed-identity\"",
            "t.toml: [storage.replica 2].account is missing: [storage.replica 2].credential = \
             \"managed-identity\" needs the storage account: set [storage.replica 2].account or \
             [storage.replica 2].endpoint",
        ),
        (
            "credential = \"managed-identity\"\nendpoint = \"http://127.0.0.1:10000/acct\"",
            "t.toml: [storage.replica 2].endpoint = \"http://127.0.0.1:10000/acct\": credential \
             \"managed-identity\" needs an https endpoint",
        ),
        (
            &format!(
                "connection_string = {:?}",
                cs(1).replace("127.0.0.1", "azurite")
            ),
            "t.toml: [storage.replica 2].endpoint = \"http://azurite:1/devstoreaccount1\": plain \
             http to a non-loopback host would send credentials unencrypted; use https, or set \
             [storage.replica 2].allow_insecure_http = true on a closed test network",
        ),
        (
            &format!(
                "connection_string = {:?}\ncredential = \"azure-cli\"",
                cs(10002)
            ),
            "t.toml: more than one storage credential is configured \
             ([storage.replica 2].connection_string, [storage.replica 2].credential = \
             \"azure-cli\"); keep exactly one",
        ),
        (
            &format!("connection_string = {:?}\naccount = \"a\"", cs(10002)),
            "t.toml: [storage.replica 2].connection_string already names the account and \
             endpoint; remove [storage.replica 2].account and [storage.replica 2].endpoint",
        ),
    ];
    for (second, line) in cases {
        let tables = format!(
            "[[storage.replica]]\nconnection_string = {:?}\n[[storage.replica]]\n{second}\n{}",
            cs(10001),
            replicas(3)
                .split_inclusive('\n')
                .skip(4)
                .collect::<String>()
        );
        let text = config("", &tables, "");
        let got = refused(&text);
        assert!(got.starts_with(line), "{second}:\n{got}\nnot\n{line}");
    }
    // One `[storage.replica]` table is not the array of them.
    let single = config("", "[storage.replica]\naccount = \"a\"\n", "");
    assert_eq!(
        refused(&single),
        "t.toml:5:1: [storage].replica: invalid type: map, expected a sequence: write each \
         replica's table as [[storage.replica]]"
    );
    // A replica with allow_insecure_http = true of its own reaches a plain-http host.
    let tables = format!(
        "{}[[storage.replica]]\nconnection_string = {:?}\nallow_insecure_http = true\n",
        replicas(2),
        cs(1).replace("127.0.0.1", "azurite")
    );
    assert!(group(&config("", &tables, "")).is_ok());
}

/// Never a secret: not in an error, not in the config's or the group's `Debug`.
#[test]
fn a_replicas_secret_never_shows() {
    let secret = "AccountName=a;AccountKey=c2VjcmV0c2VjcmV0c2VjcmV0;Bogus=hunter2";
    let tables = format!(
        "{}[[storage.replica]]\nconnection_string = {secret:?}\n",
        replicas(2)
    );
    let text = config("", &tables, "");
    let line = refused(&text);
    assert!(
        line.contains("[storage.replica 3].connection_string"),
        "{line}"
    );
    assert!(
        !line.contains("hunter2") && !line.contains("c2VjcmV0"),
        "{line}"
    );
    let parsed = Config::parse(Path::new("t.toml"), &text).unwrap();
    let debug = format!("{parsed:?}");
    assert!(!debug.contains("c2VjcmV0"), "{debug}");

    let good = config("", &replicas(3), "");
    let debug = format!("{:?}", group(&good).unwrap());
    assert!(!debug.contains(&EMULATOR_KEY[..12]), "{debug}");
    let line = refused(&config("", &format!("{}{}", replicas(3), replicas(1)), ""));
    assert!(!line.contains(&EMULATOR_KEY[..12]), "{line}");
}

/// A replica's secret file that others can read is warned about under its table's key; so is
/// a config file holding a replica's real connection string.
#[test]
fn a_replicas_secret_readable_by_others_is_warned_about() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path(), "key");
    std::fs::write(&key, "c2VjcmV0c2VjcmV0c2VjcmV0").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let tables = format!(
        "{}[[storage.replica]]\naccount = \"a\"\naccess_key_file = {key:?}\n",
        replicas(2)
    );
    let g = group(&config("", &tables, "")).unwrap();
    assert_eq!(g.warnings.len(), 1, "{:?}", g.warnings);
    assert!(
        g.warnings[0].starts_with("[storage.replica 3].access_key_file "),
        "{:?}",
        g.warnings
    );

    let path = dir.path().join("leasehold.toml");
    let real = "AccountName=a;AccountKey=c2VjcmV0c2VjcmV0c2VjcmV0";
    let tables = format!(
        "{}[[storage.replica]]\nconnection_string = {real:?}\n",
        replicas(2)
    );
    std::fs::write(&path, config("", &tables, "")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let loaded = Config::load(&path, &Overrides::default()).unwrap();
    let g = loaded.validate_group(&no_env).unwrap();
    assert!(
        g.warnings.iter().any(|w| w.contains("leasehold.toml")),
        "{:?}",
        g.warnings
    );
}
