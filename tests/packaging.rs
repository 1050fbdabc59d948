//! What can be checked here of the files that cannot run here (no Docker engine): the Compose
//! file parses and names the services the README promises, and every config shipped in the
//! repository passes leasehold's own validation.

mod common;

use common::manifest_dir;
use leasehold::config::Config;
use std::path::Path;
use yaml_rust2::{Yaml, YamlLoader};

fn validate(path: &Path, text: &str) {
    let config = Config::parse(path, text).unwrap_or_else(|e| panic!("{e}"));
    config
        .validate(&|_| None)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

#[test]
fn shipped_configs_are_valid() {
    let dir = manifest_dir().join("config");
    let key_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(key_file.path(), common::EMULATOR_KEY).unwrap();
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        // Secret files named by the examples do not exist here; stand in a real-looking key.
        let text = std::fs::read_to_string(&path).unwrap().replace(
            "/run/secrets/storage-key",
            key_file.path().to_str().unwrap(),
        );
        validate(&path, &text);
        checked += 1;
    }
    assert!(
        checked >= 3,
        "config/ holds the Azurite, Azure and Compose examples"
    );
}

#[test]
fn compose_runs_azurite_and_three_replicas_with_a_valid_config() {
    let root = manifest_dir();
    let text = std::fs::read_to_string(root.join("docker-compose.yml")).unwrap();
    let doc = &YamlLoader::load_from_str(&text).expect("docker-compose.yml parses")[0];
    let services = &doc["services"];

    let image = services["azurite"]["image"]
        .as_str()
        .expect("azurite image");
    assert!(image.ends_with(":3.35.0"), "Azurite is pinned: {image}");
    let command: Vec<&str> = services["azurite"]["command"]
        .as_vec()
        .unwrap()
        .iter()
        .filter_map(Yaml::as_str)
        .collect();
    assert!(command.contains(&"--disableTelemetry"), "{command:?}");

    let shared = &doc["x-leasehold"];
    let volume = shared["volumes"][0].as_str().expect("config volume");
    let (host, container) = volume.split_once(':').unwrap();
    let container = container.trim_end_matches(":ro");
    let config = root.join(host.trim_start_matches("./"));
    validate(&config, &std::fs::read_to_string(&config).unwrap());

    for n in 1..=3 {
        let name = format!("leasehold-{n}");
        let service = &services[name.as_str()];
        assert!(!service.is_badvalue(), "service {name} exists");
        let command: Vec<&str> = service["command"]
            .as_vec()
            .unwrap()
            .iter()
            .filter_map(Yaml::as_str)
            .collect();
        assert_eq!(&command[..3], ["run", "-c", container], "{name}");
        assert_eq!(
            command.last(),
            Some(&name.as_str()),
            "{name} has its own identity"
        );
    }
    let grace = shared["stop_grace_period"].as_str().unwrap();
    assert_eq!(
        grace, "15s",
        "longer than stop_timeout, so the child stops before the lease goes"
    );
}

#[test]
fn the_image_runs_leasehold_as_an_unprivileged_user() {
    let text = std::fs::read_to_string(manifest_dir().join("Dockerfile")).unwrap();
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
}
