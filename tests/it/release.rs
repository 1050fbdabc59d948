//! The release's names agree: the image the release workflow pushes is the one the README, the
//! Dockerfile and the Kubernetes manifests name (at this version), and the archives the README
//! installs are the ones the workflow builds (`cargo xtask dist` names them, and `.ci/run`
//! builds and checks the x86_64 one).

use leasehold_testkit::workspace_root;
use yaml_rust2::{Yaml, YamlLoader};

/// The crate's version, which the tag, the archives and the image tag carry.
const VERSION: &str = env!("CARGO_PKG_VERSION");

fn read(path: &str) -> String {
    std::fs::read_to_string(workspace_root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn release_workflow() -> Yaml {
    YamlLoader::load_from_str(&read(".github/workflows/release.yml"))
        .expect("release.yml parses")
        .remove(0)
}

/// Every `ghcr.io/...` image name in `text`.
fn ghcr_names(text: &str) -> Vec<&str> {
    text.match_indices("ghcr.io/")
        .map(|(at, _)| {
            let rest = &text[at..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || "./-_".contains(c)))
                .unwrap_or(rest.len());
            rest[..end].trim_end_matches('.')
        })
        .collect()
}

#[test]
fn one_image_name_in_the_workflow_readme_dockerfile_and_manifests() {
    let workflow = release_workflow();
    let image = workflow["env"]["IMAGE"].as_str().expect("env: IMAGE");
    let repository = env!("CARGO_PKG_REPOSITORY");
    let owner_and_name = repository
        .strip_prefix("https://github.com/")
        .expect("a GitHub repository");
    assert_eq!(
        image,
        format!("ghcr.io/{owner_and_name}"),
        "the image is named after the repository (Cargo.toml's repository)"
    );

    let readme = read("README.md");
    assert!(
        readme.contains(&format!("docker pull {image}:{VERSION}")),
        "the README pulls {image}:{VERSION}"
    );
    let kustomization = YamlLoader::load_from_str(&read("deploy/kubernetes/kustomization.yaml"))
        .unwrap()
        .remove(0);
    let leasehold = kustomization["images"]
        .as_vec()
        .expect("images:")
        .iter()
        .find(|i| i["name"].as_str() == Some("leasehold"))
        .expect("kustomization.yaml sets the leasehold image");
    assert_eq!(leasehold["newName"].as_str(), Some(image));
    assert_eq!(
        leasehold["newTag"].as_str(),
        Some(VERSION),
        "the manifests use this version's image"
    );
    let dockerfile = read("Dockerfile");
    assert!(
        dockerfile.contains(image),
        "the Dockerfile names the image it publishes"
    );
    // No other name anywhere users read one.
    let mut files = vec![
        "README.md".to_owned(),
        "Dockerfile".to_owned(),
        "docker-compose.yml".to_owned(),
    ];
    for dir in ["docs", "deploy/kubernetes", "deploy/systemd", "config"] {
        for entry in std::fs::read_dir(workspace_root().join(dir)).unwrap() {
            files.push(format!(
                "{dir}/{}",
                entry.unwrap().file_name().to_string_lossy()
            ));
        }
    }
    for file in files {
        for name in ghcr_names(&read(&file)) {
            assert_eq!(name, image, "{file} names another image");
        }
    }
}

#[test]
fn the_readme_installs_the_archives_the_release_workflow_builds() {
    let workflow = release_workflow();
    let tags = workflow["on"]["push"]["tags"].as_vec().expect("on a tag");
    assert!(
        tags.iter()
            .all(|t| t.as_str().is_some_and(|t| t.starts_with('v'))),
        "version tags are v<version>"
    );
    let steps = workflow["jobs"]["dist"]["steps"].as_vec().expect("dist");
    let dist = steps
        .iter()
        .filter_map(|s| s["run"].as_str())
        .find(|run| run.contains("cargo xtask dist"))
        .expect("the dist job runs cargo xtask dist");
    let built: Vec<&str> = dist
        .split_whitespace()
        .skip_while(|w| *w != "--target")
        .filter(|w| *w != "--target")
        .collect();
    for target in [
        "x86_64-unknown-linux-gnu",
        "aarch64-unknown-linux-gnu",
        "x86_64-unknown-linux-musl",
        "aarch64-unknown-linux-musl",
    ] {
        assert!(built.contains(&target), "the workflow builds {target}");
    }

    // The README's one-liner: the version, a target the workflow builds, and the download URL
    // of GitHub's release assets for the tag, with the archive's name as xtask writes it.
    let readme = read("README.md");
    let line = readme
        .lines()
        .find(|l| l.starts_with("v=") && l.contains(" t="))
        .expect("the README's install lines set v= and t=");
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        words[0],
        format!("v={VERSION}"),
        "the README installs this version"
    );
    let target = words[1].strip_prefix("t=").unwrap();
    assert!(built.contains(&target), "{target} is built by the workflow");
    for other in line.split(|c: char| c.is_whitespace() || c == ';' || c == '=') {
        if other.ends_with("-linux-gnu") || other.ends_with("-linux-musl") {
            assert!(built.contains(&other), "{other} is built by the workflow");
        }
    }
    let url = format!(
        "{}/releases/download/v$v/leasehold-$v-$t.tar.gz{{,.sha256}}",
        env!("CARGO_PKG_REPOSITORY")
    );
    assert!(readme.contains(&url), "the README downloads {url}");
    let xtask = read("xtask/src/main.rs");
    assert!(
        xtask.contains(r#"format!("leasehold-{version}-{target}")"#),
        "xtask names the archives leasehold-<version>-<target>"
    );
    assert!(
        readme.contains("cargo install leasehold --locked"),
        "the README names the crate's install"
    );
}
