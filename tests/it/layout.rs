//! The shape of the code (docs/development.md, "Layout"): in the crate (`src/`), the core
//! (`leasehold-core/src/`), the test kit (`testkit/src/`) and the quorum model
//! (`models/quorum/src/`), no import circles and no imports running back up to an ancestor's own
//! file (`lib.rs`, a `mod.rs`, `a.rs` for `a/b.rs`); no file in `src/` over 800 lines; comments
//! that point into the repository, not to a design document outside it. The reading of the
//! source is the kit's (`testkit/src/layout.rs`, whose own tests show on made-up crates that it
//! finds each of them).
//!
//! `cargo test --test it layout -- --nocapture` prints every arrow and every finding.

use leasehold_testkit::layout::{Finding, Layout, lines_containing, long_files};
use leasehold_testkit::workspace_root;

/// The most lines a file in `src/` may have.
const MAX_LINES: usize = 800;

#[test]
fn no_import_circles_no_climbs_no_long_files() {
    let root = workspace_root();
    let mut found: Vec<Finding> = Vec::new();
    for (name, lib) in [
        ("the crate", "src/lib.rs"),
        ("the core", "leasehold-core/src/lib.rs"),
        ("the test kit", "testkit/src/lib.rs"),
        ("the quorum model", "models/quorum/src/lib.rs"),
    ] {
        let layout = Layout::read(&root, lib);
        let arrows = layout.arrows();
        println!(
            "{name}: {} module files, {} arrows",
            layout.uses.len(),
            arrows.len()
        );
        for arrow in &arrows {
            println!("  {arrow}");
        }
        assert!(
            layout.unresolved.is_empty(),
            "{name}: paths the layout check cannot follow (teach testkit/src/layout.rs, or write \
             them plainly): {:#?}",
            layout.unresolved
        );
        found.extend(layout.findings());
    }
    found.extend(long_files(&root, "src", MAX_LINES));
    found.extend(long_files(&root, "leasehold-core/src", MAX_LINES));
    println!("{} findings:", found.len());
    for f in &found {
        println!("  {f}");
    }
    let found: Vec<String> = found.iter().map(|f| f.to_string()).collect();
    assert!(
        found.is_empty(),
        "the layout broke its rules:\n  {}",
        found.join("\n  ")
    );
}

/// The core does no I/O, keeps no clock and draws no random numbers: its dependencies are the
/// few that do none of these (`cargo tree -p leasehold-core -e normal` shows the whole tree;
/// .ci/run checks it for the runtime, the SDK, HTTP and the OS), and it forbids `unsafe`.
#[test]
fn the_core_depends_on_nothing_that_does_io() {
    let root = workspace_root();
    let manifest = std::fs::read_to_string(root.join("leasehold-core/Cargo.toml")).unwrap();
    let manifest: toml::Table = manifest.parse().unwrap();
    let deps: Vec<&String> = manifest["dependencies"]
        .as_table()
        .unwrap()
        .keys()
        .collect();
    println!("the core's dependencies: {deps:?}");
    assert!(!deps.is_empty(), "the manifest was read");
    let allowed = ["humantime", "thiserror"];
    let others: Vec<&&String> = deps
        .iter()
        .filter(|d| !allowed.contains(&d.as_str()))
        .collect();
    assert!(
        others.is_empty(),
        "leasehold-core depends on {others:?}: the core takes no dependency that does I/O, keeps \
         time or draws random numbers (docs/development.md, \"The core and the shell\")"
    );
    let lib = std::fs::read_to_string(root.join("leasehold-core/src/lib.rs")).unwrap();
    assert!(lib.contains("#![forbid(unsafe_code)]"));
}

/// Comments and docs point into the repository (docs/safety.md and the other docs), never to a
/// section of a design document a reader of the repository does not have.
#[test]
fn comments_point_into_the_repository() {
    // The check finds such a pointer where there is one.
    let planted = std::env::temp_dir().join(format!("leasehold-layout-{}", std::process::id()));
    std::fs::create_dir_all(planted.join("src/deep")).unwrap();
    std::fs::write(
        planted.join("src/deep/a.rs"),
        "// fine\n/// (Design Section 9)\n",
    )
    .unwrap();
    let caught = lines_containing(&planted, "src", &[".rs"], "design section");
    std::fs::remove_dir_all(&planted).unwrap();
    assert_eq!(caught, ["src/deep/a.rs:2: /// (Design Section 9)"]);

    let root = workspace_root();
    let mut found = Vec::new();
    for dir in [
        "src",
        "leasehold-core/src",
        "testkit/src",
        "examples",
        "tests",
        "xtask",
        "models",
    ] {
        found.extend(lines_containing(&root, dir, &[".rs"], "design section"));
    }
    found.extend(lines_containing(&root, "docs", &[".md"], "design section"));
    // This file names what it looks for.
    found.retain(|l| !l.starts_with("tests/it/layout.rs"));
    assert!(
        found.is_empty(),
        "comments that point to a design document not in the repository (point to docs/ \
         instead):\n  {}",
        found.join("\n  ")
    );
}
